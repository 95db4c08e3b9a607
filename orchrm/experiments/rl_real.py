"""The paper's second use on a real LLM: SmolLM2-135M-Instruct as the orchestrator,
trained with GRPO from one supervised warm-up, with Orch-RM's reward or with execution as
the reward, and its plans executed by the same model on llama.cpp before and after.

Stages, each kept in OUT and reused by a later run with the same settings:

1. **Reward model.** The real-execution benchmark's training side
   (`orchrm.experiments.real_exec`): the template orchestrators' plans for the training
   tasks, executed by SmolLM2 on llama.cpp, mined into pairs, a MiniLM reward model
   trained on them (OUT/rm/...). `RLRealSettings.rm` names one trained before instead.
2. **Warm-up.** Untrained, the model writes no plan that runs. A LoRA is fine-tuned
   on the base template orchestrator's plans for the training tasks (every plan
   structure alike, so the policy starts without knowing which suits which task),
   reading the full orchestrator prompt (`orchrm.rl.pretrained`). Measured: the share of
   sampled plans that parse and validate on held-out tasks, before and after.
3. **GRPO** from the warm-up, the same tasks, steps and sampling seeds for each reward:
   `orchrm` (the reward model scores each sampled plan; nothing executes) and
   `execution` (each sampled plan runs once on llama.cpp; 1 if the answer is right).
   A plan that does not parse or breaks a graph rule gets the reward's penalty.
   Training tokens are counted per step (OUT/grpo-METHOD/steps.jsonl): tokens the policy
   generated, the reward model read, and the sub-agents spent.
4. **Evaluation by executing.** On held-out tasks (another seed), each policy
   (`warmup`: no further training, and each GRPO run) samples `eval_samples` plans a
   task with the same seed; each valid plan is executed `eval_runs` times with seeded
   calls; a task's expected accuracy is the mean success over its plans and runs (an
   invalid plan counts 0). Paired 95% BCa intervals over tasks compare the methods.

Every execution goes through one cache (OUT/executions.jsonl, as the real-execution
benchmark keeps it), so a resumed run executes only what is missing. OUT gets
report.md, report.json and reward.png (the reward and the valid share over steps).
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from orchrm.errors import ConfigError
from orchrm.evaluation.metrics import Bootstrap
from orchrm.experiments.exec_cache import Execution, ExecutionCache, bind_setup, parsed_plan
from orchrm.experiments.real_exec import (
    MIX,
    RealExecSettings,
    Sizes,
    _server,
    execution_setup,
    reward_model,
    run_config,
    serve,
    training_plans,
)
from orchrm.experiments.real_exec_eval import run_seed
from orchrm.jsonl import write_jsonl
from orchrm.orchestration import Orchestration, validate
from orchrm.rl.config import PENALTIES
from orchrm.rl.pretrained import (
    Sample,
    grpo_step,
    load_pretrained,
    make_optimizer,
    prompt_ids,
    sample_groups,
    sft_step,
    stop_ids,
)
from orchrm.runtime.backend import ChatBackend
from orchrm.tasks.benchmarks.generated import GeneratedTask, grade, make_tasks, world_corpus
from orchrm.world.templates import TemplateOrchestrator, structure_of

METHODS = ("warmup", "orchrm", "execution")
"""`warmup`: the warm-up policy with no further training; `orchrm` and `execution`:
GRPO from it with that reward."""
TRAIN_SEED = run_seed(0, 0)
"""Execution seed of the reward model's training plans, as the benchmark runs them."""
REWARD_SEED = run_seed(7, 0)
"""Execution seed of the plans execution-reward GRPO samples (each its own sample
index)."""
EVAL_DRAW = 1
"""Held-out run k of every policy's plans has seed `run_seed(EVAL_DRAW, k)`."""


@dataclass(frozen=True)
class RLRealSizes:
    """Tasks, steps and samples of a run."""

    train_tasks: int
    """Training tasks: the reward model's plans and GRPO's prompts."""
    test_tasks: int
    """Held-out tasks of the evaluation."""
    rm_samples: int
    """Plans a training task from each template orchestrator, for the reward model."""
    rm_steps: int
    """Reward-model training steps (16 pairs each)."""
    warmup_steps: int
    """Supervised warm-up steps."""
    warmup_tasks: int
    """Tasks a warm-up step; each brings `warmup_plans` plans."""
    warmup_plans: int
    """Base template plans a training task in the warm-up's data."""
    steps: int
    """GRPO steps."""
    prompts_per_step: int
    """Tasks a GRPO step."""
    num_generations: int
    """Samples a task a GRPO step (the group)."""
    eval_samples: int
    """Plans a held-out task (M)."""
    eval_runs: int
    """Executions a held-out plan (K)."""
    untrained_tasks: int
    """Held-out tasks the untrained model writes one plan for (its valid share)."""
    max_new_tokens: int = 384
    """Most tokens of a sampled plan (the template plans have 120 to 320)."""


QUICK = RLRealSizes(
    train_tasks=7,
    test_tasks=4,
    rm_samples=2,
    rm_steps=10,
    warmup_steps=4,
    warmup_tasks=2,
    warmup_plans=2,
    steps=2,
    prompts_per_step=2,
    num_generations=2,
    eval_samples=1,
    eval_runs=1,
    untrained_tasks=2,
)
FULL = RLRealSizes(
    train_tasks=28,
    test_tasks=28,
    rm_samples=4,
    rm_steps=150,
    warmup_steps=30,
    warmup_tasks=2,
    warmup_plans=4,
    steps=24,
    prompts_per_step=2,
    num_generations=4,
    eval_samples=2,
    eval_runs=2,
    untrained_tasks=8,
)


@dataclass(frozen=True)
class RLRealSettings:
    """One run's settings: sizes, the policy and its training, the server's."""

    out: str = "runs/rl-real"
    sizes: RLRealSizes = FULL
    methods: tuple[str, ...] = METHODS
    policy: str = "smollm2"
    """The orchestrator: `smollm2` (the bundled GGUF), a causal-LM directory or a GGUF."""
    rm: str = ""
    """A reward model directory; empty: train one into OUT (stage 1)."""
    lora_r: int = 16
    lora_alpha: int = 32
    warmup_lr: float = 1e-3
    lr: float = 2e-4
    """GRPO's learning rate (AdamW on the LoRA, 5% warmup, then constant)."""
    temperature: float = 1.0
    """Sampling temperature while training and evaluating."""
    prompt_grad: bool = False
    """Back-propagate through the prompt too (`orchrm.rl.pretrained`)."""
    micro_batch: int = 8
    """Sequences a forward and backward pass."""
    threads: int = 0
    """PyTorch threads (0: every core)."""
    slots: int = 8
    """llama.cpp's parallel slots."""
    concurrency: int = 16
    """Plans executed at once."""
    max_tokens: int = 96
    """Completion tokens a sub-agent call."""
    seed: int = 0
    progress: bool = True

    def real_exec(self) -> RealExecSettings:
        """The real-execution benchmark's settings this run executes and trains the
        reward model with."""
        s = self.sizes
        return RealExecSettings(
            out=self.out,
            sizes=Sizes(s.train_tasks, s.test_tasks, s.rm_samples, s.rm_steps, 1),
            execution_seeds=(0,),
            max_tokens=self.max_tokens,
            slots=self.slots,
            concurrency=self.concurrency,
            seed=self.seed,
        )

    def check(self) -> None:
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown or not self.methods:
            raise ConfigError(f"methods {list(self.methods)}: choose from {', '.join(METHODS)}")
        if self.sizes.num_generations < 2:
            raise ConfigError("GRPO needs num_generations >= 2 (the group is the baseline)")


Clients = Callable[[], ChatBackend]
"""Makes a fresh client of the server that executes sub-agent calls."""
Serve = Callable[[RealExecSettings], AbstractContextManager[Clients]]


@contextmanager
def llama_clients(settings: RealExecSettings) -> Iterator[Clients]:
    """SmolLM2-135M-Instruct on llama.cpp for the `with` block, as a maker of clients."""
    with serve(settings) as llm:
        yield lambda: _server(llm)


@dataclass
class Executor:
    """Executes plans on the server through the cache, counting what ran."""

    clients: Clients
    cache: ExecutionCache
    settings: RealExecSettings
    progress: bool = True
    seconds: float = 0.0

    def run(self, executions: list[Execution], description: str) -> None:
        """Execute what the cache lacks of `executions`."""
        missing = self.cache.missing(executions)
        if not missing:
            return
        started = time.perf_counter()

        async def go():
            async with self.clients() as server:
                await self.cache.execute(
                    server,
                    missing,
                    run_config(self.settings),
                    retriever=world_corpus(),
                    progress=self.progress,
                    description=description,
                )

        asyncio.run(go())
        self.seconds += time.perf_counter() - started

    def outcome(self, e: Execution, task: GeneratedTask) -> tuple[bool, int]:
        """(right, tokens) of an executed run; (False, 0) for one that failed."""
        result = self.cache.result(e)
        if result is None or result.error is not None:
            return False, result.total_tokens if result else 0
        return bool(grade(result.answer, task.task.answer)), result.total_tokens


def _runnable(text: str) -> Orchestration | None:
    parsed = parsed_plan(text)
    if isinstance(parsed, Orchestration) and not validate(parsed):
        return parsed
    return None


def _shape(o: Orchestration) -> str:
    """The plan's template structure, or its agent types in order for another plan."""
    record = {"orchestration": {"agents": [{"type": a.type, "id": a.id} for a in o.agents]}}
    known = structure_of(record)
    return known if known != "?" else ">".join(a.type for a in o.agents)


# --------------------------------------------------------------------------- warm-up


def _completion_ids(tokenizer, text: str) -> list[int]:
    """A plan's tokens as the policy writes them: the text, then the end of its turn."""
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if not isinstance(end, int) or end not in stop_ids(tokenizer):
        end = tokenizer.eos_token_id
    return tokenizer(text, add_special_tokens=False)["input_ids"] + [end]


def warmup(settings: RLRealSettings, train: list[GeneratedTask], say) -> dict:
    """Stage 2: a LoRA fine-tuned on the base template plans of the training tasks, saved
    in OUT/warmup/adapter (reused when its settings match). Returns its summary."""
    out = Path(settings.out) / "warmup"
    s = settings.sizes
    key = {
        "policy": settings.policy,
        "lora": [settings.lora_r, settings.lora_alpha],
        "lr": settings.warmup_lr,
        "steps": s.warmup_steps,
        "tasks": [s.train_tasks, s.warmup_tasks, s.warmup_plans],
        "seed": settings.seed,
    }
    summary_path = out / "warmup.json"
    if summary_path.exists() and (out / "adapter" / "adapter_config.json").exists():
        held = json.loads(summary_path.read_text())
        if held.get("key") == key:
            say(f"warm-up: reused {out / 'adapter'}")
            return held
    model, tokenizer = load_pretrained(
        settings.policy, lora_r=settings.lora_r, lora_alpha=settings.lora_alpha, seed=settings.seed
    )
    base = TemplateOrchestrator("base", specialized=False, seed=settings.seed)
    data = [
        (
            prompt_ids(tokenizer, t.task.question),
            [_completion_ids(tokenizer, base.write(t, k)[0]) for k in range(s.warmup_plans)],
        )
        for t in train
    ]
    optimizer, scheduler = make_optimizer(model, settings.warmup_lr, s.warmup_steps)
    rng = random.Random(f"warmup:{settings.seed}")
    losses, tokens = [], 0
    started = time.perf_counter()
    from orchrm.progress import progress_bar

    with progress_bar("warm-up (supervised)", s.warmup_steps, settings.progress) as (bar, tr):
        for _ in range(s.warmup_steps):
            picked = rng.sample(range(len(data)), min(s.warmup_tasks, len(data)))
            prompts = [data[i][0] for i in picked]
            rows = [(j, c) for j, i in enumerate(picked) for c in data[i][1]]
            tokens += sum(len(prompts[j]) + len(c) for j, c in rows)
            losses.append(
                sft_step(
                    model,
                    tokenizer,
                    optimizer,
                    scheduler,
                    prompts,
                    rows,
                    micro_batch=settings.micro_batch,
                )
            )
            bar.advance(tr)
    seconds = time.perf_counter() - started
    model.save_pretrained(out / "adapter")
    summary = {
        "key": key,
        "steps": s.warmup_steps,
        "examples": sum(len(c) for _, c in data),
        "loss_first": losses[0],
        "loss_last": statistics.fmean(losses[-5:]),
        "losses": losses,
        "tokens": tokens,
        "seconds": round(seconds, 1),
        "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
    }
    summary_path.write_text(json.dumps(summary, indent=2))
    say(
        f"warm-up: {s.warmup_steps} steps, loss {losses[0]:.3f} -> {summary['loss_last']:.3f}, "
        f"{seconds:.0f} s -> {out / 'adapter'}"
    )
    return summary


# --------------------------------------------------------------------------- GRPO


@dataclass
class Rewarder:
    """A GRPO reward: rewards of one step's samples (flat, task by task) and the tokens
    they cost, by kind (`rm`, `execution`)."""

    method: str
    penalty: float
    scorer: object = None
    executor: Executor | None = None
    samples: int = 0

    def __call__(self, tasks: list[GeneratedTask], groups: list[list[Sample]]):
        flat = [(t, s) for t, group in zip(tasks, groups, strict=True) for s in group]
        plans = [_runnable(s.text) for _, s in flat]
        if self.method == "orchrm":
            return self._scores(flat, plans)
        return self._executions(flat, plans)

    def _scores(self, flat, plans):
        from orchrm.rl.rewards import OrchRMReward, TokenLedger

        reward = OrchRMReward(self.scorer, self.penalty, True, TokenLedger())
        texts = [s.text for _, s in flat]
        rewards = reward(None, texts, question=[t.task.question for t, _ in flat])
        return rewards, {"rm": reward.ledger.totals["rm"], "execution": 0}

    def _executions(self, flat, plans):
        runs = []
        for (t, s), o in zip(flat, plans, strict=True):
            if o is not None:
                runs.append(Execution(t.task, self.samples, s.text, REWARD_SEED, o))
            else:
                runs.append(None)
            self.samples += 1
        self.executor.run([e for e in runs if e is not None], "executing the samples")
        rewards, tokens = [], 0
        for (t, _), e in zip(flat, runs, strict=True):
            if e is None:
                rewards.append(self.penalty)
                continue
            right, used = self.executor.outcome(e, t)
            rewards.append(1.0 if right else 0.0)
            tokens += used
        return rewards, {"rm": 0, "execution": tokens}


def grpo(
    settings: RLRealSettings,
    method: str,
    train: list[GeneratedTask],
    rewarder: Rewarder,
    say,
):
    """Stage 3 for one reward: GRPO from the warm-up adapter; the adapter in
    OUT/grpo-METHOD/adapter, one row a step in steps.jsonl. Returns (model, tokenizer,
    summary). A run whose summary matches its settings is reloaded, not trained again."""
    out = Path(settings.out) / f"grpo-{method}"
    s = settings.sizes
    key = {
        "warmup": json.loads((Path(settings.out) / "warmup" / "warmup.json").read_text())["key"],
        "lr": settings.lr,
        "steps": s.steps,
        "group": [s.prompts_per_step, s.num_generations, s.max_new_tokens],
        "temperature": settings.temperature,
        "prompt_grad": settings.prompt_grad,
        "penalty": rewarder.penalty,
        "rm": settings.rm or "built",
    }
    summary_path = out / "summary.json"
    if summary_path.exists() and (out / "adapter" / "adapter_config.json").exists():
        held = json.loads(summary_path.read_text())
        if held.get("key") == key:
            say(f"grpo-{method}: reused {out / 'adapter'}")
            model, tokenizer = load_pretrained(settings.policy, adapter=out / "adapter")
            return model, tokenizer, held
    model, tokenizer = load_pretrained(
        settings.policy, adapter=Path(settings.out) / "warmup" / "adapter"
    )
    optimizer, scheduler = make_optimizer(model, settings.lr, s.steps)
    prompts = {t.task.id: prompt_ids(tokenizer, t.task.question) for t in train}
    order: list[GeneratedTask] = []
    rng = random.Random(f"grpo:{settings.seed}")
    generator = torch.Generator().manual_seed(settings.seed)
    rows, started = [], time.perf_counter()
    from orchrm.progress import progress_bar

    with progress_bar(f"grpo-{method}", s.steps, settings.progress) as (bar, tracker):
        for step in range(1, s.steps + 1):
            batch = []
            while len(batch) < s.prompts_per_step:
                if not order:
                    order = rng.sample(train, len(train))
                batch.append(order.pop())
            ids = [prompts[t.task.id] for t in batch]
            t0 = time.perf_counter()
            groups = sample_groups(
                model,
                tokenizer,
                ids,
                s.num_generations,
                s.max_new_tokens,
                temperature=settings.temperature,
                generator=generator,
            )
            t1 = time.perf_counter()
            rewards, cost = rewarder(batch, groups)
            t2 = time.perf_counter()
            stats = grpo_step(
                model,
                tokenizer,
                optimizer,
                scheduler,
                ids,
                groups,
                rewards,
                micro_batch=settings.micro_batch,
                prompt_grad=settings.prompt_grad,
            )
            t3 = time.perf_counter()
            flat = [x for g in groups for x in g]
            rows.append(
                {
                    "step": step,
                    "reward": statistics.fmean(rewards),
                    "valid": statistics.fmean(_runnable(x.text) is not None for x in flat),
                    "policy": sum(x.tokens for x in flat),
                    **cost,
                    **stats,
                    "sample_s": round(t1 - t0, 2),
                    "reward_s": round(t2 - t1, 2),
                    "update_s": round(t3 - t2, 2),
                }
            )
            write_jsonl(rows, out / "steps.jsonl")
            bar.advance(tracker)
    seconds = time.perf_counter() - started
    model.save_pretrained(out / "adapter")
    totals = {k: sum(r[k] for r in rows) for k in ("policy", "rm", "execution")}
    summary = {
        "key": key,
        "steps": rows,
        "tokens": totals,
        "seconds": round(seconds, 1),
        "seconds_by_part": {
            part: round(sum(r[f"{part}_s"] for r in rows), 1)
            for part in ("sample", "reward", "update")
        },
    }
    summary_path.write_text(json.dumps(summary, indent=2))
    say(
        f"grpo-{method}: {s.steps} steps in {seconds:.0f} s; reward "
        f"{rows[0]['reward']:.2f} -> {statistics.fmean(r['reward'] for r in rows[-5:]):.2f}; "
        f"tokens policy {totals['policy']:,}, reward model {totals['rm']:,}, "
        f"execution {totals['execution']:,}"
    )
    return model, tokenizer, summary


# --------------------------------------------------------------------------- evaluation


@dataclass
class PolicyResult:
    """A policy's plans on the held-out tasks, executed."""

    name: str
    per_task: list[float]
    """Expected accuracy of each task (mean over its plans and runs)."""
    valid: float
    parsed: float
    mean_tokens: float
    by_kind: dict[str, float]
    shapes: dict[str, dict[str, int]]
    """Plan structures chosen, per task kind."""
    seconds: float
    expected: float = 0.0
    ci: tuple[float, float] = (0.0, 0.0)
    examples: list[str] = field(default_factory=list)


def evaluate(
    name: str,
    model,
    tokenizer,
    tasks: list[GeneratedTask],
    settings: RLRealSettings,
    executor: Executor | None,
    say,
    samples: int = 0,
) -> PolicyResult:
    """Stage 4 for one policy: `eval_samples` plans a held-out task, sampled with the
    evaluation's seed; each valid one executed `eval_runs` times (none when `executor`
    is None: validity only)."""
    s = settings.sizes
    samples = samples or s.eval_samples
    started = time.perf_counter()
    generator = torch.Generator().manual_seed(settings.seed + 1)
    ids = [prompt_ids(tokenizer, t.task.question) for t in tasks]
    groups = []
    for i in range(0, len(ids), 8):
        groups += sample_groups(
            model,
            tokenizer,
            ids[i : i + 8],
            samples,
            s.max_new_tokens,
            temperature=settings.temperature,
            generator=generator,
        )
    plans = [[_runnable(x.text) for x in g] for g in groups]
    runs = {}
    for t, group, row in zip(tasks, groups, plans, strict=True):
        for k, (x, o) in enumerate(zip(group, row, strict=True)):
            if o is not None:
                runs[(t.task.id, k)] = [
                    Execution(t.task, k, x.text, run_seed(EVAL_DRAW, r), o)
                    for r in range(s.eval_runs)
                ]
    if executor is not None:
        executor.run([e for es in runs.values() for e in es], f"executing {name}'s plans")
    per_task, kinds, shapes = [], {}, {}
    for t, row in zip(tasks, plans, strict=True):
        scores = []
        for k, o in enumerate(row):
            if o is None or executor is None:
                scores += [0.0] * s.eval_runs
                continue
            shapes.setdefault(t.kind, Counter())[_shape(o)] += 1
            scores += [float(executor.outcome(e, t)[0]) for e in runs[(t.task.id, k)]]
        per_task.append(statistics.fmean(scores))
        kinds.setdefault(t.kind, []).append(per_task[-1])
    flat = [x for g in groups for x in g]
    result = PolicyResult(
        name=name,
        per_task=per_task,
        valid=statistics.fmean(o is not None for row in plans for o in row),
        parsed=statistics.fmean(not isinstance(parsed_plan(x.text), Exception) for x in flat),
        mean_tokens=statistics.fmean(x.tokens for x in flat),
        by_kind={k: statistics.fmean(v) for k, v in sorted(kinds.items())},
        shapes={k: dict(v.most_common()) for k, v in sorted(shapes.items())},
        seconds=round(time.perf_counter() - started, 1),
        examples=[flat[0].text] if flat else [],
    )
    result.expected = statistics.fmean(per_task)
    result.ci = Bootstrap(seed=settings.seed).mean(per_task)
    say(
        f"{name}: expected accuracy {100 * result.expected:.1f}% "
        f"({100 * result.ci[0]:.1f}-{100 * result.ci[1]:.1f}), valid {100 * result.valid:.0f}%, "
        f"{result.seconds:.0f} s"
    )
    return result


# --------------------------------------------------------------------------- the run


def _reward_model(settings: RLRealSettings, executor: Executor, train, say) -> Path:
    """Stage 1: the reward model's directory (`settings.rm`, or trained into OUT)."""
    if settings.rm:
        if not Path(settings.rm).is_dir():
            raise ConfigError(f"--rm {settings.rm}: no such directory")
        return Path(settings.rm)
    real = settings.real_exec()
    plans = training_plans(real, train)
    executor.run([p.at(TRAIN_SEED) for p in plans], "executing the reward model's plans")
    trained, _ = reward_model(real, plans, TRAIN_SEED, executor.cache, say=say)
    return trained.model


def run(
    settings: RLRealSettings, say: Callable[[str], None] = print, backend: Serve = llama_clients
):
    """Every stage (module docstring); writes OUT/report.md, report.json and reward.png
    and returns the report's dictionary."""
    from orchrm.scoring.load import load_scorer

    settings.check()
    # transformers' and peft's notices about their own calls, once per step or save
    warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")
    warnings.filterwarnings("ignore", message=".*Could not find a config file.*")
    threads = settings.threads or torch.get_num_threads()
    torch.set_num_threads(threads)
    out, s = Path(settings.out), settings.sizes
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    real = settings.real_exec()
    train = make_tasks(MIX, s.train_tasks, settings.seed, "train")
    test = make_tasks(MIX, s.test_tasks, settings.seed + 1, "test")
    bind_setup(out / "executions.jsonl", execution_setup(real))
    cache = ExecutionCache(out / "executions.jsonl")
    say(
        f"rl-real: policy {settings.policy} (LoRA r={settings.lora_r}), {s.train_tasks} "
        f"training tasks, {s.test_tasks} held-out tasks x {s.eval_samples} plans x "
        f"{s.eval_runs} runs; GRPO {s.steps} steps of {s.prompts_per_step} tasks x "
        f"{s.num_generations} samples; sub-agents: SmolLM2-135M-Instruct on llama.cpp"
    )
    results: dict[str, PolicyResult] = {}
    runs: dict[str, dict] = {}
    with backend(real) as clients:
        executor = Executor(clients, cache, real, settings.progress)
        rm_dir = _reward_model(settings, executor, train, say)
        wall = {"reward model": round(time.perf_counter() - started, 1)}

        model, tokenizer = load_pretrained(
            settings.policy, lora_r=settings.lora_r, seed=settings.seed
        )
        with model.disable_adapter():
            shown = test[: s.untrained_tasks]
            untrained = evaluate("untrained", model, tokenizer, shown, settings, executor, say, 1)
        del model
        warm = warmup(settings, train, say)
        model, tokenizer = load_pretrained(settings.policy, adapter=out / "warmup" / "adapter")
        results["warmup"] = evaluate("warmup", model, tokenizer, test, settings, executor, say)
        del model
        scorer = None
        for method in settings.methods:
            if method == "warmup":
                continue
            if method == "orchrm" and scorer is None:
                scorer = load_scorer(rm_dir, None, device="cpu", batch_size=8)
            rewarder = Rewarder(method, PENALTIES[method], scorer, executor)
            executed = executor.seconds
            model, tokenizer, summary = grpo(settings, method, train, rewarder, say)
            summary["execution_s"] = round(executor.seconds - executed, 1)
            runs[method] = summary
            results[method] = evaluate(method, model, tokenizer, test, settings, executor, say)
            del model
    report = _report(
        settings, untrained, warm, results, runs, rm_dir, time.perf_counter() - started
    )
    report["seconds"]["reward model"] = wall["reward model"]
    (out / "report.json").write_text(json.dumps(report, indent=2))
    if runs:
        plot_rewards(runs, out / "reward.png")
    (out / "report.md").write_text(report_text(report), encoding="utf-8")
    say(report_text(report))
    return report


def _versus(a: PolicyResult, b: PolicyResult, seed: int) -> dict:
    diff = statistics.fmean(a.per_task) - statistics.fmean(b.per_task)
    low, high = Bootstrap(seed=seed).difference(a.per_task, b.per_task)
    return {"difference": diff, "ci": [low, high]}


def _report(settings, untrained, warm, results, runs, rm_dir, seconds) -> dict:
    methods = {}
    for name, r in results.items():
        run = runs.get(name, {})
        tokens = run.get("tokens", {"policy": 0, "rm": 0, "execution": 0})
        methods[name] = {
            **asdict(r),
            "training_tokens": tokens,
            "training_tokens_total": sum(tokens.values()),
            "train_seconds": run.get("seconds", 0.0),
            "train_seconds_by_part": run.get("seconds_by_part", {}),
            "versus_warmup": _versus(r, results["warmup"], settings.seed)
            if name != "warmup"
            else None,
        }
    pairs = {}
    if "orchrm" in results and "execution" in results:
        pairs["orchrm - execution"] = _versus(
            results["orchrm"], results["execution"], settings.seed
        )
        ex = methods["execution"]["training_tokens_total"]
        rm = max(1, methods["orchrm"]["training_tokens_total"])
        pairs["execution / orchrm training tokens"] = ex / rm
    return {
        "settings": asdict(settings) | {"sizes": asdict(settings.sizes)},
        "reward_model": str(rm_dir),
        "untrained": asdict(untrained),
        "warmup": {k: v for k, v in warm.items() if k != "losses"},
        "methods": methods,
        "pairs": pairs,
        "curves": {m: run["steps"] for m, run in runs.items()},
        "seconds": {"total": round(seconds, 1)},
    }


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def report_text(report: dict) -> str:
    """report.md from the report's dictionary."""
    s = report["settings"]["sizes"]
    w, u = report["warmup"], report["untrained"]
    lines = [
        "# GRPO of SmolLM2-135M-Instruct as the orchestrator, plans executed on llama.cpp\n",
        f"Held-out: {s['test_tasks']} tasks x {s['eval_samples']} plans x {s['eval_runs']} "
        f"seeded executions. GRPO: {s['steps']} steps of {s['prompts_per_step']} tasks x "
        f"{s['num_generations']} samples from the same warm-up.\n",
        f"- untrained: {_pct(u['valid'])}% of sampled plans valid ({_pct(u['parsed'])}% parse)",
        f"- warm-up: {w['steps']} supervised steps on {w['examples']} base template plans, "
        f"loss {w['loss_first']:.3f} -> {w['loss_last']:.3f}, {w['seconds']:.0f} s, "
        f"{w['tokens']:,} tokens read; valid plans "
        f"{_pct(report['methods']['warmup']['valid'])}%\n",
        "| method | expected accuracy % (95% CI) | vs warm-up, points (paired 95% CI) | valid % "
        "| training tokens: policy / RM / execution | training s |",
        "| --- | --- | --- | ---: | --- | ---: |",
    ]
    for name, m in report["methods"].items():
        v = m["versus_warmup"]
        vs = (
            f"{100 * v['difference']:+.1f} ({100 * v['ci'][0]:+.1f} to {100 * v['ci'][1]:+.1f})"
            if v
            else ""
        )
        t = m["training_tokens"]
        lines.append(
            f"| {name} | {_pct(m['expected'])} ({_pct(m['ci'][0])}-{_pct(m['ci'][1])}) | {vs} | "
            f"{_pct(m['valid'])} | {t['policy']:,} / {t['rm']:,} / {t['execution']:,} | "
            f"{m['train_seconds']:.0f} |"
        )
    pairs = report["pairs"]
    if pairs:
        d = pairs["orchrm - execution"]
        lines.append(
            f"\nOrch-RM reward - execution reward: {100 * d['difference']:+.1f} points "
            f"({100 * d['ci'][0]:+.1f} to {100 * d['ci'][1]:+.1f}); execution-reward GRPO "
            f"spent {pairs['execution / orchrm training tokens']:.1f}x the training tokens."
        )
    kinds = sorted({k for m in report["methods"].values() for k in m["by_kind"]})
    lines += ["\n| task kind | " + " | ".join(report["methods"]) + " |"]
    lines.append("| --- |" + " ---: |" * len(report["methods"]))
    for k in kinds:
        cells = [_pct(m["by_kind"].get(k, 0.0)) for m in report["methods"].values()]
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    lines.append("\nPlan structures chosen (valid plans), by task kind:\n")
    for name, m in report["methods"].items():
        for k, shapes in m["shapes"].items():
            top = ", ".join(f"{shape} {n}" for shape, n in list(shapes.items())[:3])
            lines.append(f"- {name}, {k}: {top}")
    lines.append(f"\nWall time: {report['seconds']['total']:.0f} s.")
    return "\n".join(lines) + "\n"


def plot_rewards(runs: dict[str, dict], path: Path) -> Path:
    """The mean reward and the valid share of each step, one panel each, per GRPO run."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.6), layout="constrained")
    reward_ax, valid_ax = fig.subplots(1, 2)
    for method, run in runs.items():
        steps = [r["step"] for r in run["steps"]]
        reward_ax.plot(steps, [r["reward"] for r in run["steps"]], marker=".", label=method)
        valid_ax.plot(steps, [r["valid"] for r in run["steps"]], marker=".", label=method)
    reward_ax.set_title("mean reward of the step's samples")
    reward_ax.set_xlabel("GRPO step")
    valid_ax.set_title("share of valid plans")
    valid_ax.set_xlabel("GRPO step")
    valid_ax.set_ylim(0, 1.02)
    reward_ax.legend()
    fig.savefig(path, dpi=120)
    return path

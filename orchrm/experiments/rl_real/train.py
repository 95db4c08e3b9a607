"""The SmolLM2 GRPO comparison's training stages (`orchrm.experiments.rl_real.run`): the
supervised warm-up on template plans, and GRPO from it with the Orch-RM or the
execution reward, each kept in OUT and reused while its settings hold."""

from __future__ import annotations

import hashlib
import json
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from orchrm.experiments.real_exec.cache import Execution
from orchrm.experiments.rl_real.config import (
    REWARD_SEED,
    Executor,
    RLRealSettings,
    runnable_plan,
)
from orchrm.jsonl import write_jsonl
from orchrm.progress import progress_bar
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
from orchrm.tasks.benchmarks.generated import GeneratedTask
from orchrm.world.templates import TemplateOrchestrator


def _turn_end(tokenizer) -> int:
    """The token a chat model ends its turn with (`<|im_end|>`, else the eos)."""
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    return end if isinstance(end, int) and end in stop_ids(tokenizer) else tokenizer.eos_token_id


def _held(out: Path, summary_name: str, key: dict) -> dict | None:
    """The summary a stage kept in OUT/STAGE (`summary_name`, beside its adapter) when it
    was made with `key` and the adapter is there, else None."""
    summary_path = out / summary_name
    if summary_path.exists() and (out / "adapter" / "adapter_config.json").exists():
        held = json.loads(summary_path.read_text())
        if held.get("key") == key:
            return held
    return None


def _warmup_key(settings: RLRealSettings) -> dict:
    """The settings the warm-up adapter depends on."""
    s = settings.sizes
    return {
        "policy": settings.policy,
        "lora": [settings.lora_r, settings.lora_alpha],
        "lr": settings.warmup_lr,
        "steps": s.warmup_steps,
        "tasks": [s.train_tasks, s.warmup_tasks, s.warmup_plans],
        "seed": settings.seed,
    }


def _warmup_data(settings: RLRealSettings, train: list[GeneratedTask], tokenizer) -> list:
    """Each training task's prompt ids and `warmup_plans` base template plans, each as
    the policy writes it: the plan's tokens, then the end of its turn."""
    base = TemplateOrchestrator("base", specialized=False, seed=settings.seed)
    end = _turn_end(tokenizer)
    return [
        (
            prompt_ids(tokenizer, t.task.question),
            [
                tokenizer(base.write(t, k)[0], add_special_tokens=False)["input_ids"] + [end]
                for k in range(settings.sizes.warmup_plans)
            ],
        )
        for t in train
    ]


def _sft_steps(settings: RLRealSettings, model, tokenizer, data: list) -> tuple[list[float], int]:
    """`warmup_steps` supervised steps, each on the plans of `warmup_tasks` tasks drawn
    afresh: the loss of each step and the tokens read."""
    s = settings.sizes
    optimizer, scheduler = make_optimizer(model, settings.warmup_lr, s.warmup_steps)
    rng = random.Random(f"warmup:{settings.seed}")
    losses, tokens = [], 0
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
    return losses, tokens


def warmup(settings: RLRealSettings, train: list[GeneratedTask], say) -> dict:
    """Stage 2: a LoRA fine-tuned on the base template plans of the training tasks, saved
    in OUT/warmup/adapter (reused when its settings match). Returns its summary."""
    out = Path(settings.out) / "warmup"
    s = settings.sizes
    key = _warmup_key(settings)
    held = _held(out, "warmup.json", key)
    if held is not None:
        say(f"warm-up: reused {out / 'adapter'}")
        return held
    model, tokenizer = load_pretrained(
        settings.policy, lora_r=settings.lora_r, lora_alpha=settings.lora_alpha, seed=settings.seed
    )
    data = _warmup_data(settings, train, tokenizer)
    started = time.perf_counter()
    losses, tokens = _sft_steps(settings, model, tokenizer, data)
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
    (out / "warmup.json").write_text(json.dumps(summary, indent=2))
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
    rm: object = field(default=None, init=False)
    """The `OrchRMReward` of the whole run (its cache scores a (question, plan) once)."""

    def __post_init__(self) -> None:
        if self.method == "orchrm":
            from orchrm.rl.rewards import OrchRMReward

            self.rm = OrchRMReward(self.scorer, self.penalty, True)

    def __call__(self, tasks: list[GeneratedTask], groups: list[list[Sample]]):
        flat = [(t, s) for t, group in zip(tasks, groups, strict=True) for s in group]
        if self.method == "orchrm":
            return self._scores(flat)
        return self._executions(flat)

    def _scores(self, flat):
        """Orch-RM's rewards (`rm`); its ledger's last row has this step's tokens."""
        texts = [s.text for _, s in flat]
        rewards = self.rm(None, texts, question=[t.task.question for t, _ in flat])
        return rewards, {"rm": self.rm.ledger.rows[-1]["rm"], "execution": 0}

    def _executions(self, flat):
        plans = [runnable_plan(s.text) for _, s in flat]
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


def _rm_identity(settings: RLRealSettings) -> str:
    """The reward model a GRPO run reads, by content: the SHA-256 of its orchrm.json
    (its training data's hash, steps, seeds and statistics), so a model trained again
    with other settings trains the policy again."""
    rm = Path(settings.rm) if settings.rm else Path(settings.out) / "rm" / "model"
    meta = rm / "orchrm.json"
    return hashlib.sha256(meta.read_bytes()).hexdigest() if meta.is_file() else "none"


def _grpo_key(settings: RLRealSettings, rewarder: Rewarder) -> dict:
    """The settings a GRPO run's adapter depends on, the warm-up's key among them, and
    for the Orch-RM reward the reward model."""
    s = settings.sizes
    rm = {"rm": _rm_identity(settings)} if rewarder.method == "orchrm" else {}
    return {
        "warmup": json.loads((Path(settings.out) / "warmup" / "warmup.json").read_text())["key"],
        "lr": settings.lr,
        "steps": s.steps,
        "group": [s.prompts_per_step, s.num_generations, s.max_new_tokens],
        "temperature": settings.temperature,
        "prompt_grad": settings.prompt_grad,
        "penalty": rewarder.penalty,
        **rm,
    }


def _next_batch(
    order: list[GeneratedTask], rng: random.Random, train: list[GeneratedTask], size: int
) -> list[GeneratedTask]:
    """`size` tasks taken from the end of `order`, which is refilled with a fresh
    shuffle of `train` (drawn from `rng`) whenever it runs out."""
    batch = []
    while len(batch) < size:
        if not order:
            order[:] = rng.sample(train, len(train))
        batch.append(order.pop())
    return batch


def _grpo_step(
    settings: RLRealSettings,
    step: int,
    model,
    tokenizer,
    optimization: tuple,
    ids: list[list[int]],
    batch: list[GeneratedTask],
    rewarder: Rewarder,
    generator: torch.Generator,
) -> dict:
    """One GRPO step: sample each prompt's group, reward it, update the LoRA
    (`optimization`: the optimizer and the scheduler); returns the step's row of
    steps.jsonl (mean reward, valid share, tokens, the update's statistics and the
    seconds of each part)."""
    s = settings.sizes
    optimizer, scheduler = optimization
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
    return {
        "step": step,
        "reward": statistics.fmean(rewards),
        "valid": statistics.fmean(runnable_plan(x.text) is not None for x in flat),
        "policy": sum(x.tokens for x in flat),
        **cost,
        **stats,
        "sample_s": round(t1 - t0, 2),
        "reward_s": round(t2 - t1, 2),
        "update_s": round(t3 - t2, 2),
    }


def _grpo_summary(key: dict, rows: list[dict], seconds: float) -> dict:
    """A GRPO run's summary: its key, its steps' rows, the tokens by kind and the
    seconds, in all and by part."""
    totals = {k: sum(r[k] for r in rows) for k in ("policy", "rm", "execution")}
    return {
        "key": key,
        "steps": rows,
        "tokens": totals,
        "seconds": round(seconds, 1),
        "seconds_by_part": {
            part: round(sum(r[f"{part}_s"] for r in rows), 1)
            for part in ("sample", "reward", "update")
        },
    }


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
    key = _grpo_key(settings, rewarder)
    held = _held(out, "summary.json", key)
    if held is not None:
        say(f"grpo-{method}: reused {out / 'adapter'}")
        model, tokenizer = load_pretrained(settings.policy, adapter=out / "adapter")
        return model, tokenizer, held
    model, tokenizer = load_pretrained(
        settings.policy, adapter=Path(settings.out) / "warmup" / "adapter"
    )
    optimization = make_optimizer(model, settings.lr, s.steps)
    prompts = {t.task.id: prompt_ids(tokenizer, t.task.question) for t in train}
    order: list[GeneratedTask] = []
    rng = random.Random(f"grpo:{settings.seed}")
    generator = torch.Generator().manual_seed(settings.seed)
    rows, started = [], time.perf_counter()
    with progress_bar(f"grpo-{method}", s.steps, settings.progress) as (bar, tracker):
        for step in range(1, s.steps + 1):
            batch = _next_batch(order, rng, train, s.prompts_per_step)
            ids = [prompts[t.task.id] for t in batch]
            row = _grpo_step(
                settings, step, model, tokenizer, optimization, ids, batch, rewarder, generator
            )
            rows.append(row)
            write_jsonl(rows, out / "steps.jsonl")
            bar.advance(tracker)
    seconds = time.perf_counter() - started
    model.save_pretrained(out / "adapter")
    summary = _grpo_summary(key, rows, seconds)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    totals = summary["tokens"]
    say(
        f"grpo-{method}: {s.steps} steps in {seconds:.0f} s; reward "
        f"{rows[0]['reward']:.2f} -> {statistics.fmean(r['reward'] for r in rows[-5:]):.2f}; "
        f"tokens policy {totals['policy']:,}, reward model {totals['rm']:,}, "
        f"execution {totals['execution']:,}"
    )
    return model, tokenizer, summary

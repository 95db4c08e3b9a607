"""The SmolLM2 GRPO comparison's training stages (`orchrm.experiments.rl_real.run`): the
supervised warm-up on template plans, and GRPO from it with the Orch-RM or the
execution reward, each kept in OUT and reused while its settings hold."""

from __future__ import annotations

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
    end = _turn_end(tokenizer)
    # a plan's tokens as the policy writes them: the text, then the end of its turn
    data = [
        (
            prompt_ids(tokenizer, t.task.question),
            [
                tokenizer(base.write(t, k)[0], add_special_tokens=False)["input_ids"] + [end]
                for k in range(s.warmup_plans)
            ],
        )
        for t in train
    ]
    optimizer, scheduler = make_optimizer(model, settings.warmup_lr, s.warmup_steps)
    rng = random.Random(f"warmup:{settings.seed}")
    losses, tokens = [], 0
    started = time.perf_counter()
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
                    "valid": statistics.fmean(runnable_plan(x.text) is not None for x in flat),
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

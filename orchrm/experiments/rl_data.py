"""What orchestrator training starts from, built offline from the world: logs, training
prompts, the default policy, a reward model, and DPO pairs.

One world log (both world orchestrators on the training tasks, executed) feeds all of
them, through the same path a user takes with real logs: the base orchestrator's outputs
are the policy's supervised data; the log is ingested into a store, pairs are mined
(specialized-over-base and correct-over-incorrect, 1:3) and the reward model is trained
on them; the same pairs, as raw harmony texts, are DPO's data. Each artifact is reused
when it is already in OUT, so a comparison builds it once.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from orchrm.errors import InputError
from orchrm.experiments.rl_config import RLExperimentConfig
from orchrm.experiments.world_models import PairDataset, WorldRMConfig, world_reward_models
from orchrm.jsonl import read_jsonl, write_jsonl
from orchrm.rl.policy import (
    new_policy,
    policy_prompt,
    save_policy,
    sft,
    train_tokenizer,
)
from orchrm.runtime import prompts
from orchrm.world.tasks import WorldTask, generate_tasks


@dataclass
class WorldLogs:
    """The training log of one preset: its records and what producing them cost."""

    path: Path
    records: list[dict]
    execution_tokens: int
    """Sub-agent tokens spent executing the log (the one-off data cost behind the reward
    model and the DPO pairs)."""


def train_tasks(config: RLExperimentConfig) -> list[WorldTask]:
    """The training tasks (seed `config.seed`)."""
    return generate_tasks(config.preset, config.train_tasks, config.seed)


def eval_tasks(config: RLExperimentConfig) -> list[WorldTask]:
    """The held-out tasks (seed `config.seed + 1`: task ids never collide with training)."""
    return generate_tasks(config.preset, config.eval_tasks, config.seed + 1)


def prompt_rows(tasks, chat: bool = False, dom: str = "high") -> list[dict]:
    """GRPO's dataset rows for tasks (world tasks, or `orchrm.tasks.run.Task`s read
    from a benchmark): the `prompt`, plus the columns the reward functions read
    (`question`, `task_id`, `answer`, `domain`). `chat`: the full orchestrator prompt of
    `orchrm.runtime.prompts` as messages, for a chat model (the GPU path); else the tiny
    policy's compact prompt."""
    return [
        {
            "prompt": prompts.orchestrator(t.question, dom) if chat else policy_prompt(t.question),
            "question": t.question,
            "task_id": t.id,
            "answer": t.answer,
            "domain": t.domain,
        }
        for t in tasks
    ]


def world_logs(config: RLExperimentConfig, say=print) -> WorldLogs:
    """The training log, generated (both world orchestrators, executed) or reused."""
    from orchrm.world.generate import generate

    out = Path(config.out) / "world"
    path = out / f"{config.preset}.train.jsonl"
    meta_path = out / f"{config.preset}.train.meta.json"
    meta = {
        "preset": config.preset,
        "tasks": config.train_tasks,
        "samples": config.log_samples,
        "seed": config.seed,
    }
    if path.exists() and meta_path.exists() and json.loads(meta_path.read_text()) == meta:
        records = [r for _, r in read_jsonl(path)]
    else:
        start = time.perf_counter()
        generated = generate(
            config.preset, config.train_tasks, config.log_samples, config.seed, config.progress
        )
        records = generated.records
        write_jsonl(records, path)
        meta_path.write_text(json.dumps(meta))
        say(
            f"world log: {len(records)} records of {config.train_tasks} {config.preset} tasks "
            f"({time.perf_counter() - start:.0f} s) -> {path}"
        )
    tokens = sum(r["tokens"]["execution"] for r in records)
    return WorldLogs(path, records, tokens)


def build_policy(config: RLExperimentConfig, logs: WorldLogs, say=print) -> Path:
    """The offline default policy in OUT/policy: a tokenizer trained on the questions and
    the base orchestrator's outputs, then supervised fine-tuning on (prompt -> output).
    Reused when present. Writes `policy.json` with the loss and the build time."""
    path = Path(config.out) / "policy"
    if (path / "config.json").exists():
        return path
    base = [r for r in logs.records if r["orchestrator"] == "base" and r["raw"]]
    if not base:
        raise InputError(f"{logs.path} has no base-orchestrator outputs to learn from")
    examples = [(policy_prompt(r["question"]), r["raw"]) for r in base]
    start = time.perf_counter()
    questions = sorted({p for p, _ in examples})
    pc = config.tiny_policy
    tokenizer = train_tokenizer(questions + [c for _, c in examples], pc.vocab_size)
    model = new_policy(tokenizer, pc)
    result = sft(
        model,
        tokenizer,
        examples,
        pc.steps_for(len(examples)),
        pc.sft_batch_size,
        pc.sft_lr,
        pc.seed,
        config.progress,
        "building the default policy (supervised)",
    )
    save_policy(model, tokenizer, path)
    summary = {
        "examples": len(examples),
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab": len(tokenizer),
        "final_loss": sum(result["losses"][-20:]) / len(result["losses"][-20:]),
        "seconds": time.perf_counter() - start,
        "config": asdict(pc),
    }
    (path / "policy.json").write_text(json.dumps(summary, indent=2))
    say(
        f"default policy: {summary['parameters']:,} parameters, {len(examples)} base outputs, "
        f"loss {summary['final_loss']:.3f} ({summary['seconds']:.0f} s) -> {path}"
    )
    return path


def _world_rm_config(
    config: RLExperimentConfig, logs: WorldLogs, steps: int | None
) -> WorldRMConfig:
    """The pipeline to OUT/rm/model from the training log (pairs only when `steps` is
    None): mined as `orchrm demo` mines its per-domain datasets, into the store kept in
    OUT."""
    from orchrm.training.config import TrainConfig

    return WorldRMConfig(
        out=config.out,
        logs=[str(logs.path)],
        datasets=(PairDataset(f"rl-{config.preset}", config.preset, steps=steps),),
        fresh_store=False,
        seed=config.seed,
        train=TrainConfig(
            max_length=config.rm_max_length,
            lr=config.rm_lr,
            eval_every=max(1, config.rm_steps // 2),
            seed=config.seed,
            num_threads=config.num_threads,
        ),
        progress=config.progress,
    )


def build_rm(config: RLExperimentConfig, logs: WorldLogs, say=print) -> Path:
    """A reward model in OUT/rm/model trained as `orchrm demo` trains its per-domain ones
    (MiniLM, `rm_steps` steps of 16 pairs); reused when present."""
    model_dir = Path(config.out) / "rm" / "model"
    if (model_dir / "config.json").exists():
        return model_dir
    result = world_reward_models(_world_rm_config(config, logs, config.rm_steps))
    summary = result.datasets[f"rl-{config.preset}"].summary
    say(
        f"reward model: held-out pairwise accuracy {summary.best_validation_accuracy:.3f} "
        f"-> {model_dir}"
    )
    return model_dir


def dpo_rows(config: RLExperimentConfig, logs: WorldLogs) -> list[dict]:
    """DPO's preference rows in the policy's prompt format: the mined pairs' raw
    orchestrator texts (`orchrm.store.pairs.export_orchrm_datasets`), `prompt` = the policy
    prompt of the question."""
    from orchrm.store.db import Store
    from orchrm.store.pairs import export_orchrm_datasets

    path = Path(config.out) / "pairs" / "dpo.jsonl"
    result = world_reward_models(_world_rm_config(config, logs, None))
    with Store(result.store) as store:
        export_orchrm_datasets(store, path, f"rl-{config.preset}")
    return [
        {"prompt": policy_prompt(r["input"]), "chosen": r["chosen"], "rejected": r["rejected"]}
        for _, r in read_jsonl(path)
    ]

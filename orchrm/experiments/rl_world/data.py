"""What orchestrator training starts from, built offline from the world: logs, training
prompts, the default policy, a reward model, and DPO pairs.

One world log (both world orchestrators on the training tasks, executed) feeds all of
them, through the same path a user takes with real logs: the base orchestrator's outputs
are the policy's supervised data; the log is ingested into a store, pairs are mined
(specialized-over-base and correct-over-incorrect, 1:3) and the reward model is trained
on them; the same pairs, as raw harmony texts, are DPO's data. The log, the pairs and
the reward model are the stages of `orchrm.experiments.stages`, each reused from OUT
while its inputs stay the same, so a comparison builds them once; the policy is reused
when it is in OUT.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from orchrm.errors import InputError
from orchrm.experiments.rl_world.config import RLExperimentConfig
from orchrm.experiments.stages import WorldLog, world_log
from orchrm.experiments.world_models import PairDataset, WorldRMConfig, world_reward_models
from orchrm.jsonl import read_jsonl
from orchrm.rl.policy import (
    new_policy,
    policy_prompt,
    save_policy,
    sft,
    train_tokenizer,
)
from orchrm.runtime import prompts
from orchrm.world.tasks import WorldTask, generate_tasks


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


def with_references(rows: list[dict], logs: WorldLog, k: int) -> list[dict]:
    """`rows` with a `reference` column for the centred reward (`GRPOConfig.centre`): up
    to `k` plan texts the base orchestrator wrote for the row's question in the world log
    (the starting policy is fine-tuned on them), in the log's order."""
    by_question: dict[str, list[str]] = {}
    for r in logs.records():
        if r["orchestrator"] == "base" and r["raw"]:
            plans = by_question.setdefault(r["question"], [])
            if len(plans) < k:
                plans.append(r["raw"])
    return [{**row, "reference": by_question.get(row["question"], [])} for row in rows]


def world_logs(config: RLExperimentConfig, say=print) -> WorldLog:
    """The training log in OUT/world (both world orchestrators, executed): the world-log
    stage."""
    log = world_log(
        Path(config.out) / "world",
        f"{config.preset}.train",
        config.preset,
        config.train_tasks,
        config.log_samples,
        config.seed,
        progress=config.progress,
    )
    if not log.reused:
        say(
            f"world log: {log.info['records']} records of {config.train_tasks} {config.preset} "
            f"tasks ({log.info['seconds']:.0f} s) -> {log.path}"
        )
    return log


def build_policy(config: RLExperimentConfig, logs: WorldLog, say=print) -> Path:
    """The offline default policy in OUT/policy: a tokenizer trained on the questions and
    the base orchestrator's outputs, then supervised fine-tuning on (prompt -> output).
    Reused when present. Writes `policy.json` with the loss and the build time."""
    path = Path(config.out) / "policy"
    if (path / "config.json").exists():
        return path
    base = [r for r in logs.records() if r["orchestrator"] == "base" and r["raw"]]
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
    config: RLExperimentConfig, logs: WorldLog, steps: int | None
) -> WorldRMConfig:
    """The stages from the training log to OUT/pairs and OUT/rm/model (pairs only when
    `steps` is None), mined as `orchrm demo` mines its per-domain datasets, into the
    store OUT/orchrm.duckdb."""
    from orchrm.training.config import TrainConfig

    return WorldRMConfig(
        out=config.out,
        logs=[logs],
        datasets=(PairDataset(f"rl-{config.preset}", config.preset, steps=steps),),
        seed=config.seed,
        train=TrainConfig(
            max_length=config.rm_max_length,
            lr=config.rm_lr,
            eval_every=max(1, config.rm_steps // 2),
            seed=config.seed,
            num_threads=config.num_threads,
            ensemble=config.rm_members,
        ),
        progress=config.progress,
    )


def build_rm(config: RLExperimentConfig, logs: WorldLog, say=print) -> Path:
    """A reward model in OUT/rm/model trained as `orchrm demo` trains its per-domain ones
    (MiniLM, `rm_steps` steps of 16 pairs): the pairs and reward-model stages."""
    result = world_reward_models(_world_rm_config(config, logs, config.rm_steps))
    trained = result.datasets[f"rl-{config.preset}"]
    if not trained.reused:
        accuracy = trained.summary.best_validation_accuracy
        shown = "none" if accuracy is None else f"{accuracy:.3f}"
        say(f"reward model: held-out pairwise accuracy {shown} -> {trained.model}")
    return trained.model


def dpo_rows(config: RLExperimentConfig, logs: WorldLog) -> list[dict]:
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

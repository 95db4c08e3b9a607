"""`train_ensemble`: K reward models that differ by seed and by a bootstrap of the pairs,
assembled into one model directory (`orchrm.rmodel.ensemble`).

Member i trains as `orchrm train` would with seed `seed + i` into OUT/members/i (its
checkpoints and model there, so `--resume` continues the member a kill stopped and
skips the finished ones); with `bootstrap`, on a draw with replacement of the training
tasks (a task's pairs stay together, as many times as the task is drawn). Then
OUT/model is written in one step: the members' weights averaged (WARM) as the model
any loader reads, each member under members/i, and in `orchrm.json` the ensemble's
settings and its validation accuracy for every aggregate beside each member's own.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch

from orchrm.configs import dump_config
from orchrm.rmodel.backbone import load_backbone, padding_side
from orchrm.rmodel.card import write_model_card
from orchrm.rmodel.ensemble import (
    AGGREGATES,
    ENSEMBLE_KEY,
    MEMBERS,
    combine,
)
from orchrm.rmodel.files import METADATA, read_metadata
from orchrm.training.config import TrainConfig
from orchrm.training.data import load_splits, tokenize
from orchrm.training.evaluate import pairwise_accuracy
from orchrm.training.output import replace_folder
from orchrm.training.summary import TrainSummary


def _say(message: str) -> None:
    print(f"orchrm train: {message}", file=sys.stderr, flush=True)


def member_config(config: TrainConfig, index: int) -> TrainConfig:
    """Member `index`'s settings: one model, seed + index, into OUT/members/index."""
    out = Path(config.out) / MEMBERS / str(index)
    return dataclasses.replace(config, ensemble=1, seed=config.seed + index, out=str(out))


def _finished(model_dir: Path) -> bool:
    return (model_dir / METADATA).is_file() and bool(read_metadata(model_dir).get("finished"))


def train_ensemble(config: TrainConfig, train, resume: bool = False, progress: bool = True):
    """Train `config.ensemble` members with `train` (`orchrm.training.train.train`, which
    calls this) and assemble them into OUT/model; returns the ensemble's `TrainSummary`
    (steps, pairs and time summed over the members; validation accuracy that of the
    default aggregate)."""
    summaries = []
    for i in range(config.ensemble):
        member = member_config(config, i)
        out = Path(member.out)
        if resume and _finished(out / "model"):
            _say(f"member {i + 1} of {config.ensemble} is finished in {out}: kept")
            summaries.append(TrainSummary(**read_metadata(out / "model")["training"]))
            continue
        _say(f"member {i + 1} of {config.ensemble} (seed {member.seed}) -> {out}")
        again = resume and (out / "checkpoints").is_dir()
        summaries.append(train(member, resume=again, progress=progress, ensemble_seed=config.seed))
    if os.environ.get("RANK", "0") != "0":  # one of `accelerate launch`'s other processes
        return _summary(summaries, None)
    dump_config(config, Path(config.out) / "config.yaml")  # the ensemble's own settings
    folders = [Path(member_config(config, i).out) / "model" for i in range(config.ensemble)]
    metrics = assemble(config, folders, summaries)
    return _summary(summaries, metrics.get(config.aggregate))


def _summary(members: list[TrainSummary], accuracy: float | None) -> TrainSummary:
    first = members[0]
    seconds = sum(m.train_seconds for m in members)
    seen = sum(m.pairs_seen for m in members)
    tokens = sum(m.tokens for m in members)
    padded = sum(m.padded_tokens for m in members)
    return dataclasses.replace(
        first,
        steps=sum(m.steps for m in members),
        planned_steps=sum(m.planned_steps for m in members),
        pairs_seen=seen,
        train_seconds=seconds,
        pairs_per_second=seen / seconds if seconds else 0.0,
        best_validation_accuracy=accuracy,
        history=[],
        stopped_early=any(m.stopped_early for m in members),
        resumed_from_step=None,
        tokens=tokens,
        padded_tokens=padded,
        tokens_per_second=tokens / seconds if seconds else 0.0,
        padded_tokens_per_second=padded / seconds if seconds else 0.0,
        mfu=None,
    )


def average_weights(member_dirs: list[Path]):
    """(model, tokenizer): the first member's architecture with every floating-point
    weight the mean of the members' (WARM); the others are read one at a time."""
    model, tokenizer = load_backbone(str(member_dirs[0]), dtype=torch.float32)
    total = {k: v.detach().clone() for k, v in model.state_dict().items()}
    for folder in member_dirs[1:]:
        other, _ = load_backbone(str(folder), dtype=torch.float32)
        for k, v in other.state_dict().items():
            if total[k].is_floating_point():
                total[k] += v
        del other
    model.load_state_dict(
        {k: v / len(member_dirs) if v.is_floating_point() else v for k, v in total.items()}
    )
    return model.eval(), tokenizer


def assemble(config: TrainConfig, member_dirs: list[Path], summaries: list[TrainSummary]) -> dict:
    """Write OUT/model in one step (the module's docstring); returns the ensemble's
    validation accuracy by aggregate ({} without validation pairs)."""
    from orchrm.training.build import write_model_files

    target = Path(config.out) / "model"
    model, tokenizer = average_weights(member_dirs)
    first = read_metadata(member_dirs[0])
    settings = {
        "members": len(member_dirs),
        "aggregate": config.aggregate,
        "spread_weight": config.spread_weight,
        "bootstrap": config.bootstrap,
        "seeds": [config.seed + i for i in range(len(member_dirs))],
        "member_metrics": [read_metadata(d).get("metrics", {}) for d in member_dirs],
    }
    meta = {**first, ENSEMBLE_KEY: settings, "finished": True}
    meta["config"] = {k: v for k, v in dataclasses.asdict(config).items() if k != "extra"}
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        write_model_files(tmp, model, tokenizer, meta, None)
        for i, folder in enumerate(member_dirs):
            shutil.copytree(folder, tmp / MEMBERS / str(i))
        _, val = load_splits(config.pairs, config.validation_share, config.seed)
        metrics = _validate(tmp, model, tokenizer, val, config) if val else {}
        warm = metrics.pop("warm_metrics", {})
        meta |= {"metrics": warm, "reward_mean": warm.get("reward_mean", 0.0),
                 "reward_std": warm.get("reward_std", 1.0)}  # fmt: skip
        meta[ENSEMBLE_KEY]["validation_accuracy"] = metrics
        meta["training"] = _summary(summaries, metrics.get(config.aggregate)).to_dict()
        (tmp / METADATA).write_text(json.dumps(meta, indent=2))
        write_model_card(tmp, meta)
        replace_folder(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return metrics


def _validate(folder: Path, warm, tokenizer, records: list[dict], config: TrainConfig) -> dict:
    """Validation pairwise accuracy of each aggregate, and the averaged weights'
    `pairwise_accuracy` metrics (under `warm_metrics`), in fp32."""
    from orchrm.scoring.ensemble import EnsembleScorer

    pairs = tokenize(records, tokenizer, config.max_length)
    side = padding_side(warm, tokenizer)
    warm_metrics = pairwise_accuracy(
        warm, pairs, tokenizer.pad_token_id, config.batch_size, torch.device("cpu"), False, side
    )
    ensemble = EnsembleScorer.load(folder, device="cpu", dtype="fp32", batch_size=config.batch_size)
    chosen = ensemble.score_texts([r["prompt"] + r["chosen"] for r in records])
    rejected = ensemble.score_texts([r["prompt"] + r["rejected"] for r in records])
    out: dict = {"warm": warm_metrics["accuracy"], "warm_metrics": warm_metrics}
    for how in AGGREGATES[:-1]:
        wins = [
            combine(c.members, how, config.spread_weight)
            > combine(r.members, how, config.spread_weight)
            for c, r in zip(chosen, rejected, strict=True)
        ]
        out[how] = sum(wins) / len(wins)
    return out

"""Pairwise accuracy of a reward model on win/lose pairs: how validation selects the
saved model during training, and how `orchrm evaluate-rm` measures a saved one."""

from __future__ import annotations

import statistics
from pathlib import Path

from orchrm.rmodel.backbone import load_saved, padding_side, rewards
from orchrm.training.data import Pairs, read_pair_file, tokenize
from orchrm.training.loss import distinct


def pairwise_accuracy(
    model, pairs: Pairs, pad_id: int, batch_size: int, device, bf16: bool, side: str = "right"
) -> dict:
    """Pairwise accuracy overall, per pair kind and per domain; reward margin (mean of
    chosen - rejected), reward mean and spread; texts padded on `side`
    (`orchrm.rmodel.backbone.padding_side`)."""
    if not len(pairs):
        return {}
    was_training = model.training
    model.eval()
    # A plan is in many pairs of its task (every right one against every wrong one):
    # each distinct text is scored once.
    sequences, where = distinct(pairs.chosen + pairs.rejected)
    scored = rewards(model, sequences, pad_id, batch_size * 2, device, bf16, side)
    model.train(was_training)
    n = len(pairs)
    chosen, rejected = [scored[k] for k in where[:n]], [scored[k] for k in where[n:]]
    return accuracy_metrics(chosen, rejected, pairs)


def accuracy_metrics(chosen: list[float], rejected: list[float], pairs: Pairs) -> dict:
    """`pairwise_accuracy`'s metrics from the rewards of each pair's two texts."""
    wins = [c > r for c, r in zip(chosen, rejected, strict=True)]

    def accuracy_by(labels: list[str]) -> dict[str, float]:
        groups: dict[str, list[bool]] = {}
        for label, win in zip(labels, wins, strict=True):
            groups.setdefault(label or "unknown", []).append(win)
        return {k: sum(v) / len(v) for k, v in sorted(groups.items())}

    everything = chosen + rejected
    return {
        "accuracy": sum(wins) / len(wins),
        "accuracy_by_kind": accuracy_by(pairs.kinds),
        "accuracy_by_domain": accuracy_by(pairs.domains),
        "pairs": len(wins),
        "reward_margin": statistics.fmean(c - r for c, r in zip(chosen, rejected, strict=True)),
        "reward_mean": statistics.fmean(everything),
        "reward_std": statistics.pstdev(everything),
    }


def evaluate_file(
    model_dir: str | Path,
    pairs_file: str | Path,
    batch_size: int = 32,
    dtype: str = "auto",
    aggregate: str | None = None,
    spread_weight: float | None = None,
) -> dict:
    """`pairwise_accuracy` of a saved reward model on an exported pair file (e.g. the
    test split), scored in `dtype` (auto, bf16 or fp32); an ensemble's by `aggregate`
    (`orchrm.scoring.load.load_scorer`)."""
    from orchrm.rmodel.precision import bf16_forced
    from orchrm.scoring.load import is_ensemble, load_scorer

    if dtype in (None, "", "auto"):
        bf16_forced()  # a bad ORCHRM_BF16 is said before the model directory is read
    if aggregate != "warm" and is_ensemble(model_dir):
        scorer = load_scorer(
            model_dir, dtype=dtype, batch_size=batch_size, aggregate=aggregate,
            spread_weight=spread_weight,
        )  # fmt: skip
        records = read_pair_file(pairs_file)
        pairs = tokenize(records, scorer.tokenizer, scorer.max_length)
        chosen = scorer.score_texts([r["prompt"] + r["chosen"] for r in records])
        rejected = scorer.score_texts([r["prompt"] + r["rejected"] for r in records])
        return accuracy_metrics([c.score for c in chosen], [r.score for r in rejected], pairs)
    if aggregate not in (None, "warm") or spread_weight is not None:
        load_scorer(model_dir, aggregate=aggregate, spread_weight=spread_weight)  # says why not
    rm = load_saved(model_dir, dtype=dtype)
    pairs = tokenize(read_pair_file(pairs_file), rm.tokenizer, rm.max_length)
    side = padding_side(rm.model, rm.tokenizer)
    return pairwise_accuracy(
        rm.model, pairs, rm.tokenizer.pad_token_id, batch_size, rm.device, rm.bf16, side
    )

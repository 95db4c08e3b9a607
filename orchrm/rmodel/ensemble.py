"""A reward-model ensemble: K members that differ by seed and by a bootstrap of the
pairs, saved in one model directory, and how their scores combine. Light: no PyTorch.

The directory is a saved model like any other (`config.json`, weights, tokenizer,
`orchrm.json`, card): its weights are the members' weights averaged (WARM, Ramé et al.
2024), so any tool that loads a Hugging Face model scores with one pass. Its
`orchrm.json` holds `ensemble` (`ENSEMBLE_KEY`: how many members, the default
aggregate and spread weight) and `members/0` ... `members/K-1` hold the members, each a
saved model of its own. orchrm's scorer reads the members: each member's reward is
normalized by its own training-time statistics ((r - reward_mean) / reward_std, so that
members whose offsets differ agree where they rank alike), and the K normalized rewards
give the item's `mean`, its `spread` (their standard deviation, over K) and the
`aggregate` a setting chooses:

- `mean`: the members' mean;
- `min`: the worst case (Coste et al. 2023, arXiv 2310.02743);
- `mean_minus_std`: mean - spread_weight x spread (uncertainty-weighted);
- `warm`: the averaged weights' own reward (one pass; no spread).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from orchrm.errors import ConfigError

ENSEMBLE_KEY = "ensemble"
MEMBERS = "members"
"""The folder of a model directory that holds its members."""
AGGREGATES = ("mean", "min", "mean_minus_std", "warm")
DEFAULT_AGGREGATE = "min"
"""The worst case: on the world's math preset it is the one aggregate whose best-of-N
pick did not turn down by N = 256 (docs/results.md#reward-model-ensembles)."""
DEFAULT_SPREAD_WEIGHT = 1.0


def check_aggregate(aggregate: str, spread_weight: float) -> None:
    """Refuse an unknown aggregate or a negative spread weight, naming both."""
    if aggregate not in AGGREGATES:
        raise ConfigError(f"aggregate {aggregate!r}: choose one of {', '.join(AGGREGATES)}")
    if not math.isfinite(spread_weight) or spread_weight < 0:
        raise ConfigError(f"spread_weight {spread_weight}: give a number >= 0")


def ensemble_settings(metadata: dict) -> dict | None:
    """The `ensemble` entry of a model's `orchrm.json` (None: not an ensemble)."""
    entry = metadata.get(ENSEMBLE_KEY)
    return entry if isinstance(entry, dict) and entry.get("members") else None


def member_dirs(folder: str | Path, count: int) -> list[Path]:
    """The member directories of an ensemble of `count` saved in `folder`."""
    return [Path(folder) / MEMBERS / str(i) for i in range(count)]


def normalized(reward: float, metadata: dict) -> float:
    """A member's reward on the common scale: (r - reward_mean) / reward_std."""
    mean = float(metadata.get("reward_mean", 0.0))
    std = float(metadata.get("reward_std", 1.0)) or 1.0
    return (reward - mean) / std


def spread(values: Sequence[float]) -> float:
    """The standard deviation of the members' normalized rewards (over K, not K - 1)."""
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def combine(values: Sequence[float], aggregate: str, spread_weight: float) -> float:
    """The score `aggregate` makes of the members' normalized rewards (`warm` is not a
    combination: its scorer reads the averaged weights)."""
    mean = sum(values) / len(values)
    if aggregate == "mean":
        return mean
    if aggregate == "min":
        return min(values)
    if aggregate == "mean_minus_std":
        return mean - spread_weight * spread(values)
    raise ConfigError(f"aggregate {aggregate!r} does not combine member scores")

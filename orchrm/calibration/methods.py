"""Calibration of reward-model scores: a monotone map from a raw score to P(correct), fitted
on (score, correct) data, and how well probabilities match outcomes.

A Bradley-Terry reward only ranks: its scale is arbitrary and differs from model to model.
A calibration turns a raw score into the probability that executing the orchestration
gives a right answer, so a selector can say how sure it is (`orchrm-adaptive` stops
drawing on it). Two maps:

- `platt`: P = sigmoid(a * score + b), fitted by scikit-learn's `LogisticRegression`
  (unpenalized) on the log-loss against Platt's smoothed targets ((positives + 1) /
  (positives + 2) and 1 / (negatives + 2)), so perfectly separated data still gives
  finite a and b;
- `isotonic`: the non-decreasing step function closest to the outcomes in squared error,
  scikit-learn's `IsotonicRegression`, linear between the steps and flat beyond the ends.

Fit on data the reward model did not train on (its validation tasks). A fitted map is
stored in the model's `orchrm.json` under "calibration" (`calibrate_model_dir`) and read
back with `calibration_from_metadata`.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from orchrm.errors import ConfigError, InputError
from orchrm.jsonl import atomic_file

METHODS = ("platt", "isotonic")
"""The calibration maps `fit_calibration` knows."""
METADATA_KEY = "calibration"
"""Where a model's `orchrm.json` holds its fitted map."""
FIT_KEY = "calibration_fit"
"""Where it holds what the map was fitted on: candidates, right ones, ECE raw and
calibrated (what the model card says)."""


def sigmoid(z: float) -> float:
    """1 / (1 + e^-z), without overflow at either end."""
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@dataclass(frozen=True)
class PlattCalibration:
    """P(correct) = sigmoid(a * score + b)."""

    a: float
    b: float
    method: str = "platt"

    def probability(self, scores: Sequence[float]) -> list[float]:
        """P(correct) of each raw score."""
        return [sigmoid(self.a * s + self.b) for s in scores]

    def to_dict(self) -> dict:
        return {"method": self.method, "a": self.a, "b": self.b}


@dataclass(frozen=True)
class IsotonicCalibration:
    """A non-decreasing step function: block i covers scores `lows[i]`..`highs[i]` with
    probability `values[i]`; linear between blocks, flat beyond the first and last."""

    lows: tuple[float, ...]
    highs: tuple[float, ...]
    values: tuple[float, ...]
    method: str = "isotonic"

    def probability(self, scores: Sequence[float]) -> list[float]:
        """P(correct) of each raw score."""
        return [self._one(s) for s in scores]

    def _one(self, s: float) -> float:
        i = bisect.bisect_right(self.lows, s) - 1  # the last block starting at or below s
        if i < 0:
            return self.values[0]
        if s <= self.highs[i] or i == len(self.values) - 1:
            return self.values[i]
        left, right = self.highs[i], self.lows[i + 1]  # in the gap before block i + 1
        t = (s - left) / (right - left)
        return self.values[i] + t * (self.values[i + 1] - self.values[i])

    def to_dict(self) -> dict:
        return {
            "method": self.method,
            "lows": list(self.lows),
            "highs": list(self.highs),
            "values": list(self.values),
        }


Calibration = PlattCalibration | IsotonicCalibration


def _checked(scores: Sequence[float], outcomes: Sequence[bool]) -> tuple[list, list]:
    scores, outcomes = [float(s) for s in scores], [bool(o) for o in outcomes]
    if len(scores) != len(outcomes):
        raise InputError(f"{len(scores)} scores but {len(outcomes)} outcomes to calibrate on")
    if len(scores) < 2:
        raise InputError(f"calibration needs two (score, outcome) pairs or more; got {len(scores)}")
    if not all(math.isfinite(s) for s in scores):
        raise InputError("a score to calibrate on is not a finite number")
    return scores, outcomes


def fit_platt(scores: Sequence[float], outcomes: Sequence[bool]) -> PlattCalibration:
    """Platt scaling: a and b of sigmoid(a * score + b) by scikit-learn's unpenalized
    `LogisticRegression` against Platt's smoothed targets t (finite even on separable
    data): each candidate enters twice, as right with weight t and as wrong with weight
    1 - t, so the weighted log-loss is the cross-entropy against t."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    scores, outcomes = _checked(scores, outcomes)
    positives = sum(outcomes)
    negatives = len(outcomes) - positives
    high, low = (positives + 1) / (positives + 2), 1 / (negatives + 2)
    targets = np.array([high if o else low for o in outcomes])
    x = np.array(scores + scores)[:, None]
    y = np.r_[np.ones(len(scores)), np.zeros(len(scores))]
    model = LogisticRegression(C=np.inf, tol=1e-10, max_iter=1000)
    model.fit(x, y, sample_weight=np.r_[targets, 1 - targets])
    return PlattCalibration(float(model.coef_[0, 0]), float(model.intercept_[0]))


def fit_isotonic(scores: Sequence[float], outcomes: Sequence[bool]) -> IsotonicCalibration:
    """Isotonic regression of the outcomes on the scores by scikit-learn's
    `IsotonicRegression` (equal scores pooled first, so the map is a function of the
    score). Its thresholds keep each step's first and last score: consecutive thresholds
    of one value are one step."""
    from sklearn.isotonic import IsotonicRegression

    scores, outcomes = _checked(scores, outcomes)
    model = IsotonicRegression(out_of_bounds="clip").fit(scores, [float(o) for o in outcomes])
    lows: list[float] = []
    highs: list[float] = []
    values: list[float] = []
    for x, y in zip(model.X_thresholds_.tolist(), model.y_thresholds_.tolist(), strict=True):
        if values and y == values[-1]:
            highs[-1] = x
        else:
            lows.append(x)
            highs.append(x)
            values.append(y)
    return IsotonicCalibration(tuple(lows), tuple(highs), tuple(values))


def fit_calibration(
    scores: Sequence[float], outcomes: Sequence[bool], method: str = "platt"
) -> Calibration:
    """The `method` map ('platt' or 'isotonic') fitted on (score, correct) data."""
    if method == "platt":
        return fit_platt(scores, outcomes)
    if method == "isotonic":
        return fit_isotonic(scores, outcomes)
    raise ConfigError(f"unknown calibration method {method!r}: choose one of {', '.join(METHODS)}")


def calibration_from_dict(data: dict, where: str = "calibration") -> Calibration:
    """A map from its `to_dict` form; raises InputError naming `where` when it is not one."""
    method = data.get("method") if isinstance(data, dict) else None
    try:
        if method == "platt":
            return PlattCalibration(float(data["a"]), float(data["b"]))
        if method == "isotonic":
            lows, highs, values = (
                tuple(float(x) for x in data[k]) for k in ("lows", "highs", "values")
            )
            if not values or not len(lows) == len(highs) == len(values):
                raise ValueError("lows, highs and values differ in length")
            return IsotonicCalibration(lows, highs, values)
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"{where}: not a {method} calibration ({err})") from None
    raise InputError(f"{where}: unknown calibration method {method!r}")


def calibration_from_metadata(metadata: dict | None) -> Calibration | None:
    """The calibration a model's `orchrm.json` holds (a `Scorer`'s `metadata`), or None."""
    data = (metadata or {}).get(METADATA_KEY)
    return None if data is None else calibration_from_dict(data, f"orchrm.json {METADATA_KEY}")


def save_calibration(calibration: Calibration, path: str | Path) -> Path:
    """Write the map as JSON."""
    path = Path(path)
    _write_json_atomically(path, calibration.to_dict())
    return path


def load_calibration(path: str | Path) -> Calibration:
    """A map `save_calibration` wrote."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise InputError(f"cannot read a calibration from {path}: {err}") from None
    return calibration_from_dict(data, str(path))


@dataclass(frozen=True)
class ReliabilityBin:
    """One bin of a reliability diagram: predictions in [low, high)."""

    low: float
    high: float
    count: int
    confidence: float
    """Mean predicted probability in the bin (NaN when empty)."""
    accuracy: float
    """Share of right outcomes in the bin (NaN when empty)."""


def reliability_diagram(
    probs: Sequence[float], outcomes: Sequence[bool], bins: int = 10
) -> list[ReliabilityBin]:
    """Equal-width bins over [0, 1] (the last one holds 1.0): per bin, how many
    predictions, their mean, and how often they came true."""
    if bins < 1:
        raise ConfigError(f"bins must be 1 or more, got {bins}")
    if len(probs) != len(outcomes):
        raise InputError(f"{len(probs)} probabilities but {len(outcomes)} outcomes")
    members: list[list[tuple[float, bool]]] = [[] for _ in range(bins)]
    for p, o in zip(probs, outcomes, strict=True):
        members[min(int(p * bins), bins - 1)].append((float(p), bool(o)))
    out = []
    for i, inside in enumerate(members):
        n = len(inside)
        confidence = sum(p for p, _ in inside) / n if n else math.nan
        accuracy = sum(o for _, o in inside) / n if n else math.nan
        out.append(ReliabilityBin(i / bins, (i + 1) / bins, n, confidence, accuracy))
    return out


def expected_calibration_error(
    probs: Sequence[float], outcomes: Sequence[bool], bins: int = 10
) -> float:
    """Sum over equal-width bins of (share of predictions in the bin) x |accuracy -
    mean confidence| (0 when there are no predictions)."""
    total = len(probs)
    if not total:
        return 0.0
    return sum(
        b.count / total * abs(b.accuracy - b.confidence)
        for b in reliability_diagram(probs, outcomes, bins)
        if b.count
    )


@dataclass(frozen=True)
class CalibrationSummary:
    """What `calibrate_model_dir` fitted and how well it fits its data."""

    calibration: Calibration
    candidates: int
    """(score, correct) pairs it was fitted on."""
    ece_raw: float
    """ECE of sigmoid(raw score) on the same data."""
    ece: float
    """ECE of the calibrated probabilities on the same data."""


def scored_outcomes(scorer, records: Iterable[dict]) -> tuple[list[float], list[bool]]:
    """(raw score, correct) of every executed `orchrm.run/1` record with a parsed
    orchestration, scored by `scorer` (any `orchrm.scoring.base.Scorer`)."""
    from orchrm.parse import from_dict

    items, outcomes = [], []
    for r in records:
        if isinstance(r, dict) and r.get("orchestration") and r.get("execution"):
            items.append((r["question"], from_dict(r["orchestration"]), str(r.get("domain") or "")))
            outcomes.append(bool(r.get("correct")))
    scored = scorer.score(items) if items else []
    return [r.score for r in scored], outcomes


def calibrate_model_dir(
    model_dir: str | Path, records: Iterable[dict], method: str = "isotonic"
) -> CalibrationSummary:
    """Score `records` (executed `orchrm.run/1` records of tasks the model did not train
    on) with the model in `model_dir`, fit `method`, and store the map in its
    `orchrm.json` under "calibration" and what it was fitted on under "calibration_fit"
    (rewritten atomically, every other key kept); the model card is written again."""
    from orchrm.rmodel.card import write_model_card
    from orchrm.rmodel.files import METADATA, model_directory
    from orchrm.scoring.load import load_scorer

    folder = model_directory(model_dir)
    scores, outcomes = scored_outcomes(load_scorer(folder), records)
    if len(scores) < 2:
        raise InputError(f"only {len(scores)} executed records to calibrate {folder} on")
    calibration = fit_calibration(scores, outcomes, method)
    summary = CalibrationSummary(
        calibration,
        len(scores),
        expected_calibration_error([sigmoid(s) for s in scores], outcomes),
        expected_calibration_error(calibration.probability(scores), outcomes),
    )
    meta_file = folder / METADATA
    metadata = json.loads(meta_file.read_text()) if meta_file.exists() else {}
    metadata[METADATA_KEY] = calibration.to_dict()
    metadata[FIT_KEY] = {
        "candidates": summary.candidates,
        "correct": sum(outcomes),
        "ece_raw": summary.ece_raw,
        "ece": summary.ece,
    }
    _write_json_atomically(meta_file, metadata)
    write_model_card(folder, metadata)
    return summary


def _write_json_atomically(path: Path, data: dict) -> None:
    with atomic_file(path) as f:
        json.dump(data, f, indent=2)

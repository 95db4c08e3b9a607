"""The calibration of an evaluation: how well the Orch-RM model's calibrated P(correct)
matches what happened to the held-out candidates, as an expected calibration error (ECE)
and the bins of a reliability diagram, beside sigmoid(raw score) for comparison.

Every held-out candidate with a parsed orchestration and a score counts once, whatever the
subsets of N it was chosen among. Outcomes are the logged executions (`Candidate.correct`);
on world logs each candidate also has its true success probability (`Candidate.p_success`),
against which the same probabilities give an ECE without the noise of one execution.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from orchrm.calibration.methods import (
    Calibration,
    PlattCalibration,
    calibration_from_metadata,
    expected_calibration_error,
    reliability_diagram,
)
from orchrm.selection.selectors import CandidateSet, Selector

BINS = 10
"""Equal-width probability bins of the diagram and of every ECE here."""
RAW_SIGMOID = PlattCalibration(1.0, 0.0)
"""sigmoid(raw score): what the scores say without a calibration."""


@dataclass(frozen=True)
class CalibrationBin:
    """One non-empty bin of a reliability diagram: probabilities in [low, high)."""

    low: float
    high: float
    count: int
    """Candidates whose probability falls in the bin."""
    confidence: float
    """Their mean probability."""
    accuracy: float
    """The share of them whose execution gave a right answer."""
    p_success: float | None = None
    """Their mean true success probability (world logs; None when some has none)."""


@dataclass(frozen=True)
class CalibrationReport:
    """The calibrated P(correct) of the Orch-RM model on the held-out candidates."""

    method: str
    """The calibration map (`platt` or `isotonic`, `orchrm.calibration.methods`)."""
    candidates: int
    """Held-out candidates with a parsed orchestration and a score."""
    ece: float
    """ECE of the calibrated P(correct) against the executed outcomes."""
    ece_raw: float
    """ECE of sigmoid(raw score) against the same outcomes."""
    bins: tuple[CalibrationBin, ...]
    """The calibrated P(correct) binned (`BINS` equal-width bins; empty ones left out)."""
    raw_bins: tuple[CalibrationBin, ...]
    """sigmoid(raw score) binned the same way."""
    ece_true: float | None = None
    """ECE of the calibrated P(correct) against the true success probabilities (world
    logs; None when some candidate has none)."""
    ece_raw_true: float | None = None
    """The same for sigmoid(raw score)."""


def _bins(
    probs: Sequence[float], outcomes: Sequence[bool], truths: Sequence[float] | None
) -> tuple[CalibrationBin, ...]:
    """`reliability_diagram`'s non-empty bins, each with its mean true probability."""
    members: list[list[float]] = [[] for _ in range(BINS)]
    for p, t in zip(probs, truths or [0.0] * len(probs), strict=True):
        members[min(int(p * BINS), BINS - 1)].append(t)  # reliability_diagram's rule
    return tuple(
        CalibrationBin(
            b.low,
            b.high,
            b.count,
            b.confidence,
            b.accuracy,
            statistics.fmean(inside) if truths is not None else None,
        )
        for b, inside in zip(reliability_diagram(probs, outcomes, BINS), members, strict=True)
        if b.count
    )


def _ece_true(bins: tuple[CalibrationBin, ...]) -> float | None:
    """Sum over bins of (share of candidates) x |mean true probability - confidence|."""
    total = sum(b.count for b in bins)
    if not total or any(b.p_success is None for b in bins):
        return None
    return sum(b.count / total * abs(b.p_success - b.confidence) for b in bins)


def calibration_report(
    tasks: Sequence[CandidateSet],
    scores: Sequence[Sequence[float | None]],
    calibration: Calibration,
) -> CalibrationReport | None:
    """The report of `calibration` over every candidate of `tasks` with a parsed
    orchestration and a score (`scores[i][j]`: the raw score of `tasks[i].candidates[j]`,
    a selection's `Selection.scores`); None when no candidate has both."""
    raw, outcomes, truths = [], [], []
    for task, row in zip(tasks, scores, strict=True):
        for candidate, score in zip(task.candidates, row, strict=False):
            if candidate.orchestration is None or score is None:
                continue
            raw.append(float(score))
            outcomes.append(candidate.correct)
            truths.append(candidate.p_success)
    if not raw:
        return None
    known = None if any(t is None for t in truths) else truths
    calibrated, sigmoid = calibration.probability(raw), RAW_SIGMOID.probability(raw)
    bins, raw_bins = _bins(calibrated, outcomes, known), _bins(sigmoid, outcomes, known)
    return CalibrationReport(
        method=calibration.method,
        candidates=len(raw),
        ece=expected_calibration_error(calibrated, outcomes, BINS),
        ece_raw=expected_calibration_error(sigmoid, outcomes, BINS),
        bins=bins,
        raw_bins=raw_bins,
        ece_true=_ece_true(bins),
        ece_raw_true=_ece_true(raw_bins),
    )


def selector_calibration(
    tasks: Sequence[CandidateSet], selector: Selector | None
) -> CalibrationReport | None:
    """The report of a reward-model selector (a line-up's `orchrm`) on `tasks`, with the
    calibration its model carries (`calibration_from_metadata` of its scorer's
    `info.metadata`); None without a selector, a model or a calibration."""
    scorer = getattr(selector, "rm", None)
    calibration = calibration_from_metadata(scorer.info.metadata if scorer is not None else None)
    if selector is None or calibration is None:
        return None
    return calibration_report(tasks, [selector(t).scores for t in tasks], calibration)

"""orchrm.evaluation.reliability and its part of the report: the calibrated P(correct) of the
Orch-RM model on held-out candidates (ECE against outcomes and true probabilities, beside
the raw sigmoid), and its reliability diagram."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from orchrm.calibration.methods import (
    METADATA_KEY,
    PlattCalibration,
    expected_calibration_error,
    fit_calibration,
)
from orchrm.evaluation.lineup import build_lineup, evaluate_tasks
from orchrm.evaluation.loading import tasks_from_logs
from orchrm.evaluation.plots import figures
from orchrm.evaluation.reliability import calibration_report
from orchrm.evaluation.report import markdown, terminal_table, write_report
from orchrm.jsonl import write_jsonl
from orchrm.scoring.world import WorldScorer
from orchrm.selection.selectors import CandidateSet
from orchrm.world.generate import generate
from tests.samples import candidate_set


def _two_tasks() -> tuple[list[CandidateSet], list[tuple]]:
    """Two tasks, five candidates, one of them unparseable, and their raw scores (the
    unparseable one given a score too: it is still left out)."""
    a = candidate_set(["42", "7", "9"], [True, False, False], ps=[0.9, 0.2, 0.5])
    a = replace(a, candidates=(*a.candidates[:2], replace(a.candidates[2], orchestration=None)))
    b = candidate_set(["42", "8"], [True, False], ps=[0.7, 0.3])
    return [a, replace(b, task_id="u")], [(2.0, -2.0, 1.0), (0.0, 0.0)]


def test_the_calibration_report_by_hand():
    tasks, scores = _two_tasks()
    # a calibration that says 0.5 to everything: right on average, so its ECE is 0
    report = calibration_report(tasks, scores, PlattCalibration(0.0, 0.0))
    assert report.method == "platt" and report.candidates == 4  # the unparseable one is out
    assert report.ece == pytest.approx(0.0)
    (only,) = report.bins
    assert (only.count, only.confidence, only.accuracy) == (4, 0.5, 0.5)
    assert only.p_success == pytest.approx((0.9 + 0.2 + 0.7 + 0.3) / 4)
    assert report.ece_true == pytest.approx(0.025)
    # raw sigmoid: s(2) = 0.881 (right) and s(-2) = 0.119 (wrong) are each 0.119 off
    off = 1 - 1 / (1 + math.exp(-2.0))
    assert report.ece_raw == pytest.approx(2 * off / 4)
    assert [b.count for b in report.raw_bins] == [1, 2, 1]
    assert report.ece_raw_true == pytest.approx((abs(0.9 - (1 - off)) + abs(0.2 - off)) / 4)
    # without true probabilities there is no ECE against them
    blind = [
        replace(t, candidates=tuple(replace(c, p_success=None) for c in t.candidates))
        for t in tasks
    ]
    report = calibration_report(blind, scores, PlattCalibration(0.0, 0.0))
    assert report.ece_true is None and report.bins[0].p_success is None
    unscored = calibration_report(tasks, [(None,) * 3, (None, 0.0)], PlattCalibration(1, 0))
    assert unscored.candidates == 1
    assert calibration_report(tasks, [(None,) * 3, (None,) * 2], PlattCalibration(1, 0)) is None


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """World logs of 12 math tasks (4 samples each), a stand-in scorer, and a Platt
    calibration of its scores fitted on other tasks."""
    folder = tmp_path_factory.mktemp("world")
    generated = generate("math", 12, 4, seed=5, progress=False)
    write_jsonl(generated.records, folder / "logs.jsonl")
    tasks = tasks_from_logs([str(folder / "logs.jsonl")], "specialized", 4)
    scorer = WorldScorer(generated.tasks, noise=1.0)
    calibration = fit_calibration([-3.0, -1.0, 0.0, 0.5, 1.0, 3.0], [0, 0, 1, 0, 1, 1])
    return tasks, scorer, calibration


def _evaluate(tasks, scorer):
    lineup = build_lineup(tasks, rm=scorer)
    chosen = {k: lineup.selectors[k] for k in ("orchrm", "majority", "random")}
    return evaluate_tasks(lineup.tasks, chosen, 4, "math", progress=False)


def test_an_evaluation_carries_the_calibration_of_orchrm_s_model(world):
    tasks, scorer, calibration = world
    plain = WorldScorer(list(scorer.by_question.values()), noise=1.0)
    assert _evaluate(tasks, plain).calibration is None  # a model without a calibration
    calibrated = WorldScorer(list(scorer.by_question.values()), noise=1.0)
    calibrated.metadata[METADATA_KEY] = calibration.to_dict()
    report = _evaluate(tasks, calibrated).calibration
    # every held-out candidate with a plan, scored once: the same ECE computed directly
    pairs = [(t.question, c) for t in tasks for c in t.candidates if c.orchestration]
    raw = [r.score for r in calibrated.score([(q, c.orchestration) for q, c in pairs])]
    outcomes = [c.correct for _, c in pairs]
    assert report.candidates == len(pairs) == sum(b.count for b in report.bins)
    assert report.ece == pytest.approx(
        expected_calibration_error(calibration.probability(raw), outcomes)
    )
    assert report.ece_raw == pytest.approx(
        expected_calibration_error([1 / (1 + math.exp(-s)) for s in raw], outcomes)
    )
    assert report.ece_true is not None  # world logs: true success probabilities


def test_the_report_shows_the_calibration_and_its_reliability_diagram(world, tmp_path):
    tasks, scorer, calibration = world
    calibrated = WorldScorer(list(scorer.by_question.values()), noise=1.0)
    calibrated.metadata[METADATA_KEY] = calibration.to_dict()
    ev = _evaluate(tasks, calibrated)
    report = ev.calibration
    write_report([ev], tmp_path)
    text = (tmp_path / "report.md").read_text()
    assert "#### math: calibration of orchrm's P(correct)" in text
    assert f"ECE {report.ece:.3f} (raw sigmoid {report.ece_raw:.3f})" in text
    assert "math_reliability.png" in text
    rows = [line for line in text.splitlines() if line.startswith("| 0.")]
    assert len(rows) == len(report.bins)
    saved = json.loads((tmp_path / "report.json").read_text())["evaluations"][0]["calibration"]
    assert saved["ece"] == report.ece and saved["candidates"] == report.candidates
    assert [b["count"] for b in saved["bins"]] == [b.count for b in report.bins]
    assert (tmp_path / "math_reliability.png").stat().st_size > 5000
    assert f"ECE {report.ece:.3f}" in terminal_table(ev, 80)
    # the diagram plots each bin's mean prediction against its share of right executions
    fig = figures(ev)["math_reliability.png"]
    top = fig.axes[0]
    (container,) = top.containers
    line = container.lines[0]
    assert list(line.get_xdata()) == [b.confidence for b in report.bins]
    assert list(line.get_ydata()) == [b.accuracy for b in report.bins]
    assert f"ECE {report.ece:.3f} calibrated" in fig.get_suptitle()
    assert sum(p.get_height() for p in fig.axes[1].patches) == 2 * report.candidates
    assert "calibration of" not in markdown(replace(ev, calibration=None))

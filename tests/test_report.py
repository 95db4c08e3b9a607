"""orchrm.bestofn.report: the Markdown tables, the plots and the JSON of an evaluation."""

from __future__ import annotations

import json

import pytest

from orchrm.bestofn.metrics import evaluate_selectors
from orchrm.bestofn.report import write_report
from orchrm.bestofn.selectors import (
    CandidateSet,
    oracle_selector,
)
from tests.samples import candidate_set


def test_evaluation_intervals_and_report(tmp_path):
    tasks = [candidate_set(["a", "b"], [i % 2 == 0, i % 3 == 0]) for i in range(30)]
    tasks = [CandidateSet(f"t{i}", t.question, t.candidates) for i, t in enumerate(tasks)]
    ev = evaluate_selectors(
        tasks,
        {
            "oracle": oracle_selector,
            "first": lambda t: oracle_selector(
                CandidateSet(t.task_id, t.question, t.candidates[:1])
            ),
        },
        [2],
        domain="toy",
    )
    first = ev.at(2)["first"]
    assert first.accuracy == pytest.approx(sum(i % 2 == 0 for i in range(30)) / 30)
    assert first.accuracy_ci[0] <= first.accuracy <= first.accuracy_ci[1]
    write_report([ev], tmp_path)
    assert "| first |" in (tmp_path / "report.md").read_text()
    assert json.loads((tmp_path / "report.json").read_text())["evaluations"][0]["domain"] == "toy"
    assert (tmp_path / "toy_accuracy_vs_n.png").stat().st_size > 1000


def test_the_report_names_what_the_registry_says_is_replayed():
    from orchrm.bestofn.registry import REGISTRY, colour, label
    from orchrm.bestofn.report import DEFINITION

    replayed = [e.label for e in REGISTRY if e.replays_reruns]
    assert f"for {', '.join(replayed[:-1])} and {replayed[-1]}, their accuracy" in DEFINITION
    assert len({e.colour for e in REGISTRY}) == len(REGISTRY)  # one colour per selector
    assert label("not-registered") == "not-registered" and colour("not-registered") is None

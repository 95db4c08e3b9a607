"""The fit of plan to task (`orchrm.evaluation.fit`, `orchrm evaluate-rm --fit-logs`): on
records whose answer is known, a model that reads the fit ranks every kind's plans as
they succeed, and one that reads only the structure is caught in the kind whose best
structure is not its favourite."""

from __future__ import annotations

import json

import pytest

from orchrm.evaluation.fit import fit_table, fit_text, plan_rows, read_logs
from orchrm.jsonl import write_jsonl
from orchrm.scoring.base import ModelInfo, Scored

PLANS = {
    "cot": {"agents": [{"id": "a", "type": "CoTAgent", "input": ""}], "edges": []},
    "sc": {"agents": [{"id": "a", "type": "SCAgent", "input": ""}], "edges": []},
    "search": {"agents": [{"id": "a", "type": "WebSearchAgent", "input": ""}], "edges": []},
}
# kind -> success of each plan: arithmetic wants self-consistency, retrieval wants search
TRUTH = {"add": {"cot": 0.5, "sc": 0.8, "search": 0.1},
         "founded": {"cot": 0.3, "sc": 0.2, "search": 0.9}}  # fmt: skip


def record(task: str, kind: str, plan: str, p: float) -> dict:
    plan_fields = {"format": "orchrm", **PLANS[plan]}
    return {"task_id": task, "question": f"{task}?", "domain": "generated", "kind": kind,
            "orchestration": plan_fields, "world": {"p_success": p}}  # fmt: skip


class Reader:
    """A scorer whose score is a function of (question, plan): enough to hold the table
    to what it must say (the real scorers are covered in test_rm and test_ensemble)."""

    def __init__(self, score_of):
        self.score_of, self.info = score_of, ModelInfo({"reward_mean": 0.0, "reward_std": 1.0})

    def score(self, items):
        return [Scored(self.score_of(q, o), 10) for q, o, _ in items]


def rows() -> list:
    records = [record(f"{k}{i}", k, plan, p) for k, plans in TRUTH.items() for i in range(3)
               for plan, p in plans.items()]  # fmt: skip
    return plan_rows(records)


def kind_of(question: str) -> str:
    return "add" if question.startswith("add") else "founded"


def plan_name(o) -> str:
    return {"CoTAgent": "cot", "SCAgent": "sc", "WebSearchAgent": "search"}[o.agents[0].type]


def test_a_model_that_reads_fit_ranks_each_kind_as_it_succeeds():
    table = fit_table(Reader(lambda q, o: TRUTH[kind_of(q)][plan_name(o)]), rows())
    assert set(table.kinds) == {"add", "founded"}
    for k in table.kinds.values():
        assert k["plans"] == 9 and k["plan_rho"] == pytest.approx(1.0)
        assert k["structure_rho"] == pytest.approx(1.0)
    cell = next(c for c in table.cells if c["kind"] == "add" and c["structure"] == "SCAgent")
    assert cell == {"kind": "add", "structure": "SCAgent", "plans": 3,
                    "score": pytest.approx(0.8), "success": pytest.approx(0.8)}  # fmt: skip


def test_a_model_that_reads_only_structure_is_caught_where_its_favourite_loses():
    favourite = {"search": 2.0, "cot": 1.0, "sc": 0.0}  # search is good, whatever the task
    table = fit_table(Reader(lambda q, o: favourite[plan_name(o)]), rows())
    assert table.kinds["founded"]["structure_rho"] == pytest.approx(1.0)
    assert table.kinds["add"]["structure_rho"] == pytest.approx(-1.0)
    text = fit_text(table)
    assert "add" in text and "structure rho -1.00" in text


def test_repeated_executions_of_a_plan_are_its_success_rate(tmp_path):
    one, two = tmp_path / "draw0.jsonl", tmp_path / "draw1.jsonl"
    base = {"task_id": "t1", "question": "t1?", "kind": "add",
            "orchestration": {"format": "orchrm", **PLANS["sc"]}}  # fmt: skip
    write_jsonl([base | {"correct": True}, base | {"correct": False}], one)
    write_jsonl([base | {"correct": True}, {"task_id": "t1", "note": "no plan"}], two)
    (row,) = read_logs([one, two])
    assert row.successes == [1.0, 0.0, 1.0] and row.success == pytest.approx(2 / 3)
    assert row.kind == "add" and row.structure == "SCAgent"


def test_the_kind_of_a_world_task_is_the_type_that_fits_it(tmp_path):
    log, tasks = tmp_path / "held.jsonl", tmp_path / "held.tasks.jsonl"
    r = record("w1", "add", "cot", 0.4)
    del r["kind"]
    write_jsonl([r], log)
    tasks.write_text(json.dumps({"id": "w1", "best_type": "CoTAgent"}) + "\n")
    (row,) = read_logs([log], [tasks])
    assert row.kind == "CoTAgent" and row.success == 0.4

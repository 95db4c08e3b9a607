"""orchrm.selection.judges: LLM-as-a-judge at orchestration and at trajectory level."""

from __future__ import annotations

import pytest

from orchrm.evaluation.lineup import build_lineup, evaluate_tasks, read_world_tasks
from orchrm.evaluation.loading import tasks_from_logs
from orchrm.jsonl import write_jsonl
from orchrm.world.generate import generate


def test_world_judges_read_plans_or_trajectories_and_count_tokens(tmp_path):
    generated = generate("math", 6, 4, seed=2, progress=False)
    log, tasks_file = tmp_path / "log.jsonl", tmp_path / "tasks.jsonl"
    write_jsonl(generated.records, log)
    write_jsonl([t.to_dict() for t in generated.tasks], tasks_file)
    tasks = tasks_from_logs([str(log)], "specialized", 4)
    lineup = build_lineup(tasks, world_tasks=read_world_tasks([tasks_file]))
    ev = evaluate_tasks(lineup.tasks, lineup.selectors, 4, "math", progress=False)
    at = ev.at(4)
    assert {"judge-orch", "judge-traj", "bayes", "majority"} <= set(at)
    assert 0 < at["judge-orch"].verification_tokens < at["judge-traj"].verification_tokens
    assert at["judge-traj"].verification_tokens > at["majority"].verification_tokens
    assert at["oracle"].accuracy >= max(r.accuracy for r in at.values())
    assert at["oracle"].normalized_advantage == pytest.approx(1.0)
    assert [r.n for r in ev.results if r.selector == "random"] == [1, 2, 4]
    # the true success probability of the one executed candidate; none for votes
    # without re-executions, nor ever for the trajectory judge
    assert at["bayes"].expected_accuracy >= at["random"].expected_accuracy
    assert at["majority"].expected_accuracy is None and at["judge-traj"].expected_accuracy is None
    lo, hi = at["bayes"].expected_accuracy_ci
    assert lo <= at["bayes"].expected_accuracy <= hi
    from orchrm.evaluation.report import markdown

    assert "| majority | " in markdown(ev) and "expected accuracy % (95% CI)" in markdown(ev)


def test_the_world_judge_chooses_the_same_with_its_plans_read_before(tmp_path):
    """The orchestration judge keeps each plan's success probability once read: a
    backend that has judged every task already chooses as a fresh one does, and a plan
    it cannot read counts as hopeless."""
    from orchrm.selection.judges import llm_judge
    from orchrm.world.backend import WorldBackend

    generated = generate("math", 8, 4, seed=3, progress=False)
    write_jsonl(generated.records, tmp_path / "log.jsonl")
    tasks = tasks_from_logs([str(tmp_path / "log.jsonl")], "specialized", 4)
    seasoned = WorldBackend(generated.tasks)
    judge = llm_judge(seasoned, "orchestration")
    first = [judge(t) for t in tasks]
    assert len(seasoned._judged) == sum(len(t.candidates) for t in tasks)
    again = [judge(t) for t in tasks]
    fresh = [llm_judge(WorldBackend(generated.tasks), "orchestration")(t) for t in tasks]
    assert first == again == fresh
    assert len({s.index for s in first}) > 1
    assert seasoned._plan_probability(generated.tasks[0], "<not a plan") == 0.0

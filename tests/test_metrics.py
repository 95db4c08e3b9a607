"""orchrm.evaluation.metrics: accuracy, expected accuracy from re-executions, paired intervals,
and candidate sets read from logs and stores."""

from __future__ import annotations

import pytest

from orchrm.evaluation.loading import tasks_from_logs
from orchrm.evaluation.metrics import evaluate_selectors
from orchrm.jsonl import write_jsonl
from orchrm.selection.selectors import CandidateSet, majority_selector
from orchrm.world.generate import generate
from tests.samples import candidate_set


def test_votes_get_an_expected_accuracy_from_reruns():
    """Majority replayed on each re-execution: by hand, runs 1 and 3 vote right."""
    from dataclasses import replace

    base = candidate_set(["7", "7", "9"], [False, False, False], ps=[0.5, 0.5, 0.5])
    reruns = [
        (("42", True), ("7", False), ("42", True)),  # run 1: 42 twice
        (("7", False), ("7", False), ("42", True)),  # run 2: 7 twice
        (("42", True), ("42", True), ("9", False)),  # run 3: 42 twice
    ]
    cands = tuple(
        replace(c, reruns=tuple(run[i] for run in reruns)) for i, c in enumerate(base.candidates)
    )
    ev = evaluate_selectors(
        [CandidateSet("t", base.question, cands)], {"majority": majority_selector}, [3]
    )
    result = ev.at(3)["majority"]
    assert result.accuracy == 0.0  # the logged answers vote 7, which is wrong
    assert result.expected_accuracy == pytest.approx(2 / 3)
    # without reruns a vote has no expected accuracy
    ev = evaluate_selectors([base], {"majority": majority_selector}, [3])
    assert ev.at(3)["majority"].expected_accuracy is None


def test_a_replay_seen_again_is_chosen_from_once_and_counted_each_time():
    """Of 20 re-executions, runs that gave every candidate the same answers are one
    replay with its count: the vote is asked once per distinct replay, and the expected
    accuracy equals the mean over the 20 replayed one by one."""
    import statistics
    from dataclasses import replace

    from orchrm.evaluation.metrics import _replays, _rerun_expected

    base = candidate_set(["7", "7", "9"], [False, False, False], ps=[0.5, 0.5, 0.5])
    shapes = [
        (("42", True), ("7", False), ("42", True)),
        (("7", False), ("7", False), ("42", True)),
        (("42", True), ("42", True), ("9", False)),
    ]
    runs = [shapes[r % 3] if r % 4 else shapes[0] for r in range(20)]
    task = CandidateSet(
        "t",
        base.question,
        tuple(
            replace(c, reruns=tuple(run[i] for run in runs)) for i, c in enumerate(base.candidates)
        ),
    )
    asked = []

    def counting(t):
        asked.append(t)
        return majority_selector(t)

    replays = _replays(task)
    assert sorted(times for times, _ in replays) == [5, 5, 10]
    expected = _rerun_expected(counting, replays)
    assert len(asked) == 3
    one_by_one = [
        CandidateSet(
            "t",
            base.question,
            tuple(
                replace(c, answer=run[i][0], correct=run[i][1])
                for i, c in enumerate(base.candidates)
            ),
        )
        for run in runs
    ]
    by_hand = statistics.fmean(
        float(r.candidates[majority_selector(r).index].correct) for r in one_by_one
    )
    assert expected == by_hand == 15 / 20


def test_selectors_are_compared_with_the_baseline_task_by_task():
    """Plan 0 is right on 60 of 100 tasks and plan 1 on 50 of them, always the same
    ones: the marginal intervals overlap, the paired one of the 10-point gain does not."""
    from orchrm.evaluation.report import markdown
    from orchrm.selection.selectors import Selection

    tasks = [
        CandidateSet(
            f"t{i}",
            "q",
            candidate_set(["a", "b"], [i % 10 < 6, i % 10 < 5], ps=[0.9, 0.1]).candidates,
        )
        for i in range(100)
    ]
    ev = evaluate_selectors(
        tasks,
        {
            "zero": lambda t: Selection(0, (1.0, 0.0), 0, (0,)),
            "one": lambda t: Selection(1, (0.0, 1.0), 0, (1,)),
        },
        [2],
        baseline="one",
    )
    zero, one = ev.at(2)["zero"], ev.at(2)["one"]
    assert zero.accuracy_ci[0] < one.accuracy_ci[1]  # the marginal intervals overlap
    assert zero.vs_baseline == pytest.approx(0.10)
    assert 0.0 < zero.vs_baseline_ci[0] < 0.10 < zero.vs_baseline_ci[1] <= 0.2
    assert zero.expected_vs_baseline == pytest.approx(0.8)  # 0.9 - 0.1 on every task
    assert one.vs_baseline == 0.0 and one.vs_baseline_ci == (0.0, 0.0)
    table = markdown(ev)
    assert "expected - one, points (paired 95% CI)" in table
    assert "| +80.0 (+80.0 to +80.0) |" in table and "| (baseline) |" in table
    # rows by expected accuracy (zero 90%, one 10%), whatever the sampled one says
    for r in ev.results:
        r.accuracy = 1.0 if r.selector == "one" else 0.0
    assert markdown(ev).index("| zero |") < markdown(ev).index("| one |")
    # without the baseline among the selectors: no such column, no comparison
    alone = evaluate_selectors(tasks, {"zero": lambda t: Selection(0, (1.0, 0.0), 0, (0,))}, [2])
    assert alone.at(2)["zero"].vs_baseline is None and "paired" not in markdown(alone)


def test_store_tasks_match_log_tasks_and_hold_out_trained_ones(tmp_path):
    from orchrm.evaluation.loading import tasks_from_store
    from orchrm.store.db import Store
    from orchrm.store.ingest import ingest_file
    from orchrm.store.pairs import MineConfig, mine

    generated = generate("math", 12, 4, seed=5, progress=False)
    log = tmp_path / "log.jsonl"
    write_jsonl(generated.records, log)
    with Store(tmp_path / "s.duckdb") as store:
        ingest_file(store, log)
        from_store = {t.task_id: t for t in tasks_from_store(store, "specialized", 4)}
        from_logs = {t.task_id: t for t in tasks_from_logs([str(log)], "specialized", 4)}
        assert from_store.keys() == from_logs.keys()
        for task_id, t in from_logs.items():
            s = from_store[task_id]
            assert s.question == t.question and s.domain == t.domain == "math"
            fields = ("orchestration", "answer", "correct", "execution_tokens")
            for a, b in zip(s.candidates, t.candidates, strict=True):
                assert all(getattr(a, f) == getattr(b, f) for f in fields)
                assert (a.p_success or 0.0) == (b.p_success or 0.0)  # None: never executed
        mine(store, MineConfig(dataset="d", seed=0, split=(0.5, 0.25, 0.25)))
        seen = {
            r[0]
            for r in store.db.execute(
                "SELECT task_id FROM pairs WHERE dataset = 'd' AND split != 'test'"
            ).fetchall()
        }
        held = tasks_from_store(store, "specialized", 4, held_out_of="d")
        assert seen and {t.task_id for t in held} == from_logs.keys() - seen
        with pytest.raises(Exception, match="no pair dataset 'nope'"):
            tasks_from_store(store, held_out_of="nope")

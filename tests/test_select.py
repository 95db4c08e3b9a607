"""orchrm.bestofn.selectors, judge, evaluate and report: best-of-N choices and what they cost."""

from __future__ import annotations

import json
import statistics

import pytest

from orchrm.bestofn.lineup import evaluate_logs, selectors, world_judge
from orchrm.bestofn.metrics import evaluate
from orchrm.bestofn.report import write_report
from orchrm.bestofn.selectors import (
    Candidate,
    RewardModelSelector,
    Task,
    bayes_selector,
    logp_selector,
    majority_selector,
    oracle_selector,
    random_selector,
)
from orchrm.jsonl import write_jsonl
from orchrm.orchestration import Agent, DoM, Orchestration
from orchrm.rm.config import default_backbone
from orchrm.rm.model import OrchRM
from orchrm.world.generate import generate


def plan(agent_type: str) -> Orchestration:
    return Orchestration(agents=(Agent("A", agent_type),), dom=DoM.HIGH)


def task(answers, correct, tokens=100, logprobs=None, ps=None) -> Task:
    types = ["CoTAgent", "SCAgent", "ReflexionAgent", "DebateAgent", "WebSearchAgent"]
    return Task(
        "t",
        "What is 6 x 7?",
        tuple(
            Candidate(
                plan(types[i % 5]), a, c, tokens, (logprobs or [None] * 9)[i], (ps or [None] * 9)[i]
            )
            for i, (a, c) in enumerate(zip(answers, correct, strict=True))
        ),
    )


def test_majority_votes_and_pays_for_the_extra_executions():
    t = task(["41", "42", "42", "41"], [False, True, True, False])
    chosen = majority_selector(t)
    assert chosen.index == 0  # 41 and 42 tie: the answer seen first wins
    assert chosen.verification_tokens == 300 and len(chosen.executed) == 4
    assert majority_selector(task(["1", "2", "2"], [False, True, True])).index == 1
    # answers that say the same thing vote together
    numbers = task(["7", "1,000", "1000.", "7", "1000"], [False, True, True, False, True])
    assert majority_selector(numbers).index == 1
    names = task(["Lyon", "Paris.", "paris"], [False, True, True])
    assert majority_selector(names).index == 1
    letters = task(["A", "(B)", "The answer is B", "A) 42", "B"], [False, True, True, False, True])
    assert majority_selector(Task("t", "?", letters.candidates, "gpqa")).index == 1


def test_cheap_selectors_cost_nothing_to_choose():
    t = task(["1", "2", "3"], [False, False, True], logprobs=[-5.0, -1.0, -3.0], ps=[0.2, 0.1, 0.9])
    assert logp_selector(t).index == 1 and bayes_selector(t).index == 2
    assert oracle_selector(t).index == 2
    first = random_selector(seed=3)(t)
    assert first == random_selector(seed=3)(t)  # seeded per task
    for select in (logp_selector, bayes_selector, oracle_selector, random_selector(0)):
        assert select(t).verification_tokens == 0


def test_reward_model_selector_counts_its_input_tokens_and_scores_each_plan_once(monkeypatch):
    rm = OrchRM.load(default_backbone(), check_version=False)
    select = RewardModelSelector(rm)
    t = task(["1", "2", "3", "1"], [True, False, False, True])
    chosen = select(t)
    texts = [rm.render(t.question, c.orchestration) for c in t.candidates]
    expected = rm.score_texts(texts)
    assert chosen.index == max(range(4), key=expected.__getitem__)
    assert list(chosen.scores) == pytest.approx(expected, abs=1e-5)
    tokens = sum(len(x) for x in rm.tokenizer(texts, truncation=True)["input_ids"])
    assert chosen.verification_tokens == tokens
    scored = len(select._seen)
    select(Task("t", t.question, t.candidates[:2]))  # a subset: nothing new to score
    assert len(select._seen) == scored
    calls: list[int] = []
    real = rm.score_texts_with_tokens
    monkeypatch.setattr(
        rm, "score_texts_with_tokens", lambda texts: calls.append(len(texts)) or real(texts)
    )
    weighted = RewardModelSelector(rm, weighted=True, share_scores_with=select)(t)
    assert weighted.verification_tokens == tokens + 300  # plus the N - 1 executions
    assert calls == []  # orchrm's scores, shared: nothing scored again
    # warm: every plan of every task in one call, then selections only look up
    other = Task("u", "What is 5 x 5?", t.candidates)
    fresh = RewardModelSelector(rm)
    fresh.warm([t, other, t])
    assert calls == [4 + 4]
    assert fresh(other).scores != () and calls == [8]
    assert fresh(t).index == chosen.index
    # an evaluation: `orchrm` and `orchrm-weighted` (as `selectors` wires them) score
    # every plan once between them, in one call, whatever the subsets of N
    calls.clear()
    line_up = selectors(rm=rm)
    both = {name: line_up[name] for name in ("orchrm", "orchrm-weighted")}
    evaluate([t, other], both, [1, 2, 4])
    assert calls == [8]


def test_world_judges_read_plans_or_trajectories_and_count_tokens(tmp_path):
    generated = generate("math", 6, 4, seed=2, progress=False)
    log, tasks_file = tmp_path / "log.jsonl", tmp_path / "tasks.jsonl"
    write_jsonl(generated.records, log)
    write_jsonl([t.to_dict() for t in generated.tasks], tasks_file)
    chosen = selectors(judge=world_judge([tasks_file]), world=True)
    ev = evaluate_logs([str(log)], chosen, "specialized", 4, "math", progress=False)
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
    from orchrm.bestofn.report import markdown

    assert "| majority | " in markdown(ev) and "expected accuracy % (95% CI)" in markdown(ev)


def test_votes_get_an_expected_accuracy_from_reruns():
    """Majority replayed on each re-execution: by hand, runs 1 and 3 vote right."""
    from dataclasses import replace

    base = task(["7", "7", "9"], [False, False, False], ps=[0.5, 0.5, 0.5])
    reruns = [
        (("42", True), ("7", False), ("42", True)),  # run 1: 42 twice
        (("7", False), ("7", False), ("42", True)),  # run 2: 7 twice
        (("42", True), ("42", True), ("9", False)),  # run 3: 42 twice
    ]
    cands = tuple(
        replace(c, reruns=tuple(run[i] for run in reruns)) for i, c in enumerate(base.candidates)
    )
    ev = evaluate([Task("t", base.question, cands)], {"majority": majority_selector}, [3])
    result = ev.at(3)["majority"]
    assert result.accuracy == 0.0  # the logged answers vote 7, which is wrong
    assert result.expected_accuracy == pytest.approx(2 / 3)
    # without reruns a vote has no expected accuracy
    ev = evaluate([base], {"majority": majority_selector}, [3])
    assert ev.at(3)["majority"].expected_accuracy is None


def test_world_reruns_fill_every_candidate(tmp_path):
    from orchrm.bestofn.metrics import tasks_from_logs
    from orchrm.bestofn.reruns import with_reruns

    generated = generate("math", 6, 4, seed=2, progress=False)
    log = tmp_path / "log.jsonl"
    write_jsonl(generated.records, log)
    tasks = with_reruns(tasks_from_logs([str(log)], "specialized", 4), generated.tasks, k=5)
    for t in tasks:
        for c in t.candidates:
            assert len(c.reruns) == 5
            if c.orchestration is None:
                assert c.reruns == ((None, False),) * 5
    runs = [r for t in tasks for c in t.candidates if c.orchestration for r in c.reruns]
    assert any(right for _, right in runs) and any(a is not None for a, _ in runs)
    at = evaluate(tasks, selectors(world=True), [4]).at(4)
    assert 0.0 <= at["majority"].expected_accuracy <= 1.0
    # the oracle's is expected pass@N over the replays, at least every single pick's
    replays = [
        statistics.fmean(any(c.reruns[k][1] for c in t.candidates) for k in range(5)) for t in tasks
    ]
    assert at["oracle"].expected_accuracy == pytest.approx(statistics.fmean(replays))
    with pytest.raises(ValueError, match="not in the world task files"):
        with_reruns(tasks, generated.tasks[:1], k=1)


def test_evaluation_intervals_and_report(tmp_path):
    tasks = [task(["a", "b"], [i % 2 == 0, i % 3 == 0]) for i in range(30)]
    tasks = [Task(f"t{i}", t.question, t.candidates) for i, t in enumerate(tasks)]
    ev = evaluate(
        tasks,
        {
            "oracle": oracle_selector,
            "first": lambda t: oracle_selector(Task(t.task_id, t.question, t.candidates[:1])),
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


def test_selectors_are_compared_with_the_baseline_task_by_task():
    """Plan 0 is right on 60 of 100 tasks and plan 1 on 50 of them, always the same
    ones: the marginal intervals overlap, the paired one of the 10-point gain does not."""
    from orchrm.bestofn.report import markdown
    from orchrm.bestofn.selectors import Selection

    tasks = [
        Task(f"t{i}", "q", task(["a", "b"], [i % 10 < 6, i % 10 < 5], ps=[0.9, 0.1]).candidates)
        for i in range(100)
    ]
    ev = evaluate(
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
    alone = evaluate(tasks, {"zero": lambda t: Selection(0, (1.0, 0.0), 0, (0,))}, [2])
    assert alone.at(2)["zero"].vs_baseline is None and "paired" not in markdown(alone)


def test_eval_command_writes_the_report(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    generated = generate("science", 5, 4, seed=4, progress=False)
    log, tasks_file = tmp_path / "log.jsonl", tmp_path / "tasks.jsonl"
    write_jsonl(generated.records, log)
    write_jsonl([t.to_dict() for t in generated.tasks], tasks_file)
    orchrm = str(Path(sys.executable).with_name("orchrm"))
    done = subprocess.run(
        [
            orchrm,
            "eval",
            str(log),
            "--n",
            "4",
            "--orchestrator",
            "base",
            "--world-tasks",
            str(tasks_file),
            "--domain",
            "science",
            "--out",
            str(tmp_path / "report"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| judge-traj |" in done.stdout and "best-of-4 on 5 held-out tasks" in done.stdout
    assert (tmp_path / "report" / "science_accuracy_vs_tokens.png").exists()
    numbers = json.loads((tmp_path / "report" / "report.json").read_text())
    majority = [
        r for e in numbers["evaluations"] for r in e["results"] if r["selector"] == "majority"
    ]
    assert majority[-1]["expected_accuracy"] is not None  # 20 re-executions by default
    missing = subprocess.run(
        [orchrm, "eval", str(log), "--n", "9", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert missing.returncode == 2 and "no task in the logs has 9 samples" in missing.stderr


def test_store_tasks_match_log_tasks_and_hold_out_trained_ones(tmp_path):
    from orchrm.bestofn.metrics import tasks_from_logs, tasks_from_store
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


def test_eval_command_reads_a_store_and_writes_a_table_per_domain(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    from orchrm.store.db import Store
    from orchrm.store.ingest import ingest_file

    files = []
    with Store(tmp_path / "s.duckdb") as store:
        for preset in ("math", "multihop"):
            generated = generate(preset, 5, 4, seed=6, progress=False)
            log = tmp_path / f"{preset}.jsonl"
            write_jsonl(generated.records, log)
            write_jsonl([t.to_dict() for t in generated.tasks], tmp_path / f"{preset}.tasks.jsonl")
            files.append(str(tmp_path / f"{preset}.tasks.jsonl"))
            ingest_file(store, log)
    orchrm = str(Path(sys.executable).with_name("orchrm"))
    args = [orchrm, "eval", "--store", str(tmp_path / "s.duckdb"), "--n", "4"]
    args += ["--orchestrator", "base", "--out", str(tmp_path / "report")]
    done = subprocess.run(
        args + [x for f in files for x in ("--world-tasks", f)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert [e["domain"] for e in report["evaluations"]] == ["math", "multihop"]
    assert all(e["tasks"] == 5 for e in report["evaluations"])
    assert done.stdout.count("best-of-4 on 5 held-out tasks") == 2
    both = subprocess.run(
        [orchrm, "eval", str(tmp_path / "math.jsonl"), "--store", str(tmp_path / "s.duckdb")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert both.returncode == 2 and "either log files or --store" in both.stderr

"""orchrm.evaluation.lineup and registry: the line-up every command builds, world re-executions,
and the eval command."""

from __future__ import annotations

import json
import statistics

import pytest

from orchrm.errors import InputError
from orchrm.evaluation.lineup import build_lineup
from orchrm.evaluation.loading import tasks_from_logs
from orchrm.evaluation.metrics import evaluate_selectors
from orchrm.jsonl import write_jsonl
from orchrm.world.generate import generate
from tests.conftest import run_orchrm
from tests.samples import candidate_set


def test_world_reruns_fill_every_candidate(tmp_path):

    generated = generate("math", 6, 4, seed=2, progress=False)
    log = tmp_path / "log.jsonl"
    write_jsonl(generated.records, log)
    logged = tasks_from_logs([str(log)], "specialized", 4)
    lineup = build_lineup(logged, world_tasks=generated.tasks, reruns=5)
    tasks = lineup.tasks
    for t in tasks:
        for c in t.candidates:
            assert len(c.reruns) == 5
            if c.orchestration is None:
                assert c.reruns == ((None, False),) * 5
    runs = [r for t in tasks for c in t.candidates if c.orchestration for r in c.reruns]
    assert any(right for _, right in runs) and any(a is not None for a, _ in runs)
    at = evaluate_selectors(tasks, lineup.selectors, [4]).at(4)
    assert 0.0 <= at["majority"].expected_accuracy <= 1.0
    # the oracle's is expected pass@N over the replays, at least every single pick's
    replays = [
        statistics.fmean(any(c.reruns[k][1] for c in t.candidates) for k in range(5)) for t in tasks
    ]
    assert at["oracle"].expected_accuracy == pytest.approx(statistics.fmean(replays))
    with pytest.raises(InputError, match="not in the world task files"):
        build_lineup(logged, world_tasks=generated.tasks[:1], reruns=1)


def test_reruns_spread_over_processes_give_what_one_process_gives(monkeypatch):
    from orchrm.evaluation import reruns

    generated = generate("math", 8, 4, seed=5, progress=False)
    logged = _logged_tasks(generated)
    monkeypatch.setattr(reruns.os, "sched_getaffinity", lambda pid: {0})
    alone = reruns.with_reruns(logged, generated.tasks, 5)
    monkeypatch.setattr(reruns.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(reruns, "PARALLEL_FROM", 0)
    started = []
    real_pool = reruns.ProcessPoolExecutor
    monkeypatch.setattr(
        reruns, "ProcessPoolExecutor", lambda *a, **k: started.append(a) or real_pool(*a, **k)
    )
    spread = reruns.with_reruns(logged, generated.tasks, 5)
    assert started and started[0][0] == 2  # two processes ran the five runs
    assert spread == alone
    assert len({c.reruns for t in alone for c in t.candidates if c.orchestration}) > 1


def _logged_tasks(generated):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "log.jsonl"
        write_jsonl(generated.records, log)
        return tasks_from_logs([str(log)], "specialized", 4)


def test_the_search_runs_at_the_full_n_alone_unless_the_curve_is_asked_for():
    from orchrm.evaluation.lineup import CURVE_COSTLY, evaluate_tasks
    from orchrm.selection.selectors import Selection

    tasks = _logged_tasks(generate("math", 6, 4, seed=2, progress=False))
    searched = []

    def first(task):
        return Selection(0, (None,) * len(task.candidates), 0, (0,))

    def search(task):
        searched.append(len(task.candidates))
        return first(task)

    assert "orchrm-search" in CURVE_COSTLY
    line_up = {"orchrm-search": search, "first": first}
    alone = evaluate_tasks(tasks, line_up, 4, "math", False, curve=False)
    assert set(searched) == {4} and len(searched) == len(tasks)  # never on a subset
    assert sorted(r.n for r in alone.results if r.selector == "orchrm-search") == [4]
    assert sorted(r.n for r in alone.results if r.selector == "first") == [1, 2, 4]
    curve = evaluate_tasks(tasks, line_up, 4, "math", False, curve=True)
    assert sorted(r.n for r in curve.results if r.selector == "orchrm-search") == [1, 2, 4]
    assert alone.at(4) == curve.at(4)  # the table is the same either way
    assert alone.at(2) == {k: v for k, v in curve.at(2).items() if k != "orchrm-search"}


def test_eval_command_writes_the_report(tmp_path):

    generated = generate("science", 5, 4, seed=4, progress=False)
    log, tasks_file = tmp_path / "log.jsonl", tmp_path / "tasks.jsonl"
    write_jsonl(generated.records, log)
    write_jsonl([t.to_dict() for t in generated.tasks], tasks_file)
    done = run_orchrm(
        "eval", str(log), "--samples", "4", "--orchestrator", "base",
        "--world-tasks", str(tasks_file), "--domain", "science", "--out", str(tmp_path / "report"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "judge-traj" in done.stdout and "best-of-4 on 5 held-out tasks" in done.stdout
    assert "| judge-traj |" in (tmp_path / "report" / "report.md").read_text()
    assert (tmp_path / "report" / "science_accuracy_vs_tokens.png").exists()
    numbers = json.loads((tmp_path / "report" / "report.json").read_text())
    majority = [
        r for e in numbers["evaluations"] for r in e["results"] if r["selector"] == "majority"
    ]
    assert majority[-1]["expected_accuracy"] is not None  # 20 re-executions by default
    missing = run_orchrm("eval", str(log), "--samples", "9", "--out", str(tmp_path))
    assert missing.returncode == 2 and "no task in the logs has 9 samples" in missing.stderr


def test_eval_command_reads_a_store_and_writes_a_table_per_domain(tmp_path):

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
    args = ["eval", "--store", str(tmp_path / "s.duckdb"), "--samples", "4"]
    args += ["--orchestrator", "base", "--out", str(tmp_path / "report")]
    done = run_orchrm(*args, *[x for f in files for x in ("--world-tasks", f)])
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert [e["domain"] for e in report["evaluations"]] == ["math", "multihop"]
    assert all(e["tasks"] == 5 for e in report["evaluations"])
    assert done.stdout.count("best-of-4 on 5 held-out tasks") == 2
    both = run_orchrm("eval", str(tmp_path / "math.jsonl"), "--store", str(tmp_path / "s.duckdb"))
    assert both.returncode == 2 and "either log files or --store" in both.stderr


def test_the_line_up_holds_every_registered_selector_its_inputs_allow():
    from orchrm.selection.registry import REGISTRY, RERUN_SELECTORS
    from orchrm.selection.selectors import Selection

    generated = generate("math", 3, 2, seed=7, progress=False)
    tasks = [candidate_set(["1", "2"], [True, False])]
    bare = build_lineup(tasks).selectors
    assert list(bare) == ["majority", "random", "logp", "oracle"]
    fold = lambda t: Selection(1, executed=(1,))  # noqa: E731 (a ready `orchrm`)
    ready = build_lineup(tasks, rm_selector=fold).selectors
    assert ready["orchrm"] is fold and "orchrm-weighted" not in ready  # weighting needs the rm
    world = build_lineup(tasks, world_tasks=generated.tasks).selectors
    assert {"judge-orch", "judge-traj", "bayes"} <= set(world)
    order = [e.name for e in REGISTRY]
    assert list(world) == [name for name in order if name in world]  # registry order
    votes = {"majority", "orchrm-weighted", "orchrm-top2-vote", "orchrm-top3-vote"}
    assert {*votes, "oracle"} == RERUN_SELECTORS


def test_eval_says_which_domains_and_sample_counts_there_are(tmp_path, orchrm_cli):
    generated = generate("science", 3, 4, seed=4, progress=False)
    log = tmp_path / "log.jsonl"
    write_jsonl(generated.records, log)
    done = orchrm_cli("eval", str(log), "--domain", "sciense", "--out", str(tmp_path / "r"))
    assert done.returncode == 2
    assert "no task of domain 'sciense' in the logs; its domains: 'science'" in done.stderr
    done = orchrm_cli("eval", str(log), "--samples", "9", "--out", str(tmp_path / "r"))
    assert done.returncode == 2
    assert "has 9 samples (the most any has: 8); lower --samples" in done.stderr
    done = orchrm_cli("eval", "--store", str(tmp_path / "typo.duckdb"))
    assert done.returncode == 3 and "does not exist" in done.stderr
    assert not (tmp_path / "typo.duckdb").exists()
    done = orchrm_cli("eval", str(log), "--store", str(tmp_path / "typo.duckdb"))
    assert done.returncode == 2 and "either log files or --store" in done.stderr
    done = orchrm_cli("eval", str(log), "--n", "4")
    assert done.returncode == 2 and "did you mean --samples?" in done.stderr
    done = orchrm_cli("world", "generate", "--tasks", "4", "--out", str(tmp_path / "w"))
    assert done.returncode == 2 and "did you mean --num-tasks" in done.stderr


def test_eval_writes_the_page_of_every_task_beside_its_report(tmp_path, orchrm_cli):
    generated = generate("math", 3, 4, seed=6, progress=False)
    log = tmp_path / "log.jsonl"
    write_jsonl(generated.records, log)
    out = tmp_path / "report"
    done = orchrm_cli(
        "eval", str(log), "--samples", "4", "--orchestrator", "base", "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    page = (out / "view.html").read_text()
    assert (out / "report.md").exists() and page.count('class="task') >= 3
    assert all(t.id in page for t in generated.tasks)

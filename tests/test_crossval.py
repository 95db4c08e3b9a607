"""orchrm.evaluation.crossval: cross-validated best-of-N, each task scored by an unseen model."""

import json

import pytest

from orchrm.evaluation.crossval import LotoConfig, cross_validate, fold_of
from orchrm.jsonl import read_jsonl, write_jsonl
from orchrm.store.db import Store
from orchrm.store.ingest import ingest_file
from orchrm.store.pairs import MineConfig
from orchrm.training.config import TrainConfig
from orchrm.world.generate import generate
from tests.conftest import run_orchrm


@pytest.fixture(scope="module")
def store_file(tmp_path_factory):
    root = tmp_path_factory.mktemp("loto")
    log = root / "math.jsonl"
    write_jsonl(generate("math", 4, 4, seed=7, progress=False).records, log)
    with Store(root / "s.duckdb") as store:
        ingest_file(store, log)
    return root / "s.duckdb"


def test_each_task_is_scored_by_a_model_that_never_saw_it(store_file, tmp_path):
    config = LotoConfig(  # leave-one-task-out: 4 tasks, 4 folds
        out=str(tmp_path),
        n=4,
        orchestrator="specialized",
        mine=MineConfig(dataset="cv", specialized=("specialized",), base=("base",)),
        train=TrainConfig(max_steps=2, batch_size=4, max_length=64),
        keep_models=True,
    )
    lines = []
    with Store(store_file) as store:
        evaluations = cross_validate(store, config, say=lines.append)
    [ev] = evaluations
    assert ev.domain == "math" and ev.n == 4 and ev.tasks == 4
    built_on_orchrm = {"orchrm-top2-vote", "orchrm-top3-vote", "orchrm-adaptive", "orchrm-cost"}
    assert {"orchrm", "majority", "random", "logp", "oracle", *built_on_orchrm} == set(ev.at(4))
    assert ev.at(4)["orchrm"].verification_tokens > 0
    assert ev.notes["protocol"] == "leave-one-task-out"
    held = [line for line in lines if line.startswith("fold-")]
    assert len(held) == 4 and all("held out 1 task(s)" in line for line in held)
    with Store(store_file) as store:
        all_tasks = {r[0] for r in store.db.execute("SELECT task_id FROM pairs").fetchall()}
    for fold in range(4):
        rows = [r for _, r in read_jsonl(tmp_path / f"fold-{fold:02d}" / "pairs" / "train.jsonl")]
        assert len(all_tasks - {r["task_id"] for r in rows}) == 1  # exactly its own task
        assert (tmp_path / f"fold-{fold:02d}" / "rm" / "model" / "orchrm.json").exists()


def test_cross_validate_command_with_folds_by_hash(store_file, tmp_path):
    args = ["cross-validate", "--store", str(store_file), "--samples", "4"]
    args += ["--orchestrator", "specialized", "--specialized", "specialized", "--base", "base"]
    args += ["--folds", "2", "--epochs", "0.2", "--max-length", "64", "--out", str(tmp_path)]
    done = run_orchrm(*args)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["evaluations"][0]["notes"]["protocol"] == "2 folds of tasks (by hash)"
    assert not list(tmp_path.glob("fold-*/rm"))  # only the scores are kept
    for fold in (0, 1):
        rows = [r for _, r in read_jsonl(tmp_path / f"fold-{fold:02d}" / "pairs" / "train.jsonl")]
        assert all(fold_of(r["task_id"], 2) != fold for r in rows)
    missing = run_orchrm(
        "cross-validate", "--store", str(store_file), "--samples", "99", "--out", str(tmp_path)
    )
    assert missing.returncode == 2 and "no task in the store has 99 candidates" in missing.stderr

"""`orchrm calibrate` (orchrm.calibration.calibrate): a tiny real reward model calibrated on world
logs, every record or one split's tasks of a store; the map stored in its orchrm.json,
read back, and replaced by the next calibration."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from orchrm.calibration.methods import calibration_from_dict, calibration_from_metadata
from orchrm.cli import app
from orchrm.jsonl import write_jsonl
from orchrm.scoring.load import load_scorer
from orchrm.store.db import Store
from orchrm.world.generate import generate
from tests.samples import tiny_decoder


def invoke(*args: str, columns: int = 200):
    return CliRunner(env={"COLUMNS": str(columns), "HF_HUB_OFFLINE": "1"}).invoke(app, list(args))


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(folder, log, records): world logs of 12 multihop tasks, 8 samples each, and a
    tiny model whose orchrm.json holds a key calibration must keep."""
    folder = tmp_path_factory.mktemp("calibrate")
    records = generate("multihop", 12, 8, seed=3, progress=False).records
    log = folder / "multihop.jsonl"
    write_jsonl(records, log)
    model = tiny_decoder(folder / "rm" / "model", [r["question"] + " " + r["raw"] for r in records])
    (model / "orchrm.json").write_text(json.dumps({"max_length": 256, "reward_std": 1.0}))
    return folder, log, records


def executed(records, tasks=None):
    return [
        r
        for r in records
        if r.get("orchestration")
        and r.get("execution")
        and (tasks is None or r["task_id"] in tasks)
    ]


def test_calibrate_stores_the_map_and_a_second_one_replaces_it(world):
    folder, log, records = world
    model = folder / "rm" / "model"
    done = invoke("calibrate", "--rm", str(folder / "rm"), str(log), "--json")
    assert done.exit_code == 0, done.output
    first = json.loads(done.stdout)
    fitted = executed(records)
    assert first["candidates"] == len(fitted) and first["method"] == "isotonic"
    assert first["correct"] == sum(bool(r["correct"]) for r in fitted)
    assert first["tasks"] == 12 and first["model"] == str(model)
    assert first["ece"] == pytest.approx(0.0, abs=1e-9)  # isotonic: exact on its own data
    stored = json.loads((model / "orchrm.json").read_text())
    assert stored["max_length"] == 256 and stored["calibration"] == first["calibration"]
    assert calibration_from_metadata(load_scorer(model).metadata) == calibration_from_dict(
        first["calibration"]
    )
    done = invoke("calibrate", "--rm", str(model), str(log), "--method", "platt", "--json")
    assert done.exit_code == 0, done.output
    second = json.loads(done.stdout)
    assert second["method"] == "platt" and second["ece_raw"] == pytest.approx(first["ece_raw"])
    stored = json.loads((model / "orchrm.json").read_text())
    assert stored["calibration"] == second["calibration"] != first["calibration"]
    assert set(stored["calibration"]) == {"method", "a", "b"} and stored["reward_std"] == 1.0


def test_the_table_fits_80_columns(world):
    folder, log, records = world
    done = invoke("calibrate", "--rm", str(folder / "rm"), str(log), columns=80)
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert max(map(len, lines)) <= 80
    assert any(line.startswith("sigmoid(raw score)") for line in lines)
    assert any(line.startswith("isotonic") and "steps" in line for line in lines)
    assert f"{len(executed(records))} executed candidates of 12 tasks" in " ".join(lines)


def test_tasks_from_a_store_take_one_splits_tasks_only(world, tmp_path):
    folder, log, records = world
    db = tmp_path / "s.duckdb"
    assert invoke("ingest", "--store", str(db), str(log)).exit_code == 0
    mined = invoke("pairs", "mine", "--store", str(db), "--split", "0.4,0.3,0.3", "--json")
    assert mined.exit_code == 0, mined.output
    with Store(db, read_only=True) as store:
        splits = store.db.execute("SELECT DISTINCT task_id, split FROM pairs").fetchall()
    by_split = {part: {t for t, p in splits if p == part} for part in ("validation", "test")}
    assert by_split["validation"] and by_split["test"]
    for part, tasks in by_split.items():
        args = ["calibrate", "--rm", str(folder / "rm"), str(log), "--tasks-from", str(db)]
        done = invoke(*args, "--split", part, "--method", "platt", "--json")
        assert done.exit_code == 0, done.output
        out = json.loads(done.stdout)
        assert out["candidates"] == len(executed(records, tasks)) < len(executed(records))
        assert out["tasks"] == len(tasks) and part in out["source"]
    again = invoke(*args, "--dataset", "nope")
    assert again.exit_code == 2 and "no pair dataset 'nope'" in again.output
    train = invoke(*args, "--split", "train")
    assert train.exit_code == 2 and "'train'" in train.output  # it trained on those


def test_what_cannot_be_calibrated_is_one_clear_line(world, tmp_path):
    folder, log, records = world
    planned = tmp_path / "planned.jsonl"
    write_jsonl([{**r, "execution": None} for r in records[:5]], planned)
    done = invoke("calibrate", "--rm", str(folder / "rm"), str(planned))
    assert done.exit_code == 2 and "no executed record in the 1 log file" in done.output
    done = invoke("calibrate", "--rm", str(tmp_path), str(log))
    assert done.exit_code == 3 and f"no reward model in {tmp_path}" in done.output
    done = invoke("calibrate", "--rm", str(folder / "rm"), str(log), "--orchestrator", "nobody")
    assert done.exit_code == 2 and "no executed sample of orchestrator 'nobody'" in done.output
    assert "base" in done.output  # the orchestrators there are
    done = invoke("calibrate", "--rm", str(folder / "rm"), str(log), "--method", "beta")
    assert done.exit_code == 2 and "'beta'" in done.output

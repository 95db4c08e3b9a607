"""orchrm.experiments.stages: each stage reuses its output while its inputs stay the same,
and a changed input reruns it and everything downstream."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pytest

import orchrm.evaluation.lineup
import orchrm.experiments.world_models as world_models
import orchrm.store.pairs
import orchrm.training.train
import orchrm.world.generate
from orchrm.experiments.demo.config import DemoConfig
from orchrm.experiments.demo.run import run_demo
from orchrm.experiments.stages import STAGE_JSON, fingerprint, run_stage, world_log
from orchrm.experiments.world_models import Cut, PairDataset, WorldRMConfig, world_reward_models
from orchrm.training.config import TrainConfig


@pytest.fixture
def calls(monkeypatch) -> Counter:
    """How often each stage's work ran: world generation, pair mining, training and
    best-of-N evaluation."""
    seen: Counter = Counter()
    for module, name in (
        (orchrm.world.generate, "generate"),
        (orchrm.store.pairs, "mine"),
        (orchrm.training.train, "train"),
        (orchrm.evaluation.lineup, "evaluate_tasks"),
    ):
        work = getattr(module, name)

        def counted(*args, _work=work, _name=name, **kwargs):
            seen[_name] += 1
            return _work(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    return seen


def test_a_stage_runs_once_for_the_same_inputs_and_again_when_one_changes(tmp_path):
    manifest, output = tmp_path / "stage.json", tmp_path / "out.txt"
    runs = []

    def build(values: dict):
        def write() -> dict:
            runs.append(values)
            output.write_text("x")
            return {"n": len(runs)}

        return write

    first = run_stage(manifest, "s", {"a": 1}, ["up"], [output], build({"a": 1}))
    again = run_stage(manifest, "s", {"a": 1}, ["up"], [output], build({"a": 1}))
    assert not first.reused and again.reused and again.info == {"n": 1} and len(runs) == 1
    assert again.fingerprint == first.fingerprint == fingerprint("s", {"a": 1}, ["up"])
    changed = run_stage(manifest, "s", {"a": 2}, ["up"], [output], build({"a": 2}))
    upstream = run_stage(manifest, "s", {"a": 2}, ["other"], [output], build({"a": 2}))
    assert not changed.reused and not upstream.reused and len(runs) == 3
    output.unlink()  # an output gone: the stage runs again
    assert not run_stage(manifest, "s", {"a": 2}, ["other"], [output], build({"a": 2})).reused

    def fails() -> dict:
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        run_stage(manifest, "s", {"a": 3}, [], [output], fails)
    assert not manifest.exists()  # an interrupted run is never taken for a complete one


def test_world_log_pairs_and_model_are_reused_and_rerun_from_a_changed_seed(
    tmp_path, calls, monkeypatch
):
    def pipeline(seed: int, steps: int = 1):
        log = world_log(tmp_path / "logs", "math", "math", 10, 2, seed, progress=False)
        config = WorldRMConfig(
            out=str(tmp_path),
            logs=[log],
            datasets=(PairDataset("m", "math", steps=steps),),
            split=(0.7, 0.3, 0.0),
            budget=Cut(64),
            train=TrainConfig(max_length=32, batch_size=4),
            progress=False,
        )
        return log, world_reward_models(config).datasets["m"]

    log, trained = pipeline(seed=3)
    assert calls == {"generate": 1, "mine": 1, "train": 1}
    assert not log.reused and not trained.reused
    weights = (trained.model / "model.safetensors").read_bytes()
    again_log, again = pipeline(seed=3)
    assert calls == {"generate": 1, "mine": 1, "train": 1}  # nothing ran again
    assert again_log.reused and again.reused and again.fingerprint == trained.fingerprint
    assert again.summary == trained.summary and again.mined == trained.mined
    assert again.calibration.ece == trained.calibration.ece
    assert (again.model / "model.safetensors").read_bytes() == weights
    pipeline(seed=3, steps=2)  # the model's own setting: only the model trains again
    assert calls == {"generate": 1, "mine": 1, "train": 2}
    # a new version of mining (other ids or draws from the same logs): mined and trained
    # again, never the cached pairs of the old code
    monkeypatch.setattr(world_models, "MINING_VERSION", world_models.MINING_VERSION + 1)
    pipeline(seed=3, steps=2)
    assert calls == {"generate": 1, "mine": 2, "train": 3}
    _, changed = pipeline(seed=4, steps=2)  # the world's seed: every stage runs again
    assert calls == {"generate": 2, "mine": 3, "train": 4} and not changed.reused
    manifest = json.loads((tmp_path / "logs" / f"math.{STAGE_JSON}").read_text())
    assert manifest["values"]["seed"] == 4 and manifest["info"]["records"] == 40


def test_the_demo_run_again_reuses_every_stage_and_writes_the_same_report(tmp_path, calls):
    config = DemoConfig(
        out=str(tmp_path),
        train_tasks=20,
        test_tasks=10,
        samples=2,
        steps=1,
        max_length=32,
        reruns=1,
        dtype="fp32",
    )
    lines: list[str] = []
    run_demo(config, say=lines.append)
    done = {"generate": 2, "mine": 1, "train": 1, "evaluate_tasks": 1}
    assert calls == done
    report, view = (tmp_path / "report.md").read_text(), (tmp_path / "view.html").read_text()
    lines.clear()
    run_demo(config, say=lines.append)
    assert calls == done  # nothing generated, mined, trained or evaluated again
    assert (tmp_path / "report.md").read_text() == report
    assert (tmp_path / "view.html").read_text() == view
    assert "math train: 80 records (reused)" in lines
    assert any(line.startswith("reward model math: ") and "(reused)" in line for line in lines)
    run_demo(replace(config, reruns=2), say=lines.append)  # only best-of-N runs again
    assert calls == {**done, "evaluate_tasks": 2}

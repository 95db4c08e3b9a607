"""`--report-to` (`orchrm.training.tracking`): `orchrm train` writes TensorBoard event
files with what a reward-model practitioner reads, read back here with TensorBoard's own
reader; `orchrm rl` hands the setting to TRL and logs its evaluation curve."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from orchrm.errors import ConfigError
from orchrm.training.config import TrainConfig
from orchrm.training.tracking import StepStats, Tracker, check_report_to, flatten
from orchrm.training.train import train
from tests.samples import tiny_train_config, world_math_pairs


def scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the event files under `folder`: tag -> [(step, value), ...]."""
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    events.Reload()
    return {
        tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]
    }


@pytest.fixture(scope="module")
def pairs_and_backbone(tmp_path_factory) -> tuple[Path, Path]:
    pairs, backbone, _ = world_math_pairs(tmp_path_factory.mktemp("tracking"))
    return pairs, backbone


def test_train_writes_tensorboard_events_a_practitioner_reads(pairs_and_backbone, tmp_path):
    pairs, backbone = pairs_and_backbone
    config = tiny_train_config(
        pairs,
        tmp_path / "rm",
        backbone,
        peak_flops=1e12,  # an MFU on a CPU, whose peak orchrm does not guess
        report_to="tensorboard",
    )
    summary = train(config, progress=False)
    (run,) = (tmp_path / "rm" / "runs").iterdir()
    assert run.name.endswith("-train") and list(run.glob("events.out.tfevents.*"))
    found = scalars(run)
    per_step = [
        "train/loss",
        "train/accuracy",
        "train/reward_margin",
        "train/reward_margin_std",
        "train/learning_rate",
        "train/grad_norm",
        "train/epoch",
        "throughput/tokens_per_second",
        "throughput/mfu",
    ]
    for tag in per_step:
        assert [step for step, _ in found[tag]] == [1, 2, 3, 4], tag
    kinds = [t for t in found if t.startswith("train/accuracy_by_kind/")]
    assert kinds and {t.rsplit("/", 1)[1] for t in kinds} <= {"coi", "sob", "soo"}
    validation = [
        "validation/accuracy",
        "validation/reward_margin",
        "validation/reward_mean",
        "validation/reward_std",
        "validation/accuracy_by_domain/math",
    ]
    for tag in validation:
        assert [step for step, _ in found[tag]] == [2, 4], tag
    assert any(t.startswith("validation/accuracy_by_kind/") for t in found)
    # the values are the run's: the validation accuracy its history holds, the schedule
    history = {h["step"]: h for h in summary.history}
    for step, value in found["validation/accuracy"]:
        assert math.isclose(value, history[step]["accuracy"], rel_tol=1e-6)
    rates = [value for _, value in found["train/learning_rate"]]
    # no warm-up step in 4 (int(0.1 x 4)), then linear decay from lr
    assert rates == pytest.approx([5e-5, 3.75e-5, 2.5e-5, 1.25e-5])
    assert all(0 <= v <= 1 for _, v in found["train/accuracy"])
    assert all(v > 0 for _, v in found["train/grad_norm"] + found["throughput/mfu"])
    print("\n".join(sorted(found)))  # the tags, for the record


def test_no_tracking_writes_nothing_and_a_missing_package_is_named(pairs_and_backbone, tmp_path):
    with pytest.raises(ConfigError, match="report_to must be one of none, tensorboard, wandb"):
        check_report_to("mlflow")
    try:
        import wandb  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match=r"needs the wandb package.*pip install wandb"):
            TrainConfig(report_to="wandb")
    tracker = Tracker("none", tmp_path, "train", {})
    tracker.log({"a": 1.0}, 1)
    tracker.close()
    assert not tracker.active and not list(tmp_path.iterdir())


def test_scalars_are_flattened_and_step_stats_add_up():
    assert flatten({"a": 1, "b": {"c": 2.5, "d": None, "e": True, "f": math.nan}, "g": "x"}) == {
        "a": 1.0,
        "b/c": 2.5,
    }
    stats = StepStats()
    stats.add([1.0, -1.0], ["coi", "sob"])
    stats.add([3.0], ["coi"])
    assert stats.scalars() == {
        "reward_margin": 1.0,
        "reward_margin_std": pytest.approx(math.sqrt(8 / 3)),
        "accuracy_by_kind": {"coi": 1.0, "sob": 0.0},
    }
    assert StepStats().scalars() == {}


def test_rl_hands_report_to_to_trl_and_logs_its_curve(tmp_path):
    from orchrm.experiments.rl_world.evaluate import PolicyEval, curve_scalars
    from orchrm.rl.config import GRPOConfig, PolicyConfig
    from orchrm.rl.grpo import grpo_args

    policy = PolicyConfig(model="x", steps=4, report_to="tensorboard", progress=False)
    args = grpo_args(policy, GRPOConfig(), tmp_path)
    assert args.report_to == ["tensorboard"]
    assert grpo_args(PolicyConfig(model="x", steps=4), GRPOConfig(), tmp_path).report_to == []
    tracker = Tracker("tensorboard", tmp_path, "curve", {"method": "grpo"})
    for step, expected in ((0, 0.2), (2, 0.3), (4, 0.45)):
        point = PolicyEval(step, 10, 4, expected, (0, 1), 0.5, (0, 1), None, None, 0.9, 1, 30, 1)
        tracker.log(curve_scalars(point), step)
    tracker.close()
    (run,) = (tmp_path / "runs").iterdir()
    found = scalars(run)
    assert found["eval/expected_accuracy"] == [
        (0, pytest.approx(0.2)),
        (2, pytest.approx(0.3)),
        (4, pytest.approx(0.45)),
    ]
    assert "eval/majority_accuracy" not in found and "eval/valid" in found

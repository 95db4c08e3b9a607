"""Experiment tracking: a run's scalars to TensorBoard or Weights & Biases through
accelerate's trackers (`--report-to tensorboard|wandb|none` on `orchrm train` and
`orchrm rl`).

TensorBoard writes event files under OUT/runs/<UTC time> (offline, `tensorboard --logdir
OUT`); W&B logs to its project `orchrm` under OUT/wandb (set `WANDB_MODE=offline` where
there is no network, then `wandb sync`). What `orchrm train` logs, per optimizer step and
per validation pass, is in docs/train.md#tracking; `orchrm rl` hands `report_to` to TRL
(its rewards, KL, loss, learning rate, gradient norm) and logs its evaluation curve here.
"""

from __future__ import annotations

import importlib.util
import json
import math
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from orchrm.errors import ConfigError

REPORT_TO = ("none", "tensorboard", "wandb")
"""Where `--report-to` sends a run's scalars."""
_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb"}


def check_report_to(report_to: str) -> None:
    """Raise ConfigError when `report_to` is unknown or its package is not installed."""
    if report_to not in REPORT_TO:
        raise ConfigError(f"report_to must be one of {', '.join(REPORT_TO)}, got {report_to!r}")
    package = _PACKAGES.get(report_to)
    if package and importlib.util.find_spec(package) is None:
        raise ConfigError(
            f"--report-to {report_to} needs the {package} package, which is not installed: "
            f"pip install {package}, or --report-to none"
        )


def flatten(values: dict, prefix: str = "") -> dict[str, float]:
    """Nested dicts of numbers as `a/b` tags; booleans, None, NaN and text left out."""
    out: dict[str, float] = {}
    for key, value in values.items():
        tag = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{tag}/"))
        elif _finite(value):
            out[tag] = float(value)
    return out


def _finite(value: object) -> bool:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return number and math.isfinite(value)


class Tracker:
    """A run's tracker: `log(values, step)` sends scalars, `close()` ends the run. With
    `report_to` none, or on a process other than the main one, it does nothing."""

    def __init__(
        self, report_to: str, out: str | Path, name: str, config: dict, main: bool = True
    ) -> None:
        check_report_to(report_to)
        self.report_to, self.log_dir, self._tracker = report_to, None, None
        if report_to == "none" or not main:
            return
        out = Path(out)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        if report_to == "tensorboard":
            from accelerate.tracking import TensorBoardTracker

            tracker = TensorBoardTracker(f"{stamp}-{name}", out / "runs")
            tracker.start()
            self.log_dir = Path(tracker.logging_dir)
            text = json.dumps(config, indent=2, default=str)
            tracker.writer.add_text("config", f"```\n{text}\n```", global_step=0)
        else:
            from accelerate.tracking import WandBTracker

            (out / "wandb").mkdir(parents=True, exist_ok=True)
            tracker = WandBTracker("orchrm", name=f"{stamp}-{name}", dir=str(out))
            tracker.start()
            tracker.store_init_configuration(config)
            self.log_dir = out / "wandb"
        self._tracker = tracker

    @property
    def active(self) -> bool:
        return self._tracker is not None

    def log(self, values: dict, step: int) -> None:
        """The numbers of `values` (nested dicts as `a/b` tags) at `step`."""
        if self._tracker is not None:
            scalars = flatten(values)
            if scalars:
                self._tracker.log(scalars, step=step)

    def close(self) -> None:
        if self._tracker is not None:
            self._tracker.finish()
            self._tracker = None


@dataclass
class StepStats:
    """What one optimizer step's passes add up for tracking: reward margins
    (r_chosen - r_rejected) and pairs ranked right, overall and by pair kind."""

    margins: list[float] = field(default_factory=list)
    right_by_kind: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    pairs_by_kind: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, margins: list[float], kinds: list[str]) -> None:
        self.margins += margins
        for margin, kind in zip(margins, kinds, strict=True):
            kind = kind or "unknown"
            self.pairs_by_kind[kind] += 1
            self.right_by_kind[kind] += margin > 0

    def scalars(self) -> dict:
        """`reward_margin` (mean), `reward_margin_std` and `accuracy_by_kind`."""
        if not self.margins:
            return {}
        mean = sum(self.margins) / len(self.margins)
        spread = math.sqrt(sum((m - mean) ** 2 for m in self.margins) / len(self.margins))
        return {
            "reward_margin": mean,
            "reward_margin_std": spread,
            "accuracy_by_kind": {
                k: self.right_by_kind[k] / n for k, n in sorted(self.pairs_by_kind.items())
            },
        }


def step_values(
    loss: float,
    accuracy: float,
    norm: float | None,
    learning_rate: float,
    epoch: int,
    stats: StepStats,
    rate,
) -> dict:
    """What a training step logs: its loss, accuracy, the pairs' `stats`, learning rate,
    gradient norm and epoch under `train/`, and the throughput `rate` (a
    `orchrm.training.throughput.Throughput`) under `throughput/`."""
    return {
        "train": {
            "loss": loss,
            "accuracy": accuracy,
            **stats.scalars(),
            "learning_rate": learning_rate,
            "grad_norm": norm,
            "epoch": epoch,
        },
        "throughput": {"tokens_per_second": rate.tokens_per_second, "mfu": rate.mfu},
    }


def progress_text(recent: list[tuple[float, float]], best: float, rate) -> str:
    """The training progress bar's description: the mean loss and accuracy of `recent`
    steps, the best validation accuracy (`best` below 0: none yet), tokens/s and MFU."""
    loss = statistics.fmean(x for x, _ in recent)
    acc = statistics.fmean(a for _, a in recent)
    val = f" val {best:.3f}" if best >= 0 else ""
    mfu = f" MFU {rate.mfu:.1%}" if rate.mfu is not None else ""
    return (
        f"training reward model: loss {loss:.3f} acc {acc:.2f}{val} "
        f"{rate.tokens_per_second:,.0f} tok/s{mfu}"
    )

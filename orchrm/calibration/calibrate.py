"""`orchrm calibrate` in one call: fit a reward model's calibration
(`orchrm.calibration.methods`) on the executed `orchrm.run/1` records of tasks it did
not train on, and store the map in its `orchrm.json`, where `orchrm serve` (`p_correct`) and
`orchrm-adaptive` read it.

Which tasks: every executed record of the logs given, or, with a store, only those of the
tasks in one split of a mined pair dataset (`orchrm pairs mine` splits by task, so the
`validation` or `test` split of the dataset the model was trained on holds tasks it never
trained on). The records are always the logs' (`orchrm.run/1`, what `calibrate_model_dir`
scores); the store only names their tasks.

    orchrm calibrate --rm runs/rm logs/*.jsonl --tasks-from orchrm.duckdb --split validation
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from orchrm.calibration.methods import METHODS, CalibrationSummary
from orchrm.configs import config, setting
from orchrm.errors import ConfigError, InputError

HELD_OUT_SPLITS = ("validation", "test")
"""The splits of a pair dataset whose tasks a model trained on its `train` split never saw."""


@config
class CalibrateConfig:
    """Which model, which records, which map."""

    rm: str = ""
    """The reward model directory (`orchrm train`'s OUT or OUT/model); its orchrm.json
    gets the map, replacing one it holds."""
    logs: tuple[str, ...] = ()
    """orchrm.run/1 logs with executed records (`orchrm run`, `orchrm world generate`)."""
    method: Literal[METHODS] = setting("isotonic")
    """The map: isotonic (a monotone step function, for a few hundred candidates or more)
    or platt (a sigmoid of the score, two parameters, for fewer)."""
    orchestrator: str | None = None
    """Fit on this orchestrator's samples only (None: every orchestrator's)."""
    tasks_from: str | None = None
    """A store: fit only on the records of the tasks in --split of its pair dataset
    --dataset (None: every executed record of the logs)."""
    dataset: str = "default"
    """With --tasks-from: the pair dataset (as `orchrm pairs mine --dataset` named it)."""
    split: Literal[HELD_OUT_SPLITS] = setting("validation")
    """With --tasks-from: the split whose tasks to fit on."""


@config(frozen=True)
class CalibrateResult:
    """What `calibrate` fitted, on what, and where it is stored."""

    model: Path
    """The model directory whose orchrm.json holds the map."""
    summary: CalibrationSummary
    tasks: int
    """Tasks the fitted candidates belong to."""
    correct: int
    """Fitted candidates whose execution gave a right answer."""
    source: str
    """Where the records came from, in words."""

    def to_dict(self) -> dict:
        s = self.summary
        return {
            "model": str(self.model),
            "method": s.calibration.method,
            "candidates": s.candidates,
            "tasks": self.tasks,
            "correct": self.correct,
            "ece_raw": s.ece_raw,
            "ece": s.ece,
            "calibration": s.calibration.to_dict(),
            "source": self.source,
        }

    def to_text(self, width: int = 80) -> str:
        """The candidates, ECE raw and calibrated, and the map, in one table of at most
        `width` columns."""
        from orchrm.terminal import Column, render

        s = self.summary
        method = s.calibration.method
        share = self.correct / s.candidates if s.candidates else 0.0
        title = (
            f"calibrated {self.model} on {_count(s.candidates, 'executed candidate')} of "
            f"{_count(self.tasks, 'task')} ({self.correct:,} correct, {share:.1%}): "
            f"{self.source}"
        )
        columns = [
            Column("probability", ("sigmoid(raw score)", method)),
            Column("ECE", (f"{s.ece_raw:.3f}", f"{s.ece:.3f}"), right=True),
            Column("map", ("", describe(s.calibration)), rank=1),
        ]
        notes = (
            "ECE over 10 equal bins, on the candidates the map was fitted on.",
            f'map -> {self.model / "orchrm.json"} ("calibration"): orchrm serve\'s '
            "p_correct and orchrm-adaptive read it.",
        )
        return render(columns, width, title=title, notes=notes)


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def describe(calibration) -> str:
    """A calibration map in a few words."""
    if calibration.method == "platt":
        sign = "-" if calibration.b < 0 else "+"
        return f"sigmoid({calibration.a:.3g} x score {sign} {abs(calibration.b):.3g})"
    values = calibration.values
    return f"{len(values)} steps, P(correct) {min(values):.2f} to {max(values):.2f}"


def executed(record: object) -> bool:
    """Whether a log record counts for calibration: an `orchrm.run/1` record with a
    parsed orchestration that was executed (what `scored_outcomes` scores)."""
    return isinstance(record, dict) and bool(
        record.get("orchestration") and record.get("execution")
    )


def split_tasks(store_path: str | Path, dataset: str, split: str) -> set[str]:
    """The task ids of `split` in the pair dataset `dataset` of the store; raises an
    `OrchrmError` when the store, the dataset or its split has none."""
    from orchrm.store.db import Store, StoreError

    with Store(store_path, read_only=True) as store:
        splits = dict(
            store.db.execute(
                "SELECT split, count(DISTINCT task_id) FROM pairs WHERE dataset = ? GROUP BY split",
                [dataset],
            ).fetchall()
        )
        if not splits:
            raise StoreError(
                f"no pair dataset {dataset!r} in the store {store_path} (`orchrm pairs mine "
                "--dataset` makes one)"
            )
        if not splits.get(split):
            held = ", ".join(f"{k} {v}" for k, v in sorted(splits.items()))
            raise InputError(
                f"pair dataset {dataset!r} has no {split} tasks (tasks by split: {held}); mine "
                "it with a share for that split (`orchrm pairs mine --split`)"
            )
        rows = store.db.execute(
            "SELECT DISTINCT task_id FROM pairs WHERE dataset = ? AND split = ?", [dataset, split]
        ).fetchall()
    return {str(task_id) for (task_id,) in rows}


def chosen_records(config: CalibrateConfig) -> tuple[list[dict], str]:
    """The executed records of the logs that `config` picks, and where they are from in
    words; raises InputError saying what the logs hold when none is left."""
    from orchrm.jsonl import read_jsonl

    if not config.logs:
        raise ConfigError("give the orchrm.run/1 logs to calibrate on")
    read = [r for path in config.logs for _, r in read_jsonl(path)]
    records = [r for r in read if executed(r)]
    files = _count(len(config.logs), "log file")
    source = f"every executed record of {files}"
    if not records:
        raise InputError(
            f"no executed record in the {files} ({len(read)} records, none with a parsed "
            "orchestration and an execution): run the plans first (`orchrm run`)"
        )
    if config.orchestrator:
        mine = [r for r in records if r.get("orchestrator") == config.orchestrator]
        if not mine:
            there = sorted({str(r.get("orchestrator")) for r in records})
            raise InputError(
                f"no executed sample of orchestrator {config.orchestrator!r} in the {files}; "
                f"they hold {', '.join(there[:10])}"
            )
        records = mine
    if config.tasks_from:
        tasks = split_tasks(config.tasks_from, config.dataset, config.split)
        records = [r for r in records if str(r.get("task_id")) in tasks]
        source = (
            f"the {config.split} tasks of pair dataset {config.dataset!r} in "
            f"{config.tasks_from} ({len(tasks):,}), from {files}"
        )
        if not records:
            raise InputError(
                f"none of the {len(tasks)} {config.split} tasks of pair dataset "
                f"{config.dataset!r} has an executed record in the logs given: give the "
                "logs of those tasks"
            )
    return records, source


def calibrate(config: CalibrateConfig) -> CalibrateResult:
    """Fit and store the calibration `config` asks for (`calibrate_model_dir`)."""
    from orchrm.calibration.methods import calibrate_model_dir
    from orchrm.rmodel.files import model_directory

    if not config.rm:
        raise ConfigError("give the reward model to calibrate (--rm)")
    folder = model_directory(config.rm)  # before reading logs: a wrong path fails first
    records, source = chosen_records(config)
    if len(records) < 2:
        raise InputError(f"only {len(records)} executed record in {source}: calibration needs 2")
    summary = calibrate_model_dir(folder, records, config.method)
    tasks = len({str(r.get("task_id")) for r in records})
    correct = sum(bool(r.get("correct")) for r in records)
    return CalibrateResult(folder, summary, tasks, correct, source)

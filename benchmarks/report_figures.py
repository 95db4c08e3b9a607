"""The best-of-N report's figures in docs/img, from a small real evaluation on world logs:
accuracy vs N, accuracy vs verification tokens, the Pareto plot of accuracy vs total
tokens, and the reliability diagram of the calibrated P(correct).

    .venv/bin/python benchmarks/report_figures.py [--preset math] [--tasks 80] [--out docs/img]

No reward model is trained: `orchrm` is the stand-in world scorer
(`orchrm.scoring.world.WorldScorer`), which scores a plan by the log-odds of its true success
probability plus normal noise of sd `--noise`. The first half of the tasks fits a Platt
calibration of its scores (stored in the scorer's metadata, where a trained model's
`orchrm.json` keeps it); the specialized orchestrator's 8 samples of the other half are
evaluated with the full line-up (the world plays the judges and re-executes every plan
`--reruns` times for the votes' expected accuracy). The whole report (report.md,
report.json, every PNG) goes to `--report` (a temporary folder by default); the four PNGs
are copied to `--out` as `bestofn_<plot>.png`.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Literal

from orchrm.calibration.methods import METADATA_KEY, fit_calibration, scored_outcomes
from orchrm.cli.script import run_script
from orchrm.configs import config, setting
from orchrm.evaluation.lineup import build_lineup, evaluate_tasks
from orchrm.evaluation.loading import tasks_from_logs
from orchrm.evaluation.report import terminal_table, write_report
from orchrm.jsonl import write_jsonl
from orchrm.scoring.world import WorldScorer
from orchrm.world.generate import generate
from orchrm.world.tasks import PRESETS

PLOTS = ("accuracy_vs_n", "accuracy_vs_tokens", "pareto", "reliability")
PRESET_NAMES = tuple(sorted(PRESETS))


@config(frozen=True)
class FigureSettings:
    """The figures' options."""

    preset: Literal[PRESET_NAMES] = "math"
    """World preset of the tasks."""
    tasks: int = setting(80, min=2)
    """World tasks (half held out)."""
    noise: float = setting(1.0, min=0.0)
    """Score noise (log-odds)."""
    reruns: int = setting(10, min=0)
    """Re-executions for votes."""
    seed: int = 21
    """World seed of the tasks."""
    out: str = "docs/img"
    """Where the PNGs go."""
    report: str | None = None
    """Keep the whole report here (default: a temporary folder)."""


def main(args: FigureSettings) -> None:
    """Evaluate, write the report and copy its PNGs."""
    # the world's logs, and a calibration fitted on the first half of the tasks
    generated = generate(args.preset, args.tasks, 8, seed=args.seed, progress=False)
    scorer = WorldScorer(generated.tasks, args.noise)
    fit_ids = {t.id for t in generated.tasks[: args.tasks // 2]}
    fit = [r for r in generated.records if r["task_id"] in fit_ids]
    held = [r for r in generated.records if r["task_id"] not in fit_ids]
    scorer.metadata[METADATA_KEY] = fit_calibration(*scored_outcomes(scorer, fit)).to_dict()

    # the held-out half, best-of-8 with the full line-up
    with tempfile.TemporaryDirectory() as folder:
        write_jsonl(held, Path(folder) / "held.jsonl")
        tasks = tasks_from_logs([str(Path(folder) / "held.jsonl")], "specialized", 8)
        lineup = build_lineup(tasks, rm=scorer, world_tasks=generated.tasks, reruns=args.reruns)
        ev = evaluate_tasks(lineup.tasks, lineup.selectors, 8, args.preset, progress=False)
        report = Path(args.report or folder)
        write_report([ev], report)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for plot in PLOTS:
            source = report / f"{args.preset}_{plot}.png"
            shutil.copyfile(source, out / f"bestofn_{plot}.png")
            print(f"{out / f'bestofn_{plot}.png'}: {source.stat().st_size / 1024:.0f} KB")
    print(terminal_table(ev, 80))


if __name__ == "__main__":
    run_script(FigureSettings, main, doc=__doc__)

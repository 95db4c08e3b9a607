"""Improve a plan with the reward model before anything runs: `orchrm-search` (a search
over edits of the 8 sampled plans) against choosing among them, on the world's held-out
tasks, and where the search starts to fool itself (reward over-optimization).

    .venv/bin/python benchmarks/plan_search.py --quick
    .venv/bin/python benchmarks/plan_search.py [--tasks 200] [--img docs/img]
    .venv/bin/orchrm demo --out runs/beyond --presets math,search,multihop --test-tasks 200
    .venv/bin/python benchmarks/plan_search.py --demo runs/beyond --members 3 [--img docs/img]

Per preset (math, search, multihop), best-of-8 over the specialized orchestrator's
samples, the study of `orchrm.evaluation.search_study`: the table of `orchrm-search` (at
`--budget` edits scored, `--max-edits`, `--cost-weight`; with the ensemble's mean and its
conservative mean minus `--spread-weight` spreads; at `--cost-weights`) against argmax,
the top-3 vote, majority and bayes-of-8 with paired 95% intervals, then the
over-optimization curves: the RM score and true success probability of the returned
plan over `--budgets`, `--leashes` and `--penalties`. One PNG per preset
(OUT/plan_search_PRESET.png, OUT/plan_search_PRESET_trained.png with `--demo`, copied to
`--img`), and OUT/plan_search.json.

Reward models: without `--demo`, the world's stand-in (true log-odds plus seeded noise of
sd `--noise`; `--members` stand-ins of other seeds make the ensemble) on `--tasks` tasks
generated here, scored in float64. With `--demo`, the models an `orchrm demo` trained
(DEMO/rm/PRESET/model, loaded in `--dtype`) on its held-out tasks, and `--members` - 1
more trained here as the demo trained it (DEMO/config.yaml) on its pairs with training
seeds 1, 2, ... into OUT/ensemble; candidates per task are the demo's `samples`.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path
from typing import Literal

from orchrm.cli.console import csv_values
from orchrm.cli.script import run_script
from orchrm.configs import config, config_dict, load_config, setting, with_values
from orchrm.errors import ConfigError, MissingInput
from orchrm.evaluation.search_study import (
    SearchStudy,
    curves,
    curves_text,
    plot,
    stand_in_preset,
    table,
    trained_preset,
)
from orchrm.rmodel.precision import DTYPES
from orchrm.world.tasks import PRESETS

STUDY = SearchStudy()
"""The study's defaults: the search in the table, the curves' axes and the evaluation."""
QUICK = {"tasks": 16, "reruns": 3, "budget": 16, "budgets": (1, 2, 4, 8, 16, 32)}
QUICK |= {"leashes": (1, 2, 3), "penalties": (0.0, 0.25), "members": 2, "bootstrap": 200}


@config(frozen=True)
class PlanSearchSettings:
    """The study's options; those of the search and the evaluation default to
    `SearchStudy`'s."""

    presets: tuple[Literal[tuple(PRESETS)], ...] = ("math", "search", "multihop")
    """World presets, comma-separated."""
    tasks: int = setting(200, min=1)
    """Held-out tasks per preset (stand-in reward models)."""
    demo: str | None = None
    """An `orchrm demo` folder: its trained reward models and held-out tasks instead of
    stand-ins."""
    dtype: Literal[DTYPES] = "fp32"
    """Precision of trained models."""
    noise: float = setting(1.0, min=0.0)
    """Stand-in noise (sd, log-odds)."""
    members: int = setting(3, min=1)
    """Reward models in the ensemble."""
    spread_weight: float = setting(STUDY.spread_weight, min=0.0)
    """Conservative: mean - this x spread."""
    budget: int = setting(STUDY.budget, min=0)
    """Edits scored in the table."""
    max_edits: int = setting(STUDY.max_edits, min=0)
    """The leash in the table."""
    cost_weight: float = setting(STUDY.cost_weight, min=0.0)
    """The search's objective takes this times log2(1 + predicted cost) off a plan's
    score, in the table."""
    cost_weights: tuple[float, ...] = STUDY.cost_weights
    """More cost weights to tabulate, comma-separated."""
    budgets: tuple[int, ...] = STUDY.budgets
    """The budget curve's budgets, comma-separated."""
    leashes: tuple[int, ...] = STUDY.leashes
    """The leash curve's edits at most, comma-separated."""
    penalties: tuple[float, ...] = STUDY.penalties
    """Distance penalties per edit, comma-separated."""
    reruns: int = setting(STUDY.reruns, min=0)
    """Re-executions for the votes."""
    bootstrap: int = setting(STUDY.bootstrap, min=1)
    """Bootstrap resamples of the paired intervals."""
    seed: int = STUDY.seed
    """Seed of the world tasks and the evaluation."""
    out: str = "runs/plan_search"
    """Folder of the figures and plan_search.json."""
    img: str | None = None
    """Copy each PNG here."""
    quick: bool = False
    """A small run: fewer tasks, members, re-executions and resamples, shorter curves
    (the script's QUICK, over those options)."""

    def __post_init__(self) -> None:
        if not self.presets:
            raise ConfigError("--presets names no preset")
        for name in ("budgets", "leashes", "penalties"):
            if not getattr(self, name):
                raise ConfigError(f"--{name} holds no value")


LISTS = ("presets", "cost_weights", "budgets", "leashes", "penalties")
"""The options given as one comma-separated text."""


def _preset(name: str, args: PlanSearchSettings):
    if not args.demo:
        return stand_in_preset(name, args.tasks, args.noise, args.members, args.seed)
    from orchrm.cli import quiet_third_party
    from orchrm.experiments.demo.config import DemoConfig

    quiet_third_party()  # transformers' load reports would bury the tables
    made = Path(args.demo) / "config.yaml"
    demo = load_config(DemoConfig, made) if made.is_file() else DemoConfig()
    return trained_preset(
        name,
        Path(args.demo),
        samples=demo.samples,
        steps=demo.multihop_steps if name == "multihop" else demo.steps,
        max_length=demo.max_length,
        lr=demo.lr,
        members=args.members,
        dtype=args.dtype,
        out=Path(args.out),
    )


def main(args: PlanSearchSettings) -> None:
    """Run the study on each preset; print and write its tables and curves."""
    if args.demo and not Path(args.demo).is_dir():
        raise MissingInput(f"--demo {args.demo}: no such folder (run `orchrm demo` first)")
    if args.quick:
        args = with_values(args, QUICK)
    study = SearchStudy(**{f.name: getattr(args, f.name) for f in dataclasses.fields(SearchStudy)})
    out, img = Path(args.out), args.img and Path(args.img)
    out.mkdir(parents=True, exist_ok=True)
    report = {"settings": config_dict(args), "presets": {}}
    for name in args.presets:
        started = time.perf_counter()
        preset = _preset(name, args)
        rows, text = table(preset, study)
        print(text)
        found = curves(preset, study)
        print(curves_text(name, found, study))
        kind = "_trained" if args.demo else ""  # never over a stand-in run's figure
        png = plot(name, found, preset.precision, out / f"plan_search_{name}{kind}.png")
        if img:
            img.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(png, img / png.name)
            print(f"\n![{name}: search over edits]({img / png.name})")
        seconds = time.perf_counter() - started
        print(f"\n{name}: {seconds:.0f} s; figure {png}")
        report["presets"][name] = {
            "precision": preset.precision,
            "table": rows,
            "curves": found,
            "seconds": seconds,
        }
    (out / "plan_search.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    listed = {"parser": csv_values, "spell": lambda v: ",".join(map(str, v))}
    run_script(PlanSearchSettings, main, doc=__doc__, settings=dict.fromkeys(LISTS, listed))

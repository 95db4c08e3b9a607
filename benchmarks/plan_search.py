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

import argparse
import json
import shutil
import time
from pathlib import Path

from orchrm.evaluation.search_study import (
    SearchStudy,
    curves,
    curves_text,
    plot,
    stand_in_preset,
    table,
    trained_preset,
)

QUICK = {"tasks": 16, "reruns": 3, "budget": 16, "budgets": "1,2,4,8,16,32", "leashes": "1,2,3"}
QUICK |= {"penalties": "0,0.25", "members": 2, "bootstrap": 200}


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default="math,search,multihop")
    parser.add_argument("--tasks", type=int, default=200, help="Held-out tasks per preset.")
    parser.add_argument("--demo", type=Path, default=None, help="An `orchrm demo` folder.")
    parser.add_argument("--dtype", default="fp32", help="Precision of trained models.")
    parser.add_argument("--noise", type=float, default=1.0, help="Stand-in noise (log-odds).")
    parser.add_argument("--members", type=int, default=3, help="Reward models in the ensemble.")
    parser.add_argument(
        "--spread-weight", type=float, default=1.0, help="Conservative: mean - this x spread."
    )
    parser.add_argument("--budget", type=int, default=32, help="Edits scored in the table.")
    parser.add_argument("--max-edits", type=int, default=2, help="The leash in the table.")
    parser.add_argument("--cost-weight", type=float, default=0.1)
    parser.add_argument("--cost-weights", default="0,0.25", help="More cost weights to tabulate.")
    parser.add_argument("--budgets", default="1,2,4,8,16,32,64,128,256")
    parser.add_argument("--leashes", default="1,2,3,4,6")
    parser.add_argument("--penalties", default="0,0.1,0.25,0.5")
    parser.add_argument("--reruns", type=int, default=20, help="Re-executions for the votes.")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--out", type=Path, default=Path("runs/plan_search"))
    parser.add_argument("--img", type=Path, default=None, help="Copy each PNG here.")
    parser.add_argument("--quick", action="store_true", help="A small run: " + str(QUICK))
    args = parser.parse_args()
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    return args


def _numbers(text: str, kind=float) -> tuple:
    return tuple(kind(x) for x in text.split(",") if x)


def _preset(name: str, args):
    if not args.demo:
        return stand_in_preset(name, args.tasks, args.noise, args.members, args.seed)
    from orchrm.cli import quiet_third_party
    from orchrm.configs import load_config
    from orchrm.experiments.demo.config import DemoConfig

    quiet_third_party()  # transformers' load reports would bury the tables
    made = args.demo / "config.yaml"
    config = load_config(DemoConfig, made) if made.is_file() else DemoConfig()
    return trained_preset(
        name,
        args.demo,
        samples=config.samples,
        steps=config.multihop_steps if name == "multihop" else config.steps,
        max_length=config.max_length,
        lr=config.lr,
        members=args.members,
        dtype=args.dtype,
        out=args.out,
    )


def main() -> None:
    args = _arguments()
    study = SearchStudy(
        budget=args.budget,
        max_edits=args.max_edits,
        cost_weight=args.cost_weight,
        cost_weights=_numbers(args.cost_weights),
        spread_weight=args.spread_weight,
        budgets=_numbers(args.budgets, int),
        leashes=_numbers(args.leashes, int),
        penalties=_numbers(args.penalties),
        reruns=args.reruns,
        bootstrap=args.bootstrap,
        seed=args.seed,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"settings": {k: str(v) for k, v in vars(args).items()}, "presets": {}}
    for name in [p for p in args.presets.split(",") if p]:
        started = time.perf_counter()
        preset = _preset(name, args)
        rows, text = table(preset, study)
        print(text)
        found = curves(preset, study)
        print(curves_text(name, found, study))
        kind = "_trained" if args.demo else ""  # never over a stand-in run's figure
        png = plot(name, found, preset.precision, args.out / f"plan_search_{name}{kind}.png")
        if args.img:
            args.img.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(png, args.img / png.name)
            print(f"\n![{name}: search over edits]({args.img / png.name})")
        seconds = time.perf_counter() - started
        print(f"\n{name}: {seconds:.0f} s; figure {png}")
        report["presets"][name] = {
            "precision": preset.precision,
            "table": rows,
            "curves": found,
            "seconds": seconds,
        }
    (args.out / "plan_search.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

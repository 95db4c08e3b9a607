"""Does the demo's reward model get better with more data and more training? World math.

    .venv/bin/python benchmarks/rm_scaling.py [--train-tasks 600] [--steps 60,600]
        [--seed 10] [--test-tasks 200] [--follow 0.75] [--lr 1e-4] [--out runs/rm-scaling]

The demo's pipeline (world logs, store, mined pairs cut to the model's budget, MiniLM
trained in batches of 16 at 128 tokens and the demo's learning rate), with the number of
training tasks and steps set here. Each step count trains its own model from the
backbone (with warm-up and decay over its own steps). Held-out tasks come from the next
world seed; best-of-8 over the specialized orchestrator's candidates. Printed per model:
validation pairwise accuracy, expected accuracy of Orch-RM's pick, its gain over majority
task by task (with the paired 95% bootstrap interval of the report), and whether it reads
the question's hint (`orchrm.experiments.world_studies.features_bt.cue_gap`); beside
it, the same two figures for `features-BT`
(`orchrm.experiments.world_studies.features_bt.fit_features`) fit on a random sample of
as many training pairs as the model saw: what a reader that already has the right
features learns from that much data. And once: majority vote's expected accuracy (20
re-executions per candidate, as the demo measures it), random and bayes.
The world logs and pairs in OUT are reused while their settings stay the same.

The default seed (10) is not the demo's (0), so settings tuned here are not tuned on
the demo's held-out tasks.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from orchrm.experiments.demo.config import DemoConfig
from orchrm.experiments.world_models import Cut
from orchrm.experiments.world_studies.measure import SAMPLES, references, scaling_row, world_pairs

MAX_LENGTH = 128


def _arguments() -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train-tasks", type=int, default=600)
    parser.add_argument("--test-tasks", type=int, default=200)
    parser.add_argument("--steps", default="60,600", help="comma-separated step counts")
    parser.add_argument("--seed", type=int, default=10, help="world seed of the training tasks")
    parser.add_argument("--preset", default="math")
    parser.add_argument(
        "--follow",
        type=float,
        default=None,
        help="how often the specialized orchestrator acts on the question's hint (the "
        "world's default: 0.75); see world_headroom.py",
    )
    parser.add_argument(
        "--lr", type=float, default=DemoConfig.lr, help="learning rate (default: the demo's)"
    )
    parser.add_argument("--out", default="runs/rm-scaling")
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    steps = [int(s) for s in args.steps.split(",")]
    out = Path(args.out)
    cut = Cut(MAX_LENGTH, "")  # the default MiniLM's budget at MAX_LENGTH tokens
    world = world_pairs(
        args.preset,
        args.train_tasks,
        args.test_tasks,
        args.seed,
        out,
        cut,
        (0.85, 0.15, 0.0),
        None if args.follow is None else {"follow": args.follow},
    )
    tasks, mined = world.test, world.mined
    baselines = references(tasks)
    print(
        f"{args.preset}: {args.train_tasks} training tasks (world seed {args.seed}), "
        f"{mined.kept} pairs {mined.by_split}; {len(tasks)} held-out tasks x {SAMPLES}"
    )
    print(
        "expected accuracy %: "
        + ", ".join(f"{k} {100 * baselines[k].expected_accuracy:.1f}" for k in baselines)
    )
    print(
        "\n| steps | pairs seen | train s | validation pairwise acc | orchrm expected acc % "
        "| - majority (paired 95% CI) | reads the cue "
        "| features-BT on as many pairs: expected acc % | reads the cue |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in steps:
        r = scaling_row(world, n, out, MAX_LENGTH, args.lr, cut)
        print(
            f"| {n} | {r.pairs_seen} | {r.seconds:.0f} | {r.validation_accuracy:.3f} | "
            f"{100 * r.expected:.1f} | {r.versus_majority} | {r.cue_gap:+.2f} | "
            f"{100 * r.features_expected:.1f} | {r.features_cue_gap:+.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()

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

from pathlib import Path
from typing import Literal

from orchrm.cli.console import csv_values
from orchrm.cli.script import run_script
from orchrm.configs import config, setting
from orchrm.errors import ConfigError
from orchrm.experiments.demo.config import DemoConfig
from orchrm.experiments.world_models import Cut
from orchrm.experiments.world_studies.measure import SAMPLES, references, scaling_row, world_pairs
from orchrm.world.tasks import PRESETS

MAX_LENGTH = 128


DEMO = DemoConfig()
"""The demo's settings, the defaults of what this study does not vary."""


@config(frozen=True)
class ScalingSettings:
    """The study's options."""

    train_tasks: int = setting(600, min=1)
    """World tasks of the training pairs."""
    test_tasks: int = setting(DEMO.test_tasks, min=1)
    """Held-out world tasks (world seed + 1; default: the demo's)."""
    steps: tuple[int, ...] = (60, 600)
    """Step counts, comma-separated: one model each."""
    seed: int = 10
    """World seed of the training tasks."""
    preset: Literal[tuple(PRESETS)] = "math"
    """The world preset."""
    follow: float | None = setting(None, min=0.0, max=1.0)
    """How often the specialized orchestrator acts on the question's hint (the world's
    default: 0.75); see world_headroom.py."""
    lr: float = setting(DEMO.lr, min=0.0)
    """Learning rate (default: the demo's)."""
    out: str = "runs/rm-scaling"
    """The folder of the world data and the models (reused while their settings stay the
    same)."""

    def __post_init__(self) -> None:
        if not self.steps or min(self.steps) < 1:
            raise ConfigError(f"--steps takes step counts of 1 or more, got {self.steps}")


def main(args: ScalingSettings) -> None:
    """Train a model per step count and print each beside features-BT."""
    steps = list(args.steps)
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
    steps = {"parser": csv_values, "spell": lambda v: ",".join(map(str, v))}
    run_script(ScalingSettings, main, doc=__doc__, settings={"steps": steps})

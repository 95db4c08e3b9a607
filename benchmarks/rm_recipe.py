"""How steady is the demo's reward-model recipe? Validation accuracy and best-of-8 over
training seeds and batch orders.

    .venv/bin/python benchmarks/rm_recipe.py [--demo orchrm-demo] [--seeds 0,1,2]
        [--sort 1,64] [--task-batches 0,1] [--passes 4] [--clip 1.0] [--steps 180]
        [--lr 1e-4] [--threads 2]

Trains the demo's math model (MiniLM, 128 tokens, batch 16, the demo's learning rate and
steps) on the pairs a finished `orchrm demo` exported (DEMO/pairs/math), once per seed
and setting, and prints each run's validation pairwise accuracy, the spread of its
rewards (a run that stalls learns small rewards), its training speed, and its argmax
pick minus majority vote on the demo's held-out math tasks (expected accuracy, points,
paired 95% interval). The settings:

- `--sort`: batches whose pairs are sorted by length together
  (`TrainConfig.sort_batches`; 1: random batches, the default).
- `--task-batches`: 1: batches filled with pairs of one task that share plans
  (`TrainConfig.task_batches`; not with `--sort` above 1, such runs are skipped).
- `--passes`: forward passes per batch (`TrainConfig.forward_passes`).
- `--clip`: the gradient-norm clip (`TrainConfig.max_grad_norm`; 0: none).

The seed sets the batch order and the score head's initialization; the pairs and the
held-out tasks are the same in every run.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from orchrm.cli import quiet_third_party
from orchrm.cli.console import csv_values
from orchrm.cli.script import run_script
from orchrm.configs import config, setting
from orchrm.errors import ConfigError
from orchrm.experiments.demo.config import DemoConfig
from orchrm.experiments.world_studies.measure import demo_pairs, recipe_run
from orchrm.training.config import TrainConfig

DEMO, TRAIN = DemoConfig(), TrainConfig()
"""The demo's settings and the training's defaults, those of the recipe."""
LISTS = ("seeds", "sort", "task_batches", "passes", "clip")
"""The options given as one comma-separated text."""


@config(frozen=True)
class RecipeSettings:
    """The runs' options: every combination of the comma-separated ones is one run."""

    demo: str = DEMO.out
    """A finished `orchrm demo`'s folder."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """Training seeds, comma-separated."""
    sort: tuple[int, ...] = (1, 64)
    """Batches sorted by length together (`TrainConfig.sort_batches`; 1: random batches),
    comma-separated."""
    task_batches: tuple[int, ...] = (0,)
    """Batches filled by task (`TrainConfig.task_batches`): 0 off, 1 on, comma-separated."""
    passes: tuple[int, ...] = (TRAIN.forward_passes,)
    """Forward passes per batch (`TrainConfig.forward_passes`), comma-separated."""
    clip: tuple[float, ...] = (TRAIN.max_grad_norm,)
    """Gradient-norm clips (`TrainConfig.max_grad_norm`; 0: none), comma-separated."""
    steps: int = setting(DEMO.steps, min=1)
    """Training steps of each run (default: the demo's)."""
    lr: float = setting(DEMO.lr, min=0.0)
    """Learning rate (default: the demo's)."""
    threads: int | None = setting(None, min=1)
    """PyTorch threads per run."""

    def __post_init__(self) -> None:
        for name in LISTS:
            if not getattr(self, name):
                raise ConfigError(f"--{name} holds no value")
        for name, least in (("sort", 1), ("passes", 1), ("clip", 0)):
            if min(getattr(self, name)) < least:
                raise ConfigError(f"--{name} takes values of {least} or more")
        if not set(self.task_batches) <= {0, 1}:
            raise ConfigError("--task-batches takes 0 (off) and 1 (on)")


def main(args: RecipeSettings) -> None:
    """Train the demo's math model once per combination and print each run's row."""
    demo = Path(args.demo)
    demo_pairs(demo)  # a MissingInput when the demo has not run
    quiet_third_party()  # transformers' load reports would bury the table
    print(
        "| sorted together | task batches | passes | clip | seed | validation accuracy | "
        "reward std | pairs/s | argmax minus majority |"
    )
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    grid = itertools.product(args.sort, args.task_batches, args.passes, args.clip, args.seeds)
    for sort, tasks, npass, clip, seed in grid:
        if tasks and sort > 1:
            continue  # batches are filled by task or sorted by length, not both
        run = TrainConfig(
            max_length=DEMO.max_length,
            lr=args.lr,
            max_steps=args.steps,
            eval_every=args.steps,
            max_grad_norm=clip,
            sort_batches=sort,
            task_batches=bool(tasks),
            forward_passes=npass,
            seed=seed,
            num_threads=args.threads,
        )
        summary, gain = recipe_run(demo, run, DEMO.samples, DEMO.reruns)
        last = summary.history[-1]
        print(
            f"| {sort} | {'on' if tasks else 'off'} | {npass} | {clip:g} | {seed} | "
            f"{summary.best_validation_accuracy:.3f} | "
            f"{last['reward_std']:.2f} | {summary.pairs_per_second:.1f} | {gain} |",
            flush=True,
        )


if __name__ == "__main__":
    listed = {"parser": csv_values, "spell": lambda v: ",".join(map(str, v))}
    run_script(RecipeSettings, main, doc=__doc__, settings=dict.fromkeys(LISTS, listed))

"""Denoised pairs against single-run pairs at the same execution budget, on the world.

    .venv/bin/python benchmarks/denoised_pairs.py [--preset math] [--budget 8]
        [--runs 1,2,4] [--train-tasks 200] [--test-tasks 200] [--seeds 30]
        [--min-gap 0.25] [--steps 0] [--max-length 256] [--dtype fp32]
        [--out runs/denoised-pairs]

Runs `orchrm.experiments.world_studies.denoised.compare` once per world seed: each training
task gets BUDGET executions, spent on BUDGET / k plans executed k times each, for each k
of RUNS (k = 1: single-run correct-over-incorrect pairs; k > 1: pairs mined on success
rates over k runs, `orchrm pairs mine --denoise --min-runs k`). Prints, per seed and k,
the pairs mined, the share whose chosen plan truly has the higher success probability,
and what they teach on held-out tasks (world seed + 1, best-of-8): features-BT fit with
hard and with soft labels and, with `--steps N`, MiniLM trained N steps of 16 pairs
(soft labels for k > 1), each by its pairwise accuracy against the true probabilities
and the true success probability of its pick.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path
from typing import Literal

from orchrm.cli import quiet_third_party
from orchrm.cli.console import csv_values
from orchrm.cli.script import run_script
from orchrm.configs import config, setting
from orchrm.errors import ConfigError
from orchrm.experiments.world_studies.denoised import MINILM_256, compare
from orchrm.rmodel.precision import DTYPES
from orchrm.world.tasks import PRESETS

LISTS = ("runs", "seeds")
"""The options given as one comma-separated text."""


@config(frozen=True)
class DenoisedSettings:
    """The comparison's options."""

    preset: Literal[tuple(PRESETS)] = "math"
    """The world preset."""
    budget: int = setting(8, min=1)
    """Executions per training task, whatever k."""
    runs: tuple[int, ...] = (1, 2, 4)
    """Executions per plan, comma-separated; each must divide the budget."""
    train_tasks: int = setting(200, min=1)
    """Training tasks (world seed)."""
    test_tasks: int = setting(200, min=1)
    """Held-out tasks (world seed + 1)."""
    seeds: tuple[int, ...] = (30,)
    """World seeds of the training tasks, comma-separated: one comparison each."""
    min_gap: float = setting(0.25, min=0.0, max=1.0)
    """Least success-rate difference of a denoised pair (`--min-gap`)."""
    steps: int = setting(0, min=0)
    """MiniLM training steps per arm; 0: no MiniLM."""
    max_length: int = setting(MINILM_256.max_length, min=2)
    """MiniLM's tokens per text (the export cuts to them with its tokenizer)."""
    dtype: Literal[DTYPES] = "fp32"
    """MiniLM's training and scoring precision."""
    out: str = "runs/denoised-pairs"
    """Where the logs, stores, pairs and models go (a folder per seed and k)."""

    def __post_init__(self) -> None:
        for name in LISTS:
            if not getattr(self, name):
                raise ConfigError(f"--{name} holds no value")
        if any(k < 1 or self.budget % k for k in self.runs):
            raise ConfigError(f"each of --runs must divide --budget {self.budget}: {self.runs}")


def main(args: DenoisedSettings) -> None:
    """Compare the arms once per seed and print one row per seed and k."""
    quiet_third_party()
    print(
        f"{args.preset}: {args.train_tasks} training tasks, {args.budget} executions each; "
        f"{args.test_tasks} held-out tasks, best-of-8"
    )
    print(
        "| seed | k x plans | pairs | tasks | label acc | true gap | weight | BT hard acc / p "
        "| BT soft acc / p | MiniLM acc / p | MiniLM s |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    by_k: dict[int, list] = {k: [] for k in args.runs}
    for seed in args.seeds:
        result = compare(
            args.preset,
            train_tasks=args.train_tasks,
            test_tasks=args.test_tasks,
            budget=args.budget,
            runs=args.runs,
            seed=seed,
            min_gap=args.min_gap,
            out=Path(args.out) / f"seed-{seed}",
            steps=args.steps,
            cut=replace(MINILM_256, max_length=args.max_length),
            dtype=args.dtype,
        )
        for a in result.arms:
            by_k[a.runs].append(a)
            print(_row(str(seed), [a]), flush=True)
        print(
            f"seed {seed}, held-out best-of-8 true p: random {result.random_p:.3f}, "
            f"knowing the truth {result.bayes_p:.3f}"
        )
    if len(args.seeds) > 1:
        for arms in by_k.values():
            print(_row("mean", arms))


def _row(label: str, arms: list) -> str:
    """One table row: an arm's figures, or their means over seeds."""

    def mean(get) -> float:
        return statistics.fmean(get(a) for a in arms)

    def held_out(get) -> str:
        if any(get(a) is None for a in arms):
            return "-"
        return f"{mean(lambda a: get(a).pairwise):.3f} / {mean(lambda a: get(a).best_of_n):.3f}"

    a = arms[0]
    return (
        f"| {label} | {a.runs} x {a.plans} | {mean(lambda a: a.pairs):.0f} | "
        f"{mean(lambda a: a.tasks):.0f} | {mean(lambda a: a.label_accuracy):.3f} | "
        f"{mean(lambda a: a.true_gap):.3f} | {mean(lambda a: a.mean_weight):.3f} | "
        f"{held_out(lambda a: a.bt_hard)} | {held_out(lambda a: a.bt_soft)} | "
        f"{held_out(lambda a: a.rm)} | {mean(lambda a: a.rm_seconds):.0f} |"
    )


if __name__ == "__main__":
    listed = {"parser": csv_values, "spell": lambda v: ",".join(map(str, v))}
    run_script(DenoisedSettings, main, doc=__doc__, settings=dict.fromkeys(LISTS, listed))

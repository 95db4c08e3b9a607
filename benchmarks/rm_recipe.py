"""How steady is the demo's reward-model recipe? Validation accuracy and best-of-8 over
training seeds and batch orders.

    .venv/bin/python benchmarks/rm_recipe.py [--demo orchrm-demo] [--seeds 0,1,2]
        [--sort 1,64] [--passes 4] [--clip 1.0] [--steps 180] [--lr 1e-4] [--threads 2]

Trains the demo's math model (MiniLM, 128 tokens, batch 16, the demo's learning rate and
steps) on the pairs a finished `orchrm demo` exported (DEMO/pairs/math), once per seed
and setting, and prints each run's validation pairwise accuracy, the spread of its
rewards (a run that stalls learns small rewards), its training speed, and its argmax
pick minus majority vote on the demo's held-out math tasks (expected accuracy, points,
paired 95% interval). The settings:

- `--sort`: batches whose pairs are sorted by length together
  (`TrainConfig.sort_batches`; 1: random batches, the default).
- `--passes`: forward passes per batch (`TrainConfig.forward_passes`).
- `--clip`: the gradient-norm clip (`TrainConfig.max_grad_norm`; 0: none).

The seed sets the batch order and the score head's initialization; the pairs and the
held-out tasks are the same in every run.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

from orchrm.cli import quiet_third_party
from orchrm.errors import MissingInput
from orchrm.experiments.demo.config import DemoConfig
from orchrm.experiments.world_studies.measure import demo_pairs, recipe_run
from orchrm.training.config import TrainConfig


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--demo", type=Path, default=Path("orchrm-demo"))
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated training seeds")
    parser.add_argument("--sort", default="1,64", help="comma-separated sort_batches values")
    parser.add_argument("--passes", default="4", help="comma-separated forward_passes values")
    parser.add_argument("--clip", default="1.0", help="comma-separated max gradient norms")
    parser.add_argument("--steps", type=int, default=DemoConfig.steps)
    parser.add_argument("--lr", type=float, default=DemoConfig.lr)
    parser.add_argument("--threads", type=int, default=None, help="PyTorch threads per run")
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    quiet_third_party()  # transformers' load reports would bury the table
    try:
        demo_pairs(args.demo)
    except MissingInput as e:
        raise SystemExit(str(e)) from None
    print(
        "| sorted together | passes | clip | seed | validation accuracy | reward std | "
        "pairs/s | argmax minus majority |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    sorts = [int(s) for s in args.sort.split(",")]
    passes = [int(p) for p in args.passes.split(",")]
    clips = [float(c) for c in args.clip.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    for sort, npass, clip, seed in itertools.product(sorts, passes, clips, seeds):
        run = TrainConfig(
            max_length=DemoConfig.max_length,
            lr=args.lr,
            max_steps=args.steps,
            eval_every=args.steps,
            max_grad_norm=clip,
            sort_batches=sort,
            forward_passes=npass,
            seed=seed,
            num_threads=args.threads,
        )
        summary, gain = recipe_run(args.demo, run, DemoConfig.samples, DemoConfig.reruns)
        last = summary.history[-1]
        print(
            f"| {sort} | {npass} | {clip:g} | {seed} | {summary.best_validation_accuracy:.3f} | "
            f"{last['reward_std']:.2f} | {summary.pairs_per_second:.1f} | {gain} |",
            flush=True,
        )


if __name__ == "__main__":
    main()

"""How steady is the demo's reward-model recipe? Validation accuracy over training seeds.

    .venv/bin/python benchmarks/rm_recipe.py [--demo orchrm-demo] [--seeds 0,1,2]
        [--group both,longer] [--clip 1.0,0] [--steps 180] [--threads 2]

Trains the demo's math model (MiniLM, 128 tokens, batch 16, the demo's learning rate and
steps) on the pairs a finished `orchrm demo` exported (DEMO/pairs/math), once per seed
and setting, and prints each run's validation pairwise accuracy and the spread of its
rewards (a run that stalls learns small rewards). The settings:

- `--group`: what length-grouped batches group pairs by: `both` (both texts' tokens,
  the default) or `longer` (the longer text, what a pass pads to).
- `--clip`: the gradient-norm clip (`TrainConfig.max_grad_norm`; 0: none).

The seed sets the batch order and the score head's initialization; the pairs are the
same in every run.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
from pathlib import Path

from orchrm.demo_config import DemoConfig
from orchrm.rm.config import TrainConfig
from orchrm.rm.data import Pairs
from orchrm.rm.train import train


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--demo", type=Path, default=Path("orchrm-demo"))
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated training seeds")
    parser.add_argument("--group", default="both,longer", help="comma-separated: both, longer")
    parser.add_argument("--clip", default="1.0,0", help="comma-separated max gradient norms")
    parser.add_argument("--steps", type=int, default=DemoConfig.steps)
    parser.add_argument("--threads", type=int, default=None, help="PyTorch threads per run")
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    pairs = args.demo / "pairs" / "math"
    if not (pairs / "train.jsonl").is_file():
        raise SystemExit(f"{pairs}/train.jsonl is missing: run `orchrm demo --out {args.demo}`")
    both = Pairs.lengths
    print("| group by | clip | seed | validation accuracy | reward std | pairs/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    groups, clips = args.group.split(","), [float(c) for c in args.clip.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    try:
        for group, clip, seed in itertools.product(groups, clips, seeds):
            if group not in ("both", "longer"):
                raise SystemExit(f"--group takes both or longer, got {group!r}")
            Pairs.lengths = both if group == "both" else Pairs.widths
            with tempfile.TemporaryDirectory() as out:
                summary = train(
                    TrainConfig(
                        pairs=str(pairs),
                        out=out,
                        max_length=DemoConfig.max_length,
                        lr=DemoConfig.lr,
                        max_steps=args.steps,
                        eval_every=args.steps,
                        max_grad_norm=clip,
                        seed=seed,
                        num_threads=args.threads,
                    ),
                    progress=False,
                )
            last = summary.history[-1]
            print(
                f"| {group} | {clip:g} | {seed} | {summary.best_validation_accuracy:.3f} | "
                f"{last['reward_std']:.2f} | {summary.pairs_per_second:.1f} |",
                flush=True,
            )
    finally:
        Pairs.lengths = both


if __name__ == "__main__":
    main()

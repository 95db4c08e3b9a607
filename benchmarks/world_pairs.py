"""The world data the world benchmarks share, built (or reused) into a folder.

    .venv/bin/python benchmarks/world_pairs.py [--preset math] [--train-tasks 150]
        [--test-tasks 200] [--seed 20] [--max-length 512] [--backbone NAME]
        [--split 1,0,0] [--follow 0.75] [--out runs/world-pairs]

Runs `orchrm.experiments.world_studies.measure.world_pairs`, what `rm_scaling.py`,
`world_headroom.py` and `decoder_backbone.py` train and evaluate on: training logs from
world SEED and held-out logs from SEED + 1 (OUT/logs), pairs mined as the demo mines them
and exported cut to the budget (OUT/pairs), each stage reused while its settings stay the
same. Prints what was mined and how many held-out tasks have 8 candidates.
"""

from __future__ import annotations

import argparse

from orchrm.experiments.world_models import Cut
from orchrm.experiments.world_studies.measure import RERUNS, SAMPLES, world_pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="math")
    parser.add_argument("--train-tasks", type=int, default=150)
    parser.add_argument("--test-tasks", type=int, default=200)
    parser.add_argument("--seed", type=int, default=20, help="world seed of the training tasks")
    parser.add_argument("--max-length", type=int, default=512, help="tokens a text is cut to")
    parser.add_argument(
        "--backbone",
        default=None,
        help="count the tokens with this backbone's tokenizer ('': the default MiniLM); "
        "default: approximate counts",
    )
    parser.add_argument("--split", default="1,0,0", help="train,validation,test task shares")
    parser.add_argument("--follow", type=float, default=None, help="the specialized's `follow`")
    parser.add_argument("--out", default="runs/world-pairs")
    args = parser.parse_args()
    split = tuple(float(x) for x in args.split.split(","))
    world = world_pairs(
        args.preset,
        args.train_tasks,
        args.test_tasks,
        args.seed,
        args.out,
        Cut(args.max_length, args.backbone),
        split,
        None if args.follow is None else {"follow": args.follow},
    )
    mined = world.mined
    print(
        f"{args.preset}: {args.train_tasks} training tasks (world seed {args.seed}), "
        f"{len(world.test)} held-out tasks with {SAMPLES} candidates, each re-executed "
        f"{RERUNS} times"
    )
    print(
        f"pairs kept {mined.kept} of {mined.available}; by split {mined.by_split} -> {world.pairs}"
    )


if __name__ == "__main__":
    main()

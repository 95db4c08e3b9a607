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

from typing import Literal

from orchrm.cli.console import csv_values
from orchrm.cli.script import run_script
from orchrm.configs import config, setting
from orchrm.experiments.world_models import Cut
from orchrm.experiments.world_studies.measure import RERUNS, SAMPLES, world_pairs
from orchrm.world.tasks import PRESETS

CUT = Cut()
"""How the pairs are cut by default."""


@config(frozen=True)
class WorldPairsSettings:
    """The world data's options; the cut defaults to `Cut`'s."""

    preset: Literal[tuple(PRESETS)] = "math"
    """The world preset."""
    train_tasks: int = setting(150, min=1)
    """World tasks of the training logs."""
    test_tasks: int = setting(200, min=1)
    """Held-out world tasks (world seed + 1)."""
    seed: int = 20
    """World seed of the training tasks."""
    max_length: int = setting(CUT.max_length, min=2)
    """Tokens a text is cut to."""
    backbone: str | None = CUT.backbone
    """Count the tokens with this backbone's tokenizer ('': the default MiniLM); default:
    approximate counts."""
    split: tuple[float, float, float] = (1.0, 0.0, 0.0)
    """train,validation,test task shares."""
    follow: float | None = setting(None, min=0.0, max=1.0)
    """The specialized orchestrator's `follow` (default: the world's)."""
    out: str = "runs/world-pairs"
    """The folder of the logs and pairs."""


def main(args: WorldPairsSettings) -> None:
    """Build (or reuse) the logs and pairs and say what was mined."""
    world = world_pairs(
        args.preset,
        args.train_tasks,
        args.test_tasks,
        args.seed,
        args.out,
        Cut(args.max_length, args.backbone),
        args.split,
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
    split = {"parser": csv_values, "spell": lambda v: ",".join(f"{x:g}" for x in v)}
    run_script(WorldPairsSettings, main, doc=__doc__, settings={"split": split})

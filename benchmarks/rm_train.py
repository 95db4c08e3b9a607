"""Reward-model training speed: orchrm's loop vs TRL's RewardTrainer, same everything.

    .venv/bin/python benchmarks/rm_train.py [--pairs DIR] [--train-pairs 320] [--batch 16]
        [--max-length 256] [--padding]

Both train the offline MiniLM backbone on the same pairs (world `math` pairs, generated
here unless --pairs names an export folder), as the same token ids (orchrm's tokenization,
texts over --max-length truncated), for the same number of steps, with the same batch
size, learning rate, warm-up, max length and dropout (off), each in its own process (so
peak memory is its own), both clipping gradients to norm 1.0 (their defaults), both
drawing batches at random. TRL pads a batch to its longest text; orchrm scores a batch
in length-sorted forward passes that each pad to their own longest text. Both models are
then scored by the same code on the same held-out pairs. Prints pairs/s, CPU seconds of
training, peak RSS and held-out accuracy for each, and the ratios; `--padding` prints
only the share of real tokens the forward passes read, with and without orchrm's. The
runs are `orchrm.experiments.train_speed.compare`'s.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Literal

from orchrm.cli.script import run_script
from orchrm.configs import config, dump_config, setting, with_values
from orchrm.errors import MissingInput
from orchrm.experiments.train_speed.compare import (
    held_out_accuracy,
    make_pairs,
    padding_shares,
    run_orchrm,
    run_trl,
    subset,
)
from orchrm.training.config import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
TRAIN = TrainConfig()
"""orchrm's training defaults, which both runs share."""


@config(frozen=True)
class RMTrainSettings:
    """The comparison's options; those of the training default to `TrainConfig`'s."""

    pairs: str | None = None
    """An export folder (default: generated)."""
    tasks: int = setting(120, min=1)
    """World tasks when generating."""
    train_pairs: int = setting(320, min=1)
    """Training pairs (the first of the export's training split)."""
    batch: int = setting(TRAIN.batch_size, min=1)
    """Pairs a step."""
    lr: float = setting(TRAIN.lr, min=0.0)
    """Learning rate."""
    max_length: int = setting(TRAIN.max_length, min=2)
    """Tokens a text is truncated to."""
    sort_batches: int = setting(TRAIN.sort_batches, min=1)
    """orchrm's TrainConfig.sort_batches."""
    padding: bool = False
    """Only print the share of real tokens per pass."""
    child: Literal["orchrm", "trl"] | None = None
    """Run this trainer in this process (how the comparison runs each)."""
    out: str | None = None
    """The child run's folder."""


def child(which: str, args: RMTrainSettings) -> None:
    """One run in this process; prints its figures as a RESULT line."""
    shared = {"train_pairs": args.train_pairs, "batch": args.batch, "lr": args.lr}
    shared["max_length"] = args.max_length
    pairs, out = Path(args.pairs), Path(args.out)
    if which == "orchrm":
        result = run_orchrm(pairs, out, **shared, sort_batches=args.sort_batches)
    else:
        result = run_trl(pairs, out, **shared)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(result))


def main(args: RMTrainSettings) -> None:
    """Train with both in turn, each in its own process, and print their figures."""
    if args.pairs and not Path(args.pairs).is_dir():
        raise MissingInput(f"--pairs {args.pairs}: no such export folder")
    if args.child:
        child(args.child, args)
        return
    from orchrm.cli import quiet_third_party

    quiet_third_party()  # transformers' load reports would bury the figures
    work = Path(tempfile.mkdtemp(prefix="orchrm-rm-bench-"))
    made = Path(args.pairs) if args.pairs else make_pairs(work, args.tasks)
    pairs = subset(made, args.train_pairs, work / "pairs")
    if args.padding:
        n, shares = padding_shares(pairs, args.batch, args.max_length)
        print(f"real tokens of all tokens a pass reads, {n} pairs, batch {args.batch}:")
        for label, share in shares:
            print(f"  {label}: {share:.1%}")
        return
    results = {}
    settings = dump_config(with_values(args, {"pairs": str(pairs)}), work / "settings.yaml")
    for which in ("orchrm", "trl"):
        command = [sys.executable, __file__, "--config", str(settings), "--child", which]
        command += ["--out", str(work / which)]
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
        line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            sys.exit(f"{which} failed:\n{done.stderr[-3000:]}")
        results[which] = json.loads(line[len("RESULT ") :])
        results[which]["accuracy"] = held_out_accuracy(
            results[which]["model"], pairs, args.max_length
        )
    validation = len((pairs / "validation.jsonl").read_text().splitlines())
    print(
        f"MiniLM, {args.train_pairs} training pairs, batch {args.batch}, lr {args.lr}, "
        f"max length {args.max_length}; held-out accuracy on {validation} pairs"
    )
    for which, r in results.items():
        print(
            f"  {which:7s} {r['pairs_per_s']:6.2f} pairs/s  {r['seconds']:6.1f} s  "
            f"{r['cpu_seconds']:6.1f} CPU s  peak RSS {r['peak_rss_mb']:6.0f} MB  "
            f"held-out accuracy {r['accuracy']:.3f}"
        )
    o, t = results["orchrm"], results["trl"]
    print(
        f"  ratio orchrm/TRL: speed {o['pairs_per_s'] / t['pairs_per_s']:.2f}x (CPU seconds "
        f"{t['cpu_seconds'] / o['cpu_seconds']:.2f}x), peak memory "
        f"{o['peak_rss_mb'] / t['peak_rss_mb']:.2f}x, accuracy {o['accuracy'] - t['accuracy']:+.3f}"
        f" (goal: >= 1.5x at equal accuracy)"
    )


if __name__ == "__main__":
    hidden = {"hidden": True}
    run_script(RMTrainSettings, main, doc=__doc__, settings={"child": hidden, "out": hidden})

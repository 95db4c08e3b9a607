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

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from orchrm.experiments.train_speed.compare import (
    held_out_accuracy,
    make_pairs,
    padding_shares,
    run_orchrm,
    run_trl,
    subset,
)

ROOT = Path(__file__).resolve().parents[1]


def child(which: str, args) -> None:
    """One run in this process; prints its figures as a RESULT line."""
    shared = {"train_pairs": args.train_pairs, "batch": args.batch, "lr": args.lr}
    shared["max_length"] = args.max_length
    if which == "orchrm":
        result = run_orchrm(args.pairs, args.out, **shared, sort_batches=args.sort_batches)
    else:
        result = run_trl(args.pairs, args.out, **shared)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=Path, help="An export folder (default: generated).")
    parser.add_argument("--tasks", type=int, default=120, help="World tasks when generating.")
    parser.add_argument("--train-pairs", type=int, default=320)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument(
        "--sort-batches", type=int, default=1, help="orchrm's TrainConfig.sort_batches."
    )
    parser.add_argument("--child", choices=("orchrm", "trl"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument(
        "--padding", action="store_true", help="Only print the share of real tokens per pass."
    )
    args = parser.parse_args()
    if args.child:
        child(args.child, args)
        return
    from orchrm.cli import quiet_third_party

    quiet_third_party()  # transformers' load reports would bury the figures
    work = Path(tempfile.mkdtemp(prefix="orchrm-rm-bench-"))
    pairs = subset(args.pairs or make_pairs(work, args.tasks), args.train_pairs, work / "pairs")
    if args.padding:
        n, shares = padding_shares(pairs, args.batch, args.max_length)
        print(f"real tokens of all tokens a pass reads, {n} pairs, batch {args.batch}:")
        for label, share in shares:
            print(f"  {label}: {share:.1%}")
        return
    results = {}
    for which in ("orchrm", "trl"):
        command = [sys.executable, __file__, "--child", which, "--pairs", str(pairs)]
        command += ["--out", str(work / which), "--train-pairs", str(args.train_pairs)]
        command += ["--batch", str(args.batch), "--lr", str(args.lr)]
        command += ["--max-length", str(args.max_length), "--sort-batches", str(args.sort_batches)]
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
    main()

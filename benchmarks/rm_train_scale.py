"""Reward-model training at scale on this machine: token-budget batches and gradient
checkpointing, each setting in a fresh process (so its peak memory is its own).

    .venv/bin/python benchmarks/rm_train_scale.py --study budget --pairs runs/pairs [--budget 4096]
    .venv/bin/python benchmarks/rm_train_scale.py --study checkpointing --pairs runs/pairs

`budget` trains the offline MiniLM at max length 256 with and without
`--max-tokens-per-batch` and prints pairs/s, real and padded tokens/s and peak RSS.
`checkpointing` builds a random ~110M-parameter Llama (hidden 768, 12 layers, vocab
32,000; nothing downloaded) and trains one step on one pair of 1,024-token texts with and
without gradient checkpointing, fully and with LoRA, printing peak RSS and the step's
time. Each setting trains in a child process: this script again, given the hidden option
`--child JSON` (the `TrainConfig` fields of that run) instead of `--study`.
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
from orchrm.configs import config, setting
from orchrm.errors import ConfigError, MissingInput
from orchrm.training.config import TrainConfig

ROOT = Path(__file__).resolve().parents[1]


@config(frozen=True)
class ScaleSettings:
    """The benchmark's options."""

    study: Literal["budget", "checkpointing"] | None = None
    """What to measure: token-budget batches, or gradient checkpointing (required)."""
    pairs: str | None = None
    """An export folder (train.jsonl, ...); required."""
    budget: int = setting(4096, min=2)
    """Tokens per pass (budget)."""
    steps: int = setting(20, min=1)
    """Optimizer steps (budget)."""
    child: str | None = None
    """Internal: the TrainConfig fields, as JSON, of one setting this script trains in a
    child process of its own."""

    def __post_init__(self) -> None:
        if self.child is not None and self.study is not None:
            raise ConfigError("--child is the child process's: give --study or --child")


def child(settings: dict) -> None:
    """Train with `settings` (TrainConfig fields) here; print the summary and peak RSS."""
    from orchrm.training.train import train

    summary = train(TrainConfig(**settings), progress=False).to_dict()
    summary.pop("history")
    summary["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(summary))


def run(settings: dict) -> dict:
    """`child` in a fresh process; its summary."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(settings)],
        capture_output=True,
        text=True,
        check=False,
        # glibc hands large freed blocks back, so the peak RSS follows live tensors.
        env={
            "HF_HUB_OFFLINE": "1",
            "PATH": "/usr/bin:/bin",
            "OMP_NUM_THREADS": "2",
            "MALLOC_MMAP_THRESHOLD_": "65536",
        },
        cwd=ROOT,
    )
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def budget(args: ScaleSettings, out: Path) -> None:
    common = dict(pairs=args.pairs, max_length=256, batch_size=16, max_steps=args.steps,
                  eval_every=args.steps, num_threads=2, seed=0)  # fmt: skip
    for limit in (None, args.budget):
        s = run({**common, "out": str(out / str(limit)), "max_tokens_per_batch": limit})
        print(
            f"max_tokens_per_batch {limit}: {s['pairs_per_second']:.2f} pairs/s, "
            f"{s['tokens_per_second']:.0f} tokens/s ({s['padded_tokens_per_second']:.0f} "
            f"padded), {s['pairs_seen']} pairs in {s['train_seconds']:.1f} s, "
            f"peak RSS {s['peak_rss_mib']:.0f} MiB"
        )


def random_llama(folder: Path, texts: list[str]) -> Path:
    """A random ~110M-parameter Llama reward model with a byte-level BPE tokenizer."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForSequenceClassification, PreTrainedTokenizerFast

    words = Tokenizer(models.BPE())
    words.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    words.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=2000, special_tokens=["</s>"], initial_alphabet=alphabet
    )
    words.train_from_iterator(texts, trainer)
    config = LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048,
                         num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=12,
                         max_position_embeddings=2048, num_labels=1)  # fmt: skip
    torch.manual_seed(0)
    LlamaForSequenceClassification(config).save_pretrained(folder)
    PreTrainedTokenizerFast(tokenizer_object=words, eos_token="</s>").save_pretrained(folder)
    return folder


def checkpointing(args: ScaleSettings, out: Path) -> None:
    records = [json.loads(x) for x in (Path(args.pairs) / "train.jsonl").read_text().splitlines()]
    texts = [r["prompt"] + r[s] for r in records[:200] for s in ("chosen", "rejected")]
    backbone = random_llama(out / "llama", texts)
    # Each side repeated: well over 1,024 tokens, cut to exactly that.
    long = [{**r, "chosen": r["chosen"] * 8, "rejected": r["rejected"] * 8} for r in records[:4]]
    (out / "pairs").mkdir()
    (out / "pairs" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in long))
    common = dict(pairs=str(out / "pairs"), backbone=str(backbone), max_length=1024,
                  batch_size=1, max_steps=1, num_threads=2, seed=0)  # fmt: skip
    for lora in (False, True):
        for on in (False, True):
            where = out / f"{lora}-{on}"
            s = run({**common, "out": str(where), "gradient_checkpointing": on, "lora": lora})
            print(
                f"{'LoRA' if lora else 'full'}, gradient_checkpointing {on}: peak RSS "
                f"{s['peak_rss_mib']:.0f} MiB, one step {s['train_seconds']:.1f} s "
                f"({s['padded_tokens']} tokens)"
            )


def main(args: ScaleSettings) -> None:
    """The study asked for, each setting in a child process (or, in the child, one)."""
    if args.child is not None:
        child(json.loads(args.child))
        return
    if args.study is None or args.pairs is None:  # not in the config: its defaults lack them
        raise ConfigError("give --study budget|checkpointing and --pairs FOLDER")
    if not (Path(args.pairs) / "train.jsonl").is_file():
        raise MissingInput(f"--pairs {args.pairs}: no train.jsonl there (an export folder)")
    with tempfile.TemporaryDirectory() as tmp:
        (budget if args.study == "budget" else checkpointing)(args, Path(tmp))


if __name__ == "__main__":
    run_script(ScaleSettings, main, doc=__doc__, settings={"child": {"hidden": True}})

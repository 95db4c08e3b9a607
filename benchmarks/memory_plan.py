"""The memory plan against measured peaks: random Llama- and BERT-shaped models trained
for real on this machine's CPU, each point in a fresh process.

    .venv/bin/python benchmarks/memory_plan.py [--grid quick|full] [--dtype fp32|bf16]
        [--only llama-20m,bert-22m] [--steps 2] [--json runs/memory_plan.json]

For each point: `orchrm.memplan.plan.plan_training`'s peak (and its total), the peak resident
memory one probe measured above what the process held before the model was built
(`orchrm.memplan.probe`), and their ratio. The full grid takes several minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchrm.memplan.plan import plan_training  # noqa: E402
from orchrm.memplan.probe import Probe, measure  # noqa: E402

MIB = 1024**2
SHAPES = {
    "llama-20m": {
        "model_type": "llama",
        "vocab_size": 32000,
        "hidden_size": 384,
        "intermediate_size": 1024,
        "num_hidden_layers": 4,
        "num_attention_heads": 6,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
    },
    "llama-110m": {
        "model_type": "llama",
        "vocab_size": 32000,
        "hidden_size": 768,
        "intermediate_size": 2048,
        "num_hidden_layers": 8,
        "num_attention_heads": 12,
        "num_key_value_heads": 4,
        "max_position_embeddings": 4096,
    },
    "bert-22m": {  # all-MiniLM-L6-v2's shape
        "model_type": "bert",
        "vocab_size": 30522,
        "hidden_size": 384,
        "intermediate_size": 1536,
        "num_hidden_layers": 6,
        "num_attention_heads": 12,
        "max_position_embeddings": 1024,
    },
    "bert-110m": {  # bert-base's shape
        "model_type": "bert",
        "vocab_size": 30522,
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "max_position_embeddings": 1024,
    },
}


@dataclass
class Point:
    shape: str
    max_length: int
    micro_batch_pairs: int
    lora: bool = False
    gradient_checkpointing: bool = False
    attn_implementation: str = "sdpa"


def grid(name: str) -> list[Point]:
    """The quick grid: one of each setting on the small shapes; the full grid: those
    and the ~110M shapes at two lengths."""
    small = []
    for shape in ("llama-20m", "bert-22m"):
        small += [
            Point(shape, 512, 2),
            Point(shape, 512, 2, attn_implementation="eager"),
            Point(shape, 512, 2, gradient_checkpointing=True),
            Point(shape, 512, 2, lora=True),
            Point(shape, 1024, 1, lora=True, gradient_checkpointing=True),
        ]
    if name == "quick":
        return small
    large = []
    for shape in ("llama-110m", "bert-110m"):
        large += [
            Point(shape, 256, 2),
            Point(shape, 1024, 1),
            Point(shape, 1024, 1, lora=True),
            Point(shape, 1024, 1, gradient_checkpointing=True),
            Point(shape, 512, 2, attn_implementation="eager", lora=True),
        ]
    return small + large


def run_point(point: Point, dtype: str, steps: int) -> dict:
    """Plan and measure one point."""
    config = SHAPES[point.shape]
    settings = {
        "max_length": point.max_length,
        "micro_batch_pairs": point.micro_batch_pairs,
        "dtype": dtype,
        "lora": point.lora,
        "gradient_checkpointing": point.gradient_checkpointing,
        "attn_implementation": point.attn_implementation,
    }
    plan = plan_training(config, **settings, peak_flops=1e12)
    measured = measure(Probe(config=config, steps=steps, **settings))
    return {
        **asdict(point),
        "dtype": dtype,
        "parameters": measured.parameters,
        "plan_peak_mib": plan.memory.peak / MIB,
        "plan_total_mib": plan.memory.total / MIB,
        "measured_mib": measured.peak_bytes / MIB,
        "ratio": plan.memory.peak / measured.peak_bytes,
        "seconds_per_step": measured.seconds_per_step,
    }


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", choices=("quick", "full"), default="quick")
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--only", default="", help="comma-separated shapes to keep")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--json", default="", help="also write the rows to this file")
    args = parser.parse_args()
    keep = set(filter(None, args.only.split(",")))
    points = [p for p in grid(args.grid) if not keep or p.shape in keep]
    print(
        f"{'shape':<11}{'L':>5}{'pairs':>6} {'lora':<5}{'gc':<4}{'attn':<6}"
        f"{'plan peak':>10}{'total':>8}{'measured':>10}{'ratio':>7}{'s/step':>8}"
    )
    rows = []
    for point in points:
        row = run_point(point, args.dtype, args.steps)
        rows.append(row)
        print(
            f"{point.shape:<11}{point.max_length:>5}{point.micro_batch_pairs:>6} "
            f"{_yes(point.lora):<5}{_yes(point.gradient_checkpointing):<4}"
            f"{point.attn_implementation:<6}{row['plan_peak_mib']:>10.0f}"
            f"{row['plan_total_mib']:>8.0f}{row['measured_mib']:>10.0f}{row['ratio']:>7.2f}"
            f"{row['seconds_per_step']:>8.1f}",
            flush=True,
        )
    ratios = [r["ratio"] for r in rows]
    print(f"plan peak / measured: min {min(ratios):.2f}, max {max(ratios):.2f} (MiB)")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()

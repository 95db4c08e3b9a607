"""The memory plan against measured peaks: random Llama- and BERT-shaped models trained
for real on this machine's CPU (`orchrm.memplan.probe`), each point's planned peak
(`orchrm.memplan.plan.plan_training`) beside the one measured
(`benchmarks/memory_plan.py` prints them)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from orchrm.memplan.plan import plan_training
from orchrm.memplan.probe import Probe, measure

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
    "smollm2-135m": {  # SmolLM2-135M-Instruct's shape
        "model_type": "llama",
        "vocab_size": 49152,
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": True,
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
    """One setting to plan and measure."""

    shape: str
    max_length: int
    micro_batch_pairs: int
    lora: bool = False
    gradient_checkpointing: bool = False
    attn_implementation: str = "sdpa"
    packing: bool = False
    """A decoder's texts packed into one row (`orchrm.rmodel.packed`)."""


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
    small += [Point("llama-20m", 1024, 2, packing=True),
              Point("llama-20m", 1024, 2, lora=True, packing=True)]  # fmt: skip
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
    # SmolLM2-135M as orchrm trains it at 2,048 tokens: 4 pairs of about 1,100 tokens
    # (MAS-Orchestra's lengths scaled), packed, with LoRA
    large.append(Point("smollm2-135m", 1152, 4, lora=True, packing=True))
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
        "packing": point.packing,
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

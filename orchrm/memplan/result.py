"""What a memory plan says: bytes per device at each ZeRO stage (`MemoryPlan`) and the
whole plan of a training run (`TrainingPlan`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

FLOPS_FORMULA = (
    "per token: full 6N, LoRA 4N + 6N_lora; + 12 x layers x L x heads x head_dim "
    "(attention); gradient checkpointing adds a forward (2N + 4 x layers x L x heads x "
    "head_dim); N = linear weights"
)


@dataclass
class MemoryPlan:
    """Bytes per device at one ZeRO stage, with or without gradient checkpointing."""

    zero_stage: int
    gradient_checkpointing: bool
    weights: int
    gradients: int
    optimizer: int
    """AdamW's two fp32 moments, and the fp32 master copy of bf16 weights trained fully."""
    gathered: int
    """ZeRO-3: the full weights of the unit in use and the next one, gathered."""
    activations_saved: int
    """What the forward pass keeps for the backward pass."""
    activations_working: int
    """What the backward pass adds: gradients in flight, and with gradient
    checkpointing one layer recomputed."""
    total: int
    """Every part added up: a bound."""
    peak: int
    """Weights, optimizer state and the larger of activations and gradients."""

    @property
    def activations(self) -> int:
        return self.activations_saved + self.activations_working


@dataclass
class TrainingPlan:
    """What training a reward model will hold and take, per device."""

    backbone: str
    model_type: str
    parameters: int
    """Parameters of the sequence-classification model (before LoRA adapters)."""
    trainable_parameters: int
    lora_parameters: int
    dtype: str
    max_length: int
    micro_batch_pairs: int
    tokens_per_step: int
    """Tokens per forward pass and device: 2 texts a pair, each `max_length` (packed:
    `mean_length`)."""
    attn_implementation: str
    packing: bool
    """Whether the plan packs the texts (asked for, and a decoder without eager
    attention)."""
    mean_length: int | None
    lora: bool
    lora_r: int
    gradient_checkpointing: bool
    zero_stage: int
    num_devices: int
    memory: MemoryPlan
    """The stage and checkpointing asked for."""
    table: list[MemoryPlan]
    """Every ZeRO stage, without and with gradient checkpointing."""
    flops_per_step: int
    """FLOPs of one forward and backward pass on one device (`FLOPS_FORMULA`)."""
    mfu: float
    peak_flops: float | None
    gpu: str | None
    step_seconds: float | None
    """None: no peak FLOP/s given or known (a CPU)."""
    pairs_per_second: float | None
    """All devices together."""
    device_memory: int | None
    fits: bool | None
    """Whether `memory.peak` fits `device_memory` (None: memory not known)."""
    flops_formula: str = FLOPS_FORMULA
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

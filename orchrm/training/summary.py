"""`TrainSummary`: what a reward-model training run reports (and stores in the saved
model's metadata)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class TrainSummary:
    """What a training run did; also stored under `training` in the model's metadata."""

    steps: int
    """Optimizer steps done."""
    pairs_seen: int
    """Training pairs read, summed over processes."""
    train_seconds: float
    """Forward, backward and optimizer time only (evaluation and saving excluded)."""
    pairs_per_second: float
    best_validation_accuracy: float | None
    """Pairwise accuracy of the saved model on the validation pairs (None: none)."""
    history: list[dict]
    """Every validation pass: its step, `pairwise_accuracy` metrics and `throughput`."""
    train_pairs: int
    validation_pairs: int
    truncated_texts: int
    """Texts (of both splits) cut to `max_length`."""
    bf16: bool
    """Whether the run computed in bf16 (`dtype` is then bf16)."""
    processes: int
    stopped_early: bool
    resumed_from_step: int | None
    dtype: str
    """The precision the run resolved `TrainConfig.dtype` to: bf16 or fp32."""
    gradient_checkpointing: bool
    attn_implementation: str
    tokens: int
    """Real (non-pad) tokens of the passes this run made (since its resume), all processes."""
    padded_tokens: int
    """Tokens those passes computed, padding included."""
    tokens_per_second: float
    padded_tokens_per_second: float
    mfu: float | None
    """Model FLOPs utilisation (`orchrm.training.throughput`); None: the device's peak unknown."""
    peak_flops: float | None
    """Peak FLOP/s of one device the MFU is measured against."""

    def to_dict(self) -> dict:
        return asdict(self)

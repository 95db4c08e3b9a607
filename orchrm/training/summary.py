"""`TrainSummary`: what a reward-model training run reports (and stores in the saved
model's metadata), and `summarize`, which sums it over the run's processes."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class TrainSummary:
    """What a training run did; also stored under `training` in the model's metadata."""

    steps: int
    """Optimizer steps done."""
    planned_steps: int
    """Optimizer steps the run was to make (`epochs` or `max_steps`); fewer were done when
    early stopping ended it."""
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

    def model_evaluation(self) -> dict | None:
        """The validation pass the saved model was chosen at (its step, accuracy overall,
        by kind and by domain): the first with the best accuracy, since a model is saved
        only when a pass beats every one before it. None without validation."""
        best = self.best_validation_accuracy
        return next((h for h in self.history if h.get("accuracy") == best), None)


def summarize(run, stopped: bool) -> TrainSummary:
    """The `TrainSummary` of `run` (`orchrm.training.train`'s run), counts summed over
    processes; `stopped`: early stopping ended it."""
    import torch

    state, accelerator, meter = run.state, run.accelerator, run.meter
    counts = torch.tensor(
        [state.pairs_seen, meter.tokens, meter.padded_tokens], device=accelerator.device
    )
    seen, tokens, padded = (int(x) for x in accelerator.reduce(counts, reduction="sum"))
    rate = meter.throughput(tokens, padded, accelerator.num_processes)
    return TrainSummary(
        steps=state.step,
        planned_steps=run.total_steps,
        pairs_seen=seen,
        train_seconds=state.train_seconds,
        pairs_per_second=seen / state.train_seconds if state.train_seconds else 0,
        best_validation_accuracy=state.best_accuracy if state.best_accuracy >= 0 else None,
        history=state.history,
        train_pairs=len(run.train_pairs),
        validation_pairs=len(run.val_pairs),
        truncated_texts=run.train_pairs.truncated + run.val_pairs.truncated,
        bf16=run.bf16,
        processes=accelerator.num_processes,
        stopped_early=stopped,
        resumed_from_step=run.resumed_step,
        dtype="bf16" if run.bf16 else "fp32",
        gradient_checkpointing=run.checkpointing,
        attn_implementation=run.config.attn_implementation,
        tokens=tokens,
        padded_tokens=padded,
        tokens_per_second=rate.tokens_per_second,
        padded_tokens_per_second=rate.padded_tokens_per_second,
        mfu=rate.mfu,
        peak_flops=meter.peak_flops,
    )

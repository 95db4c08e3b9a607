"""`PlanMemoryConfig`: what `orchrm plan-memory` can set, the training settings it plans
for and what the plan assumes beyond them (kept apart from the planner so the command
line reads it without loading torch)."""

from __future__ import annotations

from dataclasses import field

from orchrm.configs import config, setting
from orchrm.training.config import TrainConfig


@config
class PlanOptions:
    """What a plan assumes beyond the training settings: the devices, how the training
    is sharded over them, how fast they run and how much memory each has."""

    micro_batch_pairs: int | None = setting(None, min=1)
    """Pairs per forward pass (default: the batch's)."""
    num_devices: int = setting(1, min=1)
    """Devices."""
    zero_stage: int = setting(0, min=0, max=3)
    """The ZeRO stage."""
    mfu: float = setting(0.35, min=0.0, max=1.0)
    """Model FLOPs utilization."""
    peak_flops: str | None = None
    """FLOP/s per device, or a GPU by name (H100, A100, ...); default: this machine's."""
    device_memory_gib: float | None = None
    """GiB a device."""
    mean_length: int | None = setting(None, min=1)
    """Packed texts' mean tokens (`packing`, on by default for decoders); default:
    max_length, the most a pass can hold."""


@config
class PlanMemoryConfig(TrainConfig):
    """`TrainConfig` (a recipe, a run's config.yaml), and what its plan assumes."""

    plan: PlanOptions = field(default_factory=PlanOptions)
    """What the plan assumes beyond the training settings (the `--config` file's `plan:`
    mapping)."""

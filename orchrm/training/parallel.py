"""How reward-model training runs over accelerate's processes: the accelerator, whether
a backend (DeepSpeed, FSDP) holds the weights, and the whole model saved from them.

orchrm accumulates gradients itself (a step's micro-batches vary in number with a token
budget), so the accelerator is made with one accumulation step and DeepSpeed's own
`gradient_accumulation_steps` must be 1. Under ZeRO-3 and FSDP each process holds a
shard of the weights and every forward pass gathers them collectively: all processes
then validate and save together, and the saved model is the consolidated one
(`Accelerator.get_state_dict`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from itertools import chain

import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState, PartialState
from accelerate.utils import DistributedType

from orchrm.errors import ConfigError


def make_accelerator(cpu: bool, mixed_precision: str) -> Accelerator:
    """accelerate keeps one precision per process and refuses another one later. A
    process that is not part of a multi-process launch (a notebook, the demo, a test
    session) may train several models with different settings, so there it starts
    afresh; a launched process keeps the launch's state."""
    state = AcceleratorState._shared_state
    other = state and state.get("_mixed_precision") != mixed_precision
    if other and PartialState().num_processes == 1:
        AcceleratorState._reset_state()
    # cpu=True is what makes accelerate run several CPU processes over gloo (MULTI_CPU).
    return Accelerator(cpu=cpu, mixed_precision=mixed_precision, gradient_accumulation_steps=1)


@dataclass(frozen=True)
class Placement:
    """Where a run's weights live."""

    wrapped: bool
    """A backend (DeepSpeed, FSDP) owns the model and its optimizer: orchrm's resumable
    checkpoints, which read plain state dicts, are not written."""
    sharded: bool
    """Each process holds a shard (ZeRO-3, FSDP): forward passes and saving are
    collective, so every process takes part in them."""


def placement(accelerator: Accelerator) -> Placement:
    """The `Placement` accelerate's launch configured."""
    kind = accelerator.distributed_type
    if kind == DistributedType.DEEPSPEED:
        stage = accelerator.state.deepspeed_plugin.zero_stage
        return Placement(wrapped=True, sharded=stage == 3)
    if kind == DistributedType.FSDP:
        return Placement(wrapped=True, sharded=True)
    return Placement(wrapped=False, sharded=False)


def configure_deepspeed(
    accelerator: Accelerator, micro_batch_pairs: int, max_grad_norm: float
) -> None:
    """Fill what DeepSpeed needs before `prepare` without a dataloader: a micro-batch
    size (only its logs read it), one accumulation step (orchrm accumulates) and, unless
    its config sets one, the gradient clipping orchrm asks for (0: none)."""
    if accelerator.distributed_type != DistributedType.DEEPSPEED:
        return
    config = accelerator.state.deepspeed_plugin.deepspeed_config
    if config.get("gradient_accumulation_steps", 1) not in (1, "auto"):
        raise ConfigError(
            "the DeepSpeed config sets gradient_accumulation_steps "
            f"{config['gradient_accumulation_steps']}: set it to 1 and use "
            "--grad-accumulation (orchrm accumulates itself)"
        )
    config["gradient_accumulation_steps"] = 1
    if config.get("train_micro_batch_size_per_gpu", "auto") == "auto":
        config["train_micro_batch_size_per_gpu"] = micro_batch_pairs
    if config.get("gradient_clipping", "auto") == "auto":
        config["gradient_clipping"] = max_grad_norm


def cpu_copy(model):
    """A deep copy of `model` on the CPU: each parameter and buffer is copied straight
    there, so the copy takes no accelerator memory (a LoRA model merged for saving would
    otherwise hold its weights twice on the device)."""
    memo: dict[int, torch.Tensor] = {}
    for tensor in chain(model.parameters(), model.buffers()):
        data = tensor.detach().to("cpu", copy=True)
        if isinstance(tensor, torch.nn.Parameter):
            data = torch.nn.Parameter(data, requires_grad=tensor.requires_grad)
        memo[id(tensor)] = data
    return copy.deepcopy(model, memo)


def model_to_save(
    accelerator: Accelerator,
    model,
    where: Placement,
    *,
    main: bool,
    lora: bool,
    fresh: Callable[[], object],
) -> tuple[object | None, dict | None]:
    """(model, state dict or None) for `save_model` to write; (None, None) on a process
    that writes nothing. A model a backend holds has its weights gathered from the
    processes (`get_state_dict`, on every process of a sharded run); LoRA weights are
    then loaded into `fresh()`, a new LoRA model, for its adapters to be merged. A LoRA
    model held whole is merged in a `cpu_copy`."""
    unwrapped = accelerator.unwrap_model(model)
    if not where.wrapped:
        # Merge a copy: training goes on with the adapters.
        return (cpu_copy(unwrapped) if lora else unwrapped), None
    state = accelerator.get_state_dict(model)
    if not main:
        return None, None
    if not lora:
        return unwrapped, state
    rebuilt = fresh()
    rebuilt.load_state_dict(state)
    return rebuilt, None

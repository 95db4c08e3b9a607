"""A memory and time plan for training a reward model, made before anything is loaded.

    python -m orchrm plan-memory BACKBONE_DIR_OR_CONFIG --max-length 4096 --micro-batch-pairs 1 \\
        --lora --gradient-checkpointing --zero-stage 3 --num-devices 8 --peak-flops H100
    python -m orchrm plan-memory llama-3.1-8b --max-length 4096 --lora   # a named shape
    python -m orchrm plan-memory --config configs/skywork-8b-lora.yaml --peak-flops H100

From the backbone's `config.json` alone (`orchrm.memplan.shapes`): parameters and
trainable parameters; bytes per device for weights, gradients, AdamW state (two fp32
moments, plus an fp32 master copy of bf16 weights trained fully) and activations, at
each ZeRO stage (0: nothing sharded; 1: optimizer state; 2: and gradients; 3: and
weights, over `num_devices`), with and without gradient checkpointing; and a step time
at an assumed model FLOPs utilization. `total` adds every part up; `peak` counts that
the backward pass frees activations as it makes gradients (and that gradients are
freed after each optimizer step, as PyTorch's `zero_grad` does). Both assume dropout
off (`TrainConfig.disable_dropout`), every text padded to `max_length`, and one process
per device; communication buffers of a distributed launch are not counted.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any, Literal

from orchrm.configs import config, setting
from orchrm.errors import ConfigError
from orchrm.memplan.result import MemoryPlan, TrainingPlan
from orchrm.memplan.shapes import (
    Backbone,
    Counts,
    Step,
    backward_working_bytes,
    count_parameters,
    layer_bytes,
    outside_layers_bytes,
    read_backbone,
    step_flops,
)

GIB = 1024**3
GPUS = {
    # name: (bf16 dense FLOP/s, fp32 FLOP/s without TF32, memory in bytes)
    "H200": (989e12, 67e12, 140 * GIB),
    "H100": (989e12, 67e12, 80 * GIB),
    "A100-40GB": (312e12, 19.5e12, 40 * GIB),
    "A100": (312e12, 19.5e12, 80 * GIB),
}
"""Peak dense FLOP/s (NVIDIA's data sheets, SXM parts) and memory of known GPUs."""
PRESETS = {
    "llama-3.1-8b": {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 128256,
        "tie_word_embeddings": False,
    },
}
"""Backbone shapes known by name (the Orch-RM paper's reward model is Llama-3.1-8B)."""
ATTENTION = ("sdpa", "eager", "flash_attention_2", "flash_attention_3")


@config(frozen=True)
class PlanSettings:
    """What a plan is made for: the batch, precision, LoRA, attention, checkpointing and
    sharding of the training run, and the devices it runs on."""

    max_length: int = setting(min=1)
    """Tokens per text."""
    micro_batch_pairs: int = setting(min=1)
    """Pairs per forward pass and device."""
    dtype: Literal["bf16", "fp32"] = "bf16"
    """The precision of the forward and backward passes."""
    lora: bool = False
    """Train a LoRA adapter and the score head instead of every weight."""
    lora_r: int = setting(32, min=1)
    """The LoRA rank."""
    gradient_checkpointing: bool | None = None
    """None: on only when the peak without it would not fit `device_memory`."""
    attn_implementation: Literal[ATTENTION] = "sdpa"
    """The attention kernel."""
    packing: bool = False
    """A decoder's texts packed into one row without padding (`orchrm.rmodel.packed`):
    no L x L tensor, and the tokens are the texts' own (`mean_length`)."""
    mean_length: int | None = setting(None, min=1)
    """Packed texts' mean tokens (None: max_length, the most a pass can hold)."""
    zero_stage: int = setting(0, min=0, max=3)
    """0: nothing sharded; 1: optimizer state; 2: and gradients; 3: and weights."""
    num_devices: int = setting(1, min=1)
    """Devices the ZeRO stage shards over."""
    mfu: float = setting(0.35, min=1e-6, max=1.0)
    """Model FLOPs utilization the step time assumes."""
    peak_flops: float | str | None = None
    """FLOP/s per device or a `GPUS` name (None: this machine's GPU, if known; on a CPU
    the step time is left out)."""
    device_memory: int | None = None
    """Bytes per device (None: the GPU's)."""


def _resolve_peak(
    peak_flops: float | str | None, dtype: str
) -> tuple[float | None, str | None, int | None]:
    """(peak FLOP/s, GPU name, device memory) from a number, a GPU name, or this
    machine's CUDA device when neither is given."""
    column = 0 if dtype == "bf16" else 1
    if isinstance(peak_flops, int | float) and not isinstance(peak_flops, bool):
        if peak_flops <= 0:
            raise ConfigError(f"peak_flops must be above 0, not {peak_flops}")
        return float(peak_flops), None, None
    if isinstance(peak_flops, str):
        name = peak_flops.upper()
        if name not in GPUS:
            known = ", ".join(GPUS)
            raise ConfigError(f"peak_flops {peak_flops!r} is no GPU the plan knows ({known})")
        return GPUS[name][column], name, GPUS[name][2]
    return _local_gpu(column)


def _local_gpu(column: int) -> tuple[float | None, str | None, int | None]:
    """This machine's first CUDA device, when it is one of `GPUS`."""
    try:
        import torch
    except ImportError:
        return None, None, None
    if not torch.cuda.is_available():
        return None, None, None
    from orchrm.training.throughput import device_peak_flops

    name = torch.cuda.get_device_name(0)
    memory = torch.cuda.get_device_properties(0).total_memory
    for known, figures in GPUS.items():
        if known.split("-")[0] in name.upper():
            return figures[column], known, memory
    # Any other GPU orchrm's throughput meter knows: its bf16 peak (no fp32 figure).
    peak = device_peak_flops(torch.device("cuda", 0)) if column == 0 else None
    return peak, name, memory


def _state_bytes(counts: Counts, *, dtype: str, lora: bool) -> tuple[int, int, int]:
    """(weights, gradients, optimizer state) on one device before sharding. LoRA keeps
    its adapters and its trained copy of the head in fp32 (PEFT's default)."""
    a = 2 if dtype == "bf16" else 4
    if not lora:
        master = 4 if dtype == "bf16" else 0
        return a * counts.total, a * counts.total, (8 + master) * counts.total
    trained = counts.lora + counts.head
    return a * counts.total + 4 * trained, 4 * trained, 8 * trained


def memory_plan(
    backbone: Backbone,
    step: Step,
    *,
    dtype: str,
    zero_stage: int,
    num_devices: int,
    checkpointing: bool,
) -> MemoryPlan:
    """Bytes per device for one ZeRO stage and checkpointing choice."""
    counts = count_parameters(backbone, step.lora_r if step.lora else 0)
    weights, gradients, optimizer = _state_bytes(counts, dtype=dtype, lora=step.lora)
    d, a = num_devices, step.act_bytes
    optimizer //= d if zero_stage >= 1 else 1
    gradients //= d if zero_stage >= 2 else 1
    weights //= d if zero_stage >= 3 else 1
    gathered = a * (max(counts.embedding, counts.layer) + counts.layer)
    gathered = gathered if zero_stage == 3 and d > 1 else 0
    one_layer = layer_bytes(backbone, step)
    kept = a * backbone.hidden_size * step.tokens if checkpointing else one_layer
    saved = backbone.num_layers * kept + outside_layers_bytes(backbone, step)
    working = backward_working_bytes(backbone, step) + (one_layer if checkpointing else 0)
    # While backward runs, each finished layer's activations are freed and its
    # gradients made: the sum of both is largest at one end or the other.
    layer_gradients = 0 if step.lora else gradients * counts.layer // counts.total
    last_layer = (backbone.num_layers - 1) * layer_gradients + kept + working
    dynamic = max(saved + working, last_layer, gradients)
    return MemoryPlan(
        zero_stage=zero_stage,
        gradient_checkpointing=checkpointing,
        weights=weights,
        gradients=gradients,
        optimizer=optimizer,
        gathered=gathered,
        activations_saved=saved,
        activations_working=working,
        total=weights + gradients + optimizer + gathered + saved + working,
        peak=weights + optimizer + gathered + dynamic,
    )


def _backbone(config_or_path) -> Backbone:
    """The shapes of a `PRESETS` name, or of what `read_backbone` reads."""
    if isinstance(config_or_path, str):
        return read_backbone(PRESETS.get(config_or_path, config_or_path))
    return read_backbone(config_or_path)


def plan_training(
    config_or_path, settings: PlanSettings | None = None, /, **options: Any
) -> TrainingPlan:
    """The plan for a backbone given as a model directory, its `config.json`, a config
    dict or object, or a `PRESETS` name, made for `settings` with any of its fields given
    as `options` (`max_length=4096, micro_batch_pairs=1, lora=True`) set on top.
    `gradient_checkpointing` None turns it on only when the peak without it would not
    fit `device_memory`; the plan holds the value chosen."""
    s = replace(settings, **options) if settings else PlanSettings(**options)
    backbone = _backbone(config_or_path)
    peak, gpu, gpu_memory = _resolve_peak(s.peak_flops, s.dtype)
    memory_limit = s.device_memory if s.device_memory is not None else gpu_memory
    a = 2 if s.dtype == "bf16" else 4
    attention = "flash" if s.attn_implementation.startswith("flash") else s.attn_implementation
    packed = s.packing and not backbone.encoder and attention != "eager"
    length = (s.mean_length or s.max_length) if packed else s.max_length
    attention = "packed" if packed else attention
    step = Step(2 * s.micro_batch_pairs, length, a, s.lora, s.lora_r, attention)
    table = [
        memory_plan(
            backbone, step, dtype=s.dtype, zero_stage=z, num_devices=s.num_devices, checkpointing=c
        )
        for z in range(4)
        for c in (False, True)
    ]
    checkpointing = s.gradient_checkpointing
    if checkpointing is None:
        without = table[2 * s.zero_stage]
        checkpointing = memory_limit is not None and without.peak > memory_limit
    chosen = table[2 * s.zero_stage + int(checkpointing)]
    counts = count_parameters(backbone, s.lora_r if s.lora else 0)
    flops = step_flops(backbone, step, counts, checkpointing)
    seconds = flops / (s.mfu * peak) if peak else None
    resolved = replace(
        s,
        gradient_checkpointing=checkpointing,
        peak_flops=peak,
        device_memory=memory_limit,
        packing=packed,
    )
    return TrainingPlan(
        **asdict(resolved),
        backbone=config_or_path if isinstance(config_or_path, str) else "given config",
        model_type=backbone.model_type,
        parameters=counts.total,
        trainable_parameters=counts.lora + counts.head if s.lora else counts.total,
        lora_parameters=counts.lora,
        tokens_per_step=step.tokens,
        memory=chosen,
        table=table,
        flops_per_step=flops,
        gpu=gpu,
        step_seconds=seconds,
        pairs_per_second=s.num_devices * s.micro_batch_pairs / seconds if seconds else None,
        fits=None if memory_limit is None else chosen.peak <= memory_limit,
        notes=_notes("packed" if packed else s.attn_implementation, dtype=s.dtype, lora=s.lora),
    )


def _notes(attn_implementation: str, *, dtype: str, lora: bool) -> list[str]:
    attention = {
        "eager": "eager attention keeps every layer's L x L softmax per head (so does "
        "SDPA's math fallback)",
        "sdpa": "sdpa: a fused kernel that keeps no scores but, in a padded batch, each "
        "layer's copy of the L x L mask",
        "packed": "packed: the texts of a pass in one row, attention run per text, no "
        "padding and no L x L tensor",
    }.get(attn_implementation, f"{attn_implementation}: unpadded, no L x L tensor")
    texts = (
        "texts of mean_length (or max_length) packed"
        if attn_implementation == "packed"
        else "texts padded to max_length"
    )
    notes = [
        attention,
        f"{texts}; dropout off; one process per device; communication buffers not counted",
        "MFU of the FLOPs the device runs (attention and any recomputed forward "
        "included); orchrm train reports MFU of 4N + 2N_trained a token",
    ]
    if dtype == "bf16" and not lora:
        notes.append(
            "bf16 full fine-tune as DeepSpeed holds it (bf16 weights and gradients, fp32 "
            "master); orchrm train on one device keeps fp32 weights and gradients under "
            "autocast: the same 16 bytes a parameter, plus a bf16 copy of the weights"
        )
    return notes


def train_settings(train_config, gpu: bool | None = None) -> tuple[str, dict[str, Any]]:
    """The backbone and the `PlanSettings` fields of an `orchrm.training.config.
    TrainConfig`, each left open (auto, None) resolved by the config's own rules as
    `orchrm train` resolves it on a GPU (`gpu`; None: on this machine)."""
    import torch

    from orchrm.rmodel.precision import resolve_dtype
    from orchrm.rmodel.tokens import default_backbone

    backbone = train_config.backbone or default_backbone()
    cuda = torch.cuda.is_available() if gpu is None else gpu
    dtype = train_config.precision()
    if dtype == "auto":  # every GPU the plan knows runs bf16 fast
        dtype = "bf16" if cuda else resolve_dtype(dtype, torch.device("cpu"))
    parameters = count_parameters(_backbone(backbone)).total
    return backbone, {
        "max_length": train_config.max_length,
        "micro_batch_pairs": train_config.pairs_per_pass(),
        "dtype": dtype,
        "lora": train_config.lora,
        "lora_r": train_config.lora_r,
        "gradient_checkpointing": train_config.checkpointing(parameters, cuda),
        "attn_implementation": train_config.attn_implementation,
        "packing": train_config.packing,
        "peak_flops": train_config.peak_flops,
    }


def plan_from_train_config(train_config, **options: Any) -> TrainingPlan:
    """The plan of an `orchrm.training.config.TrainConfig` (`train_settings`), with any
    `PlanSettings` field given as `options` over it (`num_devices=8, zero_stage=3`); a
    GPU named as `peak_flops` plans for that GPU."""
    given = {k: v for k, v in options.items() if v is not None}
    gpu = True if isinstance(given.get("peak_flops"), str) else None
    backbone, settings = train_settings(train_config, gpu)
    return plan_training(backbone, **{**settings, **given})

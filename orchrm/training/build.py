"""The model `train` optimizes, as its config asks (LoRA, gradient checkpointing,
dropout off, the [CLS]-only last layer), what its saved copy says of the run, and the
save itself: written beside the previous model and swapped in at once
(`orchrm.training.output`)."""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

import torch

from orchrm.errors import ConfigError
from orchrm.jsonl import atomic_file, follow_umask_tree
from orchrm.orchestration import RM_RENDER_VERSION
from orchrm.orchestration.rm_text import DOMAIN_PREFIX
from orchrm.progress import library_bars_off
from orchrm.rmodel.backbone import load_backbone
from orchrm.rmodel.card import CARD, data_composition, model_card, write_model_card
from orchrm.rmodel.files import METADATA
from orchrm.rmodel.last_layer import read_first_position_only
from orchrm.training.config import TrainConfig
from orchrm.training.data import data_hash
from orchrm.training.output import folder_bytes, replace_folder, writing


def add_lora(model, r: int, alpha: int, dropout: float, *, peft_input_cast: bool = False):
    """Wrap `model` with LoRA adapters on its attention and MLP projections; the score
    head (`score` or `classifier`) stays fully trainable and is saved with them. The
    trained parameters are fp32; over a bf16 base, which runs under bf16 autocast, the
    adapters read their bf16 inputs as they are (`peft_input_cast`: as PEFT's default
    has it, each input cast up to fp32 first, then back down by autocast)."""
    from peft import LoraConfig, TaskType, get_peft_model

    heads = [n for n in ("score", "classifier") if hasattr(model, n)]
    config = LoraConfig(
        task_type=TaskType.SEQ_CLS,
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules="all-linear",
        modules_to_save=heads,
    )
    low = any(p.dtype == torch.bfloat16 for p in model.parameters())
    model = get_peft_model(model, config)
    # The trained parameters stay fp32 over a bf16 base: AdamW's updates at small
    # learning rates vanish below bf16's 8-bit mantissa.
    for p in model.parameters():
        if p.requires_grad:
            p.data = p.data.float()
    if low and not peft_input_cast:
        # A bf16 base trains and scores under bf16 autocast, which computes the adapters
        # in bf16 whatever their inputs: PEFT's cast of each input up to the adapters'
        # fp32 changes no result, and costs a copy of every linear layer's input, kept
        # for the backward pass (a third of the step's activations).
        for module in model.modules():
            if hasattr(module, "cast_input_dtype_enabled"):
                module.cast_input_dtype_enabled = False
    return model


def enable_gradient_checkpointing(model, lora: bool) -> None:
    """Recompute each layer's activations in the backward pass instead of keeping them.
    Non-reentrant checkpointing, which needs no input that requires grad; with LoRA the
    embeddings are frozen, so their output is made to require grad anyway, as PEFT
    recommends for either kind."""
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise ConfigError(
            f"{type(model).__name__} does not support gradient checkpointing: "
            "set gradient_checkpointing to False"
        )
    settings = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.24
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=settings)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=settings)
    if lora:
        model.enable_input_require_grads()


def disable_dropout(model) -> None:
    """Set every dropout of the model to zero (modules and attention kernels)."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        if hasattr(module, "dropout_prob"):  # attention layers that pass it to SDPA
            module.dropout_prob = 0.0


def load_for_training(config: TrainConfig, backbone: str, *, bf16: bool, cuda: bool):
    """(model, tokenizer, gradient checkpointing on) as `config` asks: a LoRA base in
    bf16 when computing in bf16, everything trained in fp32; a [CLS]-reading encoder
    computes its last layer at [CLS] only (`orchrm.rmodel.last_layer`)."""
    if config.attn_implementation == "flash_attention_2" and not (bf16 and cuda):
        raise ConfigError("attn_implementation flash_attention_2 needs CUDA and dtype bf16")
    dtype = torch.bfloat16 if bf16 and config.lora else torch.float32
    model, tokenizer = load_backbone(
        backbone,
        config.trust_remote_code,
        dtype=dtype,
        attn_implementation=config.attn_implementation,
        packing=config.packing,
    )
    # (ZeRO-3 loads each process a shard; DeepSpeed keeps the full size in ds_numel)
    parameters = sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters())
    checkpointing = config.checkpointing(parameters, cuda)
    if checkpointing:
        enable_gradient_checkpointing(model, config.lora)
    if config.lora:
        model = add_lora(model, config.lora_r, config.lora_alpha, config.lora_dropout)
    if config.disable_dropout:
        disable_dropout(model)
    read_first_position_only(model)
    return model, tokenizer, checkpointing


def param_groups(model, config: TrainConfig) -> list[dict]:
    """One AdamW group, or two when the score head gets its own learning rate."""
    prefix = getattr(model, "base_model_prefix", "")
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if config.head_lr is None or config.lora or not prefix:
        return [{"params": [p for _, p in named]}]
    head = [p for n, p in named if not n.startswith(prefix + ".")]
    body = [p for n, p in named if n.startswith(prefix + ".")]
    return [{"params": body}, {"params": head, "lr": config.head_lr}]


def model_metadata(
    config: TrainConfig,
    backbone: str,
    step: int,
    train_records: list[dict],
    train_pairs,
    val_pairs,
    metrics: dict,
    *,
    planned_steps: int,
    resumed_from_step: int | None,
) -> dict:
    """What a saved model's `orchrm.json` says of its training at `step`: the backbone,
    how far the run had got (`finished` stays False until `record_training`), the pair
    data (its hash and composition), the validation `metrics` with the reward
    statistics the scorer normalizes by, and the settings."""
    return {
        "backbone": backbone,
        "max_length": config.max_length,
        "step": step,
        "finished": False,
        "steps": step,
        "planned_steps": planned_steps,
        "resumed_from_step": resumed_from_step,
        "pair_data_hash": data_hash(train_records),
        # The scorer gives such a model the domain line too, as it was trained.
        "domain_in_text": any(r["prompt"].startswith(DOMAIN_PREFIX) for r in train_records),
        "data": data_composition(train_pairs, val_pairs),
        "metrics": metrics,
        "reward_mean": metrics.get("reward_mean", 0.0),
        "reward_std": metrics.get("reward_std", 1.0),
        "lora": config.lora,
        "config": {k: v for k, v in asdict(config).items() if k != "extra"},
        "extra": config.extra,
    }


def model_bytes(model, saved: Path) -> int:
    """About the bytes a save of `model` takes: the model saved at `saved` before, or
    its weights as held (a sharded model's whole size)."""
    if saved.is_dir():
        return folder_bytes(saved)
    return sum(getattr(p, "ds_numel", p.numel()) * p.element_size() for p in model.parameters())


def save_model(
    model, tokenizer, out: str | Path, metadata: dict, state_dict: dict | None = None
) -> Path:
    """Write a standard Hugging Face directory plus `orchrm.json` and its model card
    (`README.md`, `orchrm.rmodel.card`) into a temporary folder beside `out`, then put
    it at `out` in one step (`orchrm.training.output.replace_folder`): a reader, or a
    kill, finds the previous model or the new one whole. LoRA adapters are merged
    first. `state_dict` replaces the model's own weights (a consolidated copy of a
    sharded model). A write that fails (a full disk, no permission) is an `OutputError`
    naming `out`; the previous model stays as it was and nothing is left beside it."""
    out = Path(out)
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    with writing("the model", out):
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
        try:
            write_model_files(tmp, model, tokenizer, metadata, state_dict)
            replace_folder(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return out


def write_model_files(folder: Path, model, tokenizer, metadata: dict, state_dict) -> None:
    """The files of a saved model in `folder`: weights (`state_dict`, or the model's own),
    tokenizer, `orchrm.json` from `metadata` and the model card."""
    with library_bars_off():
        model.save_pretrained(folder, safe_serialization=True, state_dict=state_dict)
    tokenizer.save_pretrained(folder)
    metadata = {"render_version": RM_RENDER_VERSION, **metadata}
    (folder / METADATA).write_text(json.dumps(metadata, indent=2))
    (folder / CARD).write_text(model_card(metadata))
    follow_umask_tree(folder)  # mkdtemp's 0o700 (and safetensors' 0o600) keep it private


def record_training(model_dir: Path, summary: dict) -> None:
    """Mark the saved model's run finished in its `orchrm.json` (its steps, those
    planned, the step it resumed from) with the run's `summary` under "training"
    (rewritten atomically), and write its model card again."""
    path = model_dir / METADATA
    progress = {k: summary[k] for k in ("steps", "planned_steps", "resumed_from_step")}
    meta = json.loads(path.read_text()) | {"finished": True, **progress, "training": summary}
    with atomic_file(path) as f:
        json.dump(meta, f, indent=2)
    write_model_card(model_dir, meta)

"""The reward model: backbone loading, the saved checkpoint format, batched scoring.

A reward model is any Hugging Face `AutoModelForSequenceClassification` with one label.
Encoders (the offline MiniLM) read the [CLS] position; decoders (Llama, Qwen, as in
Skywork-Reward) read the last non-pad token, which Hugging Face does once the pad token
is set in the config, so `load_backbone` always sets it. A saved orchrm reward model is
a standard directory (safetensors weights, config, tokenizer) plus `orchrm.json`: the
rendering version its texts used (checked at load), the pair-data hash, metrics, and the
mean and spread of its rewards (for normalized rewards).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from orchrm.errors import ConfigError, OrchrmError
from orchrm.orchestration import (
    RM_RENDER_VERSION,
    TokenCounter,
    replace_surrogates,
)
from orchrm.rm.config import TrainConfig
from orchrm.rm.data import collate
from orchrm.rm.last_layer import read_first_position_only
from orchrm.rm.precision import resolve_dtype
from orchrm.rm.scorer import RenderingScorer

METADATA = "orchrm.json"


class ModelError(OrchrmError):
    """A reward model cannot be loaded or used as asked."""


class TokenizerCounter:
    """Tokens of a text without special tokens, by a Hugging Face fast tokenizer, with
    where each ends (`offset_mapping`): an `OffsetTokenCounter` for `render_for_rm`, which
    then tokenizes each piece it cuts once."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer

    def __call__(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def token_ends(self, text: str) -> list[int]:
        """The character offset just after each token of `text`."""
        encoded = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return [end for _, end in encoded["offset_mapping"]]


def token_counter(tokenizer) -> TokenCounter:
    """A `count_tokens` for `render_for_rm`: tokens of a text without special tokens. A
    fast tokenizer's counter also gives token ends; a slow one's only counts."""
    if getattr(tokenizer, "is_fast", False):
        return TokenizerCounter(tokenizer)

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    return count


def render_budget(tokenizer, max_length: int) -> tuple[int, TokenCounter]:
    """(`max_tokens`, `count_tokens`) for `render_for_rm` and `orchrm.pairs.export` so a
    text plus the tokenizer's special tokens fits `max_length`: the budget `OrchRM.render`
    scores with. Pairs exported with it train on exactly the texts the model scores."""
    return max_length - tokenizer.num_special_tokens_to_add(), token_counter(tokenizer)


def backbone_budget(
    backbone: str, max_length: int, trust_remote_code: bool = False
) -> tuple[int, TokenCounter]:
    """`render_budget` of a backbone by name or directory ('': the default MiniLM), for
    cutting pairs before a model of it exists; loads only the tokenizer."""
    from orchrm.rm.config import default_backbone

    name = backbone or default_backbone()
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as err:
        raise ModelError(f"cannot load the tokenizer of {name!r}: {err}") from None
    return render_budget(tokenizer, max_length)


def load_backbone(
    name: str,
    trust_remote_code: bool = False,
    *,
    dtype: torch.dtype = torch.float32,
    attn_implementation: str | None = None,
):
    """(model, tokenizer) with one output label and a pad token set; safetensors only.
    Weights are loaded in `dtype`; `attn_implementation` picks the attention kernel
    (sdpa, flash_attention_2, eager; None: the model's default)."""
    chosen = {} if attn_implementation is None else {"attn_implementation": attn_implementation}
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code)
        model = AutoModelForSequenceClassification.from_pretrained(
            name,
            num_labels=1,
            trust_remote_code=trust_remote_code,
            use_safetensors=True,
            dtype=dtype,
            **chosen,
        )
    except (OSError, ValueError, ImportError) as err:
        raise ModelError(f"cannot load backbone {name!r}: {err}") from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    rows = model.get_input_embeddings().num_embeddings
    if tokenizer.pad_token_id is None or tokenizer.pad_token_id >= rows:
        # The score is read before the first pad token: one the model cannot embed fails
        # every padded batch.
        raise ModelError(
            f"backbone {name!r}: pad token {tokenizer.pad_token!r} (id "
            f"{tokenizer.pad_token_id}) is not in the model's {rows}-token vocabulary"
        )
    model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def add_lora(model, r: int, alpha: int, dropout: float):
    """Wrap `model` with LoRA adapters on its attention and MLP projections; the score
    head (`score` or `classifier`) stays fully trainable and is saved with them."""
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
    model = get_peft_model(model, config)
    # The trained parameters stay fp32 over a bf16 base: AdamW's updates at small
    # learning rates vanish below bf16's 8-bit mantissa.
    for p in model.parameters():
        if p.requires_grad:
            p.data = p.data.float()
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
    computes its last layer at [CLS] only (`orchrm.rm.last_layer`)."""
    if config.attn_implementation == "flash_attention_2" and not (bf16 and cuda):
        raise ConfigError("attn_implementation flash_attention_2 needs CUDA and dtype bf16")
    dtype = torch.bfloat16 if bf16 and config.lora else torch.float32
    model, tokenizer = load_backbone(
        backbone,
        config.trust_remote_code,
        dtype=dtype,
        attn_implementation=config.attn_implementation,
    )
    checkpointing = config.gradient_checkpointing
    if checkpointing is None:
        # (ZeRO-3 loads each process a shard; DeepSpeed keeps the full size in ds_numel)
        big = sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters()) > 1e9
        checkpointing = cuda and (config.lora or big)
    if checkpointing:
        enable_gradient_checkpointing(model, config.lora)
    if config.lora:
        model = add_lora(model, config.lora_r, config.lora_alpha, config.lora_dropout)
    if config.disable_dropout:
        disable_dropout(model)
    read_first_position_only(model)
    return model, tokenizer, checkpointing


def save_model(
    model, tokenizer, out: str | Path, metadata: dict, state_dict: dict | None = None
) -> Path:
    """Write a standard Hugging Face directory plus `orchrm.json`, atomically (a
    temporary folder renamed into place). LoRA adapters are merged first. `state_dict`
    replaces the model's own weights (a consolidated copy of a sharded model)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    try:
        model.save_pretrained(tmp, safe_serialization=True, state_dict=state_dict)
        tokenizer.save_pretrained(tmp)
        (tmp / METADATA).write_text(
            json.dumps({"render_version": RM_RENDER_VERSION, **metadata}, indent=2)
        )
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def model_directory(path: str | Path) -> Path:
    """`path` when it holds a model (a `config.json`); for `orchrm train`'s output folder,
    its `model/`. Raises ModelError saying what is there instead, before any loader reads
    the path as a hub id."""
    path = Path(path)
    if (path / "config.json").is_file():
        return path
    if (path / "model" / "config.json").is_file():
        return path / "model"
    if not path.exists():
        raise ModelError(f"no reward model at {path}: no such directory")
    if path.is_file():
        raise ModelError(
            f"{path} is a file; a reward model is a directory (`orchrm train`'s OUT/model)"
        )
    inside = sorted(p.name for p in path.iterdir())[:8]
    raise ModelError(
        f"no reward model in {path}: it has no config.json (it holds "
        f"{', '.join(inside) or 'nothing'}); give `orchrm train`'s OUT/model"
    )


@dataclass
class OrchRM(RenderingScorer):
    """A loaded reward model that scores (question, orchestration) before anything runs.

    `score` and `score_batch` render each input with `render_for_rm` (the budget the
    model was trained with), sort by length, pad per batch, and return scores in input
    order. Unparseable harmony text gets `None`.
    """

    model: object
    tokenizer: object
    metadata: dict = field(default_factory=dict)
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    bf16: bool = False
    batch_size: int = 32

    @classmethod
    def load(
        cls,
        path: str | Path,
        device: str | None = None,
        dtype: str = "auto",
        trust_remote_code: bool = False,
        check_version: bool = True,
        batch_size: int = 32,
    ) -> OrchRM:
        """Load a saved reward model, or any sequence-classification model directory
        used off the shelf (then without orchrm metadata), to score in `dtype` (auto,
        bf16 or fp32; `orchrm.rm.precision`). Refuses a model trained on
        another rendering version unless `check_version` is False."""
        # Resolved first: a bad dtype or ORCHRM_BF16 costs no loading time.
        target = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        use_bf16 = resolve_dtype(dtype, target) == "bf16"
        path = model_directory(path)
        meta_file = path / METADATA
        metadata = json.loads(meta_file.read_text()) if meta_file.exists() else {}
        version = metadata.get("render_version")
        if check_version and version and version != RM_RENDER_VERSION:
            raise ModelError(
                f"{path} was trained on rendering {version!r}; this orchrm "
                f"renders {RM_RENDER_VERSION!r}: retrain, or load with "
                "check_version=False"
            )
        model, tokenizer = load_backbone(str(path), trust_remote_code)
        model.to(target).eval()
        return cls(model, tokenizer, metadata, target, use_bf16, batch_size)

    @property
    def dtype(self) -> str:
        """The precision this model scores in: bf16 (autocast) or fp32."""
        return "bf16" if self.bf16 else "fp32"

    @property
    def max_length(self) -> int:
        return int(self.metadata.get("max_length", 512))

    def score_texts(self, texts: list[str]) -> list[float]:
        """Raw reward of each text (already rendered), in input order."""
        return self.score_texts_with_tokens(texts)[0]

    def score_texts_with_tokens(self, texts: list[str]) -> tuple[list[float], list[int]]:
        """(raw reward, input tokens) of each text (already rendered), in input order,
        from one tokenization: the tokens are what the model read, special tokens
        included, so they are the verification cost of scoring the text."""
        if not texts:
            return [], []
        clean = [replace_surrogates(t) for t in texts]  # tokenizers reject lone surrogates
        encoded = self.tokenizer(clean, truncation=True, max_length=self.max_length)["input_ids"]
        scores = rewards(
            self.model,
            encoded,
            self.tokenizer.pad_token_id,
            self.batch_size,
            self.device,
            self.bf16,
        )
        return scores, [len(ids) for ids in encoded]


@torch.inference_mode()
def rewards(
    model,
    sequences: list[list[int]],
    pad_id: int,
    batch_size: int,
    device: torch.device,
    bf16: bool,
) -> list[float]:
    """The reward of each token sequence, in input order: longest first in batches padded
    to their own longest member, under `inference_mode` (and bf16 autocast if asked)."""
    order = sorted(range(len(sequences)), key=lambda i: -len(sequences[i]))
    out = [0.0] * len(sequences)
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        inputs = collate([sequences[i] for i in batch], pad_id)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(**{k: v.to(device) for k, v in inputs.items()}).logits
        for row, i in enumerate(batch):
            out[i] = float(logits[row, 0])
    return out

"""A reward model's backbone: loading any Hugging Face
`AutoModelForSequenceClassification` with one label (from a model directory, a hub id
available locally, or a GGUF file); a saved reward model loaded to score (`load_saved`);
padding, and the rewards of token sequences in batches (`rewards`). Its tokenizer alone,
the default MiniLM and the render budget are `orchrm.rmodel.tokens`, which needs no
model.

A reward model is any Hugging Face `AutoModelForSequenceClassification` with one label.
Encoders (the offline MiniLM) read the [CLS] position, and are padded on the right;
decoders (Llama, Qwen, as in Skywork-Reward) read the last real token, the last position
the attention mask keeps, whatever the pad id (`orchrm.rmodel.last_token`), and are
padded on their tokenizer's `padding_side` (`padding_side`). `load_backbone` sets a pad
token (the end-of-sequence token for a tokenizer without one) and sets the reading up,
so training and scoring read the same position. A backbone named by a `.gguf` file
(llama.cpp's format) is read from the model directory converted from it once
(`orchrm.rmodel.gguf_cache`); the model trained from it is saved like any other. What a
saved model's directory holds, and the checks that its files are whole before a loader
reads them, are `orchrm.rmodel.files`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from transformers import AutoModelForSequenceClassification

from orchrm.orchestration import RM_RENDER_VERSION
from orchrm.progress import library_bars_off
from orchrm.rmodel.files import (
    LOAD_ERRORS,
    ModelError,
    damaged,
    model_directory,
    read_metadata,
    saved_max_length,
)
from orchrm.rmodel.last_token import read_last_real_token, reads_last_real_token
from orchrm.rmodel.packed import enable_packing, packed_rewards, packs
from orchrm.rmodel.precision import resolve_dtype
from orchrm.rmodel.tokens import load_error, load_tokenizer, pretrained_source


def load_backbone(
    name: str,
    trust_remote_code: bool = False,
    *,
    dtype: torch.dtype = torch.float32,
    attn_implementation: str | None = None,
    packing: bool = True,
):
    """(model, tokenizer) with one output label and a pad token set, from a model
    directory or hub id (safetensors only) or a GGUF file (`is_gguf`: dequantized); a
    decoder reads its reward at the last real token (`read_last_real_token`) and, with
    `packing`, computes the texts of a batch packed into one row where it can
    (`orchrm.rmodel.packed.enable_packing`). Weights are loaded in `dtype`;
    `attn_implementation` picks the attention kernel (sdpa, flash_attention_2, eager;
    None: the model's default)."""
    chosen = {} if attn_implementation is None else {"attn_implementation": attn_implementation}
    source = pretrained_source(name)
    tokenizer = load_tokenizer(name, trust_remote_code, source)
    try:
        with library_bars_off():
            model = AutoModelForSequenceClassification.from_pretrained(
                source,
                num_labels=1,
                trust_remote_code=trust_remote_code,
                dtype=dtype,
                use_safetensors=True,
                **chosen,
            )
    except LOAD_ERRORS as err:
        raise load_error(name, "the model", err) from None
    except SafetensorError as err:  # damage the header checks cannot see
        raise damaged(Path(name), f"its weights cannot be read ({err})") from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    rows = model.get_input_embeddings().num_embeddings
    if tokenizer.pad_token_id is None or tokenizer.pad_token_id >= rows:
        # A pad token the model cannot embed fails every padded batch.
        raise ModelError(
            f"backbone {name!r}: pad token {tokenizer.pad_token!r} (id "
            f"{tokenizer.pad_token_id}) is not in the model's {rows}-token vocabulary"
        )
    model.config.pad_token_id = tokenizer.pad_token_id
    if read_last_real_token(model) and packing:
        enable_packing(model)
    return model, tokenizer


def padding_side(model, tokenizer) -> str:
    """The side `collate` pads `model`'s texts on: the tokenizer's `padding_side` for a
    model that reads the last real token (`reads_last_real_token`), which reads the same
    position either way; the right for any other model (an encoder reads the first
    position)."""
    side = getattr(tokenizer, "padding_side", "right")
    return side if side in ("left", "right") and reads_last_real_token(model) else "right"


@dataclass
class SavedModel:
    """A saved reward model loaded to compute rewards (`load_saved`)."""

    model: object
    """The sequence classifier, in eval mode on `device`."""
    tokenizer: object
    metadata: dict
    """Its `orchrm.json` ({} for a model used off the shelf)."""
    device: torch.device
    bf16: bool
    """Whether it computes in bf16 (autocast) rather than fp32."""

    @property
    def max_length(self) -> int:
        """Tokens per text it scores (`saved_max_length`)."""
        return saved_max_length(self.metadata)


def load_saved(
    path: str | Path,
    device: str | None = None,
    dtype: str = "auto",
    trust_remote_code: bool = False,
    check_version: bool = True,
) -> SavedModel:
    """A saved reward model (a model directory or `orchrm train`'s OUT, `model_directory`),
    or any sequence-classification model directory used off the shelf (then without
    orchrm metadata), on `device` (default: CUDA when there is one) to compute in `dtype`
    (auto, bf16 or fp32; `orchrm.rmodel.precision`). Refuses a model trained on another
    rendering version unless `check_version` is False, and a damaged or incomplete model
    directory (`DamagedModel`, naming the file)."""
    # Resolved first: a bad dtype or ORCHRM_BF16 costs no loading time.
    target = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    use_bf16 = resolve_dtype(dtype, target) == "bf16"
    path = model_directory(path)
    metadata = read_metadata(path)
    version = metadata.get("render_version")
    if check_version and version and version != RM_RENDER_VERSION:
        raise ModelError(
            f"{path} was trained on rendering {version!r}; this orchrm "
            f"renders {RM_RENDER_VERSION!r}: retrain, or load with "
            "check_version=False"
        )
    model, tokenizer = load_backbone(str(path), trust_remote_code)
    model.to(target).eval()
    return SavedModel(model, tokenizer, metadata, target, use_bf16)


def collate(
    sequences: list[list[int]], pad_id: int, side: str = "right"
) -> dict[str, torch.Tensor]:
    """Ids and attention mask padded to the longest sequence only, on the `side` given
    (right or left; `padding_side` says which a model takes)."""
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        where = slice(width - len(seq), width) if side == "left" else slice(0, len(seq))
        ids[row, where] = torch.tensor(seq, dtype=torch.long)
        mask[row, where] = 1
    return {"input_ids": ids, "attention_mask": mask}


@torch.inference_mode()
def rewards(
    model,
    sequences: list[list[int]],
    pad_id: int,
    batch_size: int,
    device: torch.device,
    bf16: bool,
    side: str = "right",
) -> list[float]:
    """The reward of each token sequence, in input order: longest first in batches of
    `batch_size`, each packed into one row for a model that packs (`packs`), else padded
    to its own longest member on `side` (`padding_side`), under `inference_mode` (and
    bf16 autocast if asked)."""
    order = sorted(range(len(sequences)), key=lambda i: -len(sequences[i]))
    out = [0.0] * len(sequences)
    packed = packs(model)
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        texts = [sequences[i] for i in batch]
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            if packed:
                scores = packed_rewards(model, texts, device)
            else:
                inputs = collate(texts, pad_id, side)
                scores = model(**{k: v.to(device) for k, v in inputs.items()}).logits[:, 0]
        for row, i in enumerate(batch):
            out[i] = float(scores[row])
    return out

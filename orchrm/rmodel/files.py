"""A saved reward model's directory as files: where the model is (`model_directory`),
its `orchrm.json` metadata (`read_metadata`, `saved_max_length`), the checks that every
file a loader reads is whole, and the errors of a model that cannot be used. Light: no
PyTorch.

A saved orchrm reward model is a standard Hugging Face directory (safetensors weights,
config, tokenizer) plus `orchrm.json`: the rendering version its texts used (checked at
load), the pair-data hash, metrics, and the mean and spread of its rewards (for
normalized rewards).

Before a loader reads a model directory or a GGUF file, its files are checked whole
(`check_model_files`, `check_gguf`): what an interrupted copy or save leaves (weights cut
short or empty, weights missing beside their config, a half-written JSON file) is a
`DamagedModel` naming the file, instead of whatever the loader would raise.
"""

from __future__ import annotations

import json
from pathlib import Path

from orchrm.errors import MissingInput, OrchrmError

METADATA = "orchrm.json"
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
LOAD_ERRORS = (OSError, ValueError, ImportError, NotImplementedError)
"""What transformers raises for a backbone it cannot load (a missing file, an unknown
architecture, a missing package)."""


class ModelError(OrchrmError):
    """A reward model cannot be loaded or used as asked."""


class NoModel(ModelError, MissingInput):
    """No reward model where the user pointed: no such directory, a file, or a directory
    without `config.json` (exit status 3, as any missing input)."""


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


def model_directory(path: str | Path) -> Path:
    """`path` when it holds a model (a `config.json`); for `orchrm train`'s output folder,
    its `model/`. Raises NoModel (exit status 3, as any input that cannot be read)
    saying what is there instead, before any loader reads the path as a hub id."""
    path = Path(path)
    if (path / "config.json").is_file():
        return path
    if (path / "model" / "config.json").is_file():
        return path / "model"
    if not path.exists():
        raise NoModel(f"no reward model at {path}: no such directory")
    if path.is_file():
        raise NoModel(
            f"{path} is a file; a reward model is a directory (`orchrm train`'s OUT/model)"
        )
    inside = sorted(p.name for p in path.iterdir())[:8]
    raise NoModel(
        f"no reward model in {path}: it has no config.json (it holds "
        f"{', '.join(inside) or 'nothing'}); give `orchrm train`'s OUT/model"
    )


def saved_max_length(metadata: dict) -> int:
    """The tokens per text a model with `orchrm.json` `metadata` scores: the
    `max_length` it was trained with, 512 for a model without one."""
    return int(metadata.get("max_length", 512))

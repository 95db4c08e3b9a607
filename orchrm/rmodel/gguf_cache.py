"""A GGUF file (llama.cpp's format) converted once into a model directory that every later
load reads: transformers' GGUF loader parses and dequantizes the whole file on every
load, model and tokenizer each (15 s for the 98 MB SmolLM2-135M, docs/results.md), where
a safetensors directory loads in about a second.

The directory holds what transformers reads from the GGUF as a causal language model
(its config, its weights dequantized to fp32, exactly the values the GGUF loader gives;
4 bytes a parameter on disk) and its tokenizer. A sequence classifier loaded from it
gets the same base weights and a new reward head, initialized from torch's generator as
it would be from the GGUF: the conversion draws nothing from that generator.

Conversions live under the cache folder (`cache_root`: `ORCHRM_CACHE`, else
`$XDG_CACHE_HOME/orchrm`, else `~/.cache/orchrm`), in `gguf/NAME-KEY/`, where KEY hashes
everything that decides the result: the file's SHA-256 and the versions of
transformers, gguf and torch, and of this conversion. A changed file or library makes a
new conversion; deleting the folder only costs the next load its conversion time. A
conversion is written to a temporary folder and renamed into place, under a lock per key:
processes that load one GGUF at once convert it once, and none reads a half-written one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from orchrm.errors import ConfigError

CONVERSION_VERSION = 1
"""Raised when what a conversion writes changes, so older conversions are not read."""
SOURCE = "orchrm-gguf.json"
"""The file in a conversion that says what it was converted from."""


class ConversionError(Exception):
    """transformers could not read `what` ("the tokenizer", "the model") of a GGUF file;
    `cause` is its error."""

    def __init__(self, what: str, cause: Exception) -> None:
        super().__init__(f"{what}: {cause}")
        self.what, self.cause = what, cause


def cache_root() -> Path:
    """The folder orchrm caches in: `ORCHRM_CACHE`, else `$XDG_CACHE_HOME/orchrm`, else
    `~/.cache/orchrm`."""
    if os.environ.get("ORCHRM_CACHE"):
        return Path(os.environ["ORCHRM_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "orchrm"


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "none"


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def conversion_key(path: Path) -> dict:
    """Everything that decides a conversion of the GGUF at `path`."""
    return {
        "sha256": file_sha256(path),
        "transformers": _version("transformers"),
        "gguf": _version("gguf"),
        "torch": _version("torch"),
        "conversion": CONVERSION_VERSION,
    }


def dequantized() -> dict:
    """The `from_pretrained` argument that unpacks every GGUF weight into a dense tensor
    (transformers can keep some architectures' blocks packed, which trains and saves
    nothing). Transformers without `GgufConfig` always unpacks them."""
    try:
        from transformers import GgufConfig
    except ImportError:
        return {}
    return {"quantization_config": GgufConfig(dequantize=True)}


def _whole(folder: Path) -> bool:
    """Whether `folder` is a finished conversion: its source record, config and weights
    are there and its files are whole."""
    from orchrm.rmodel.files import ModelError, check_model_files

    if not (folder / SOURCE).is_file() or not (folder / "config.json").is_file():
        return False
    try:
        check_model_files(folder)
    except ModelError:
        return False
    return True


def converted(path: Path) -> Path:
    """The model directory converted from the GGUF at `path` (made now when there is none
    in the cache, once the file is known whole: `check_gguf`). ConversionError when
    transformers cannot read it; DamagedModel when it is cut short; ConfigError when the
    cache folder cannot be written."""
    from orchrm.rmodel.files import check_gguf

    key = conversion_key(path)
    name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    folders = cache_root() / "gguf"
    folder = folders / f"{path.stem}-{name}"
    if _whole(folder):
        return folder
    try:
        folders.mkdir(parents=True, exist_ok=True)
        from filelock import FileLock

        with FileLock(str(folders / f"{folder.name}.lock")):
            if _whole(folder):  # another process converted it while this one waited
                return folder
            check_gguf(path)
            shutil.rmtree(folder, ignore_errors=True)  # a damaged conversion
            scratch = folders / f".{folder.name}.{os.getpid()}"
            shutil.rmtree(scratch, ignore_errors=True)
            print(f"converting {path} into {folder}, once: later loads read that",
                  file=sys.stderr, flush=True)  # fmt: skip
            try:
                _convert(path, scratch, key)
                os.replace(scratch, folder)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    except OSError as err:
        raise ConfigError(
            f"cannot write the GGUF conversion of {path} under {folders}: "
            f"{err.strerror or err}; free space there or set ORCHRM_CACHE to a writable folder"
        ) from None
    return folder


def _convert(path: Path, out: Path, key: dict) -> None:
    """Read the GGUF's tokenizer and causal LM (dequantized) and save them in `out`,
    with a record of the source; torch's generator is left as it was."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from orchrm.progress import library_bars_off
    from orchrm.rmodel.files import LOAD_ERRORS

    source = {"pretrained_model_name_or_path": str(path.absolute().parent), "gguf_file": path.name}
    with torch.random.fork_rng(devices=[]), library_bars_off():
        try:
            tokenizer = AutoTokenizer.from_pretrained(**source)
        except LOAD_ERRORS as err:
            raise ConversionError("the tokenizer", err) from None
        try:
            model = AutoModelForCausalLM.from_pretrained(**source, **dequantized())
        except LOAD_ERRORS as err:
            raise ConversionError("the model", err) from None
        out.mkdir(parents=True)
        model.save_pretrained(out, safe_serialization=True)
        tokenizer.save_pretrained(out)
    record = {"converted_from": str(path.absolute()), **key}
    (out / SOURCE).write_text(json.dumps(record, indent=2) + "\n")

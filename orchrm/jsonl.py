"""JSONL files: read with line numbers and precise errors, write atomically."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class BadLine:
    """A line that is not JSON: the decoder's message and the character it stopped at."""

    message: str
    position: int | None


def jsonl_values(lines: Iterable[str]) -> Iterator[tuple[int, object]]:
    """(line number, value) for each non-blank line; a line that is not JSON comes back
    as a `BadLine` in its place, so every caller can count it instead of losing it."""
    for line_no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield line_no, json.loads(line)
        except ValueError as err:
            yield line_no, BadLine(str(err), getattr(err, "pos", None))


def read_jsonl(path: str | Path) -> Iterator[tuple[int, object]]:
    """(line number, value) for each non-blank line; a line that is not JSON raises
    ValueError naming the file and line."""
    with open(path, encoding="utf-8") as f:
        for line_no, value in jsonl_values(f):
            if isinstance(value, BadLine):
                raise ValueError(f"{path}:{line_no}: invalid JSON ({value.message})")
            yield line_no, value


def write_jsonl(records: Iterable[dict], path: str | Path) -> None:
    """Write one JSON value per line, atomically: a temporary file in the same folder,
    renamed at the end, so an interrupted write never leaves a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for record in records:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

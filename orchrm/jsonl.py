"""JSONL files: read as bytes with every line accounted for, write atomically (any
output file: `atomic_file`, with the mode the umask gives).

A file is untrusted: it is read as bytes and split on `\\n` here (a `\\r` before it is
dropped, a missing final newline is fine, a UTF-8 byte-order mark at the start is
skipped), and each line is decoded on its own, so one bad line fails only itself. A
line that cannot be a record comes back as a `BadLine` carrying one of `LINE_REASONS`:

- `not_utf8`: the line's bytes are not UTF-8;
- `too_large`: the line is longer than `MAX_LINE_BYTES` (skipped without being held);
- `too_deep`: JSON nested deeper than `MAX_JSON_DEPTH` (refused before decoding);
- `invalid_json`: not one JSON value;
- `bad_field`: a string holds a lone surrogate (`"\\ud800"`), which is not Unicode
  text and could not be stored or printed.

Every check runs in time linear in the line's size.
"""

from __future__ import annotations

import errno
import json
import os
import re
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from orchrm.errors import InputError, OutputError

MAX_LINE_BYTES = 16 * 1024 * 1024
"""Longest JSONL line read, in bytes without its end of line; a longer line is counted
as `too_large` and skipped while it is read, so memory stays bounded."""
MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
"""Largest file read whole (a `.json` list of records, a text file of one orchestration,
a training-step file); a larger one is `too_large`."""
MAX_JSON_DEPTH = 128
"""Deepest nesting of JSON arrays and objects accepted (as serde_json's default); deeper
values are `too_deep`, refused before the decoder could recurse."""
LINE_REASONS = ("not_utf8", "too_large", "too_deep", "invalid_json", "bad_field")
"""Every reason a line can be refused for, before any format looks at it."""

_SAID = {
    "not_utf8": "not UTF-8",
    "too_large": "line too long",
    "too_deep": "JSON nested too deep",
    "invalid_json": "invalid JSON",
    "bad_field": "invalid text",
}
_CHUNK_BYTES = 1 << 20
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class BadLine:
    """A line (or whole file) that is not a JSON value we accept: why, and where.

    `position` is a byte offset for `not_utf8`, a character offset otherwise, or None.
    """

    reason: str
    message: str
    position: int | None = None


class _Blank:
    """The marker for a line holding only whitespace: a line, but not a record."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "BLANK"


BLANK = _Blank()


# --------------------------------------------------------------------------- reading


@dataclass(kw_only=True)
class FileSummary:
    """What reading one file of records found: `records` counted, `blank_lines` besides
    them (a JSONL file's every line is one or the other), and `problems` saying where and
    why a record was refused. Subclasses add the counts of what they did with them."""

    path: str
    records: int = 0
    blank_lines: int = 0
    problems: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        """Plain JSON-ready form: counters sorted by key, `problems` after the counts."""
        out = {
            k: dict(sorted(v.items())) if isinstance(v, Counter) else v
            for k, v in self.__dict__.items()
        }
        out["problems"] = out.pop("problems")
        return out


def read_values(path: str | Path) -> Iterator[tuple[int, object]]:
    """(line number, value) for every line of a JSONL file: the decoded JSON value, a
    `BadLine`, or `BLANK`. Raises OSError only when the file cannot be opened or read."""
    with open(path, "rb") as f:
        for line_no, raw in split_lines(f):
            if isinstance(raw, int):
                yield (
                    line_no,
                    BadLine(
                        "too_large", f"line of {raw} bytes, over the {MAX_LINE_BYTES}-byte limit"
                    ),
                )
            else:
                yield line_no, parse_line(raw)


def read_jsonl(path: str | Path) -> Iterator[tuple[int, object]]:
    """(line number, value) for each non-blank line; a line that is not an accepted
    JSON value raises ValueError naming the file, the line and the reason."""
    for line_no, value in read_values(path):
        if isinstance(value, BadLine):
            raise InputError(f"{path}:{line_no}: {_SAID[value.reason]} ({value.message})")
        if value is not BLANK:
            yield line_no, value


def split_lines(f: BinaryIO) -> Iterator[tuple[int, bytes | int]]:
    """(line number, the line's bytes without its end of line) for each line of a
    binary file; a line over `MAX_LINE_BYTES` is replaced by its size and not kept."""
    parts: list[bytes] = []
    size, line_no, first = 0, 1, True
    while chunk := f.read(_CHUNK_BYTES):
        if first:
            chunk, first = chunk.removeprefix(_BOM), False
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            size = _keep(parts, size, chunk[start:end])
            yield line_no, size if size > MAX_LINE_BYTES else _joined(parts)
            parts, size, line_no, start = [], 0, line_no + 1, end + 1
        size = _keep(parts, size, chunk[start:])
    if size:  # the last line has no newline
        yield line_no, size if size > MAX_LINE_BYTES else _joined(parts)


def _keep(parts: list[bytes], size: int, piece: bytes) -> int:
    """Add a piece of the current line unless the line is already over the limit."""
    size += len(piece)
    if size > MAX_LINE_BYTES:
        parts.clear()
    elif piece:
        parts.append(piece)
    return size


def _joined(parts: list[bytes]) -> bytes:
    line = b"".join(parts)
    return line[:-1] if line.endswith(b"\r") else line


def parse_line(raw: bytes) -> object:
    """One line's bytes -> its JSON value, `BLANK`, or a `BadLine`."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return BadLine(
            "not_utf8", f"invalid UTF-8 byte 0x{raw[err.start]:02x} at byte {err.start}", err.start
        )
    if not text or text.isspace():
        return BLANK
    return loads(text)


def loads(text: str, *, surrogates: bool = True) -> object:
    """`json.loads` behind the checks that keep it safe on untrusted text: nesting
    depth first, lone surrogates after (unless `surrogates` is False: the caller checks
    each part with `lone_surrogate`). Returns the value or a `BadLine`."""
    deep = _too_deep_at(text, MAX_JSON_DEPTH)
    if deep is not None:
        return BadLine(
            "too_deep", f"JSON nested deeper than {MAX_JSON_DEPTH} levels at character {deep}", deep
        )
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        return BadLine("invalid_json", str(err), err.pos)
    except ValueError:  # an integer over Python's digit limit (sys.get_int_max_str_digits)
        return _number_too_long(text)
    if surrogates and (_SURROGATE_ESCAPE.search(text) or _SURROGATE.search(text)):
        problem = lone_surrogate(value)
        if problem:
            return BadLine("bad_field", problem)
    return value


def _number_too_long(text: str) -> BadLine:
    """The `BadLine` of JSON holding an integer longer than Python converts, naming where."""
    limit = sys.get_int_max_str_digits()
    found = re.search(rf"[0-9]{{{limit + 1},}}", text)
    where = f" (at character {found.start()})" if found else ""
    message = f"number too long: an integer has more than {limit:,} digits{where}"
    return BadLine("invalid_json", message, found.start() if found else None)


def read_document(path: str | Path) -> object:
    """The JSON value of a whole file (a `.json` list of records, a training-step file),
    or a `BadLine` for the file. Lone surrogates are left for the caller to find record
    by record (`lone_surrogate`), so one bad record fails only itself. Raises OSError
    only when the file cannot be read."""
    text = read_text(path)
    if isinstance(text, BadLine):
        return text
    if not text or text.isspace():
        return BadLine("invalid_json", "the file is empty", 0)
    return loads(text, surrogates=False)


def read_text(path: str | Path) -> str | BadLine:
    """A whole file as text (UTF-8, at most `MAX_DOCUMENT_BYTES`), or a `BadLine`."""
    with open(path, "rb") as f:
        raw = f.read(MAX_DOCUMENT_BYTES + 1)
    if len(raw) > MAX_DOCUMENT_BYTES:
        return BadLine("too_large", f"file over the {MAX_DOCUMENT_BYTES}-byte limit")
    raw = raw.removeprefix(_BOM)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return BadLine(
            "not_utf8", f"invalid UTF-8 byte 0x{raw[err.start]:02x} at byte {err.start}", err.start
        )


# --------------------------------------------------------------------------- checks

_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)  # possessive: no backtracking
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _too_deep_at(text: str, limit: int) -> int | None:
    """Where the running depth of JSON text (openers minus closers outside strings)
    first passes `limit`, or None. One left-to-right pass: each string is skipped whole
    (escapes included) by one possessive, anchored match; the text between strings is
    counted at C speed when it cannot reach the limit, character by character when it
    might. Text the decoder would refuse earlier may be called too deep: refused either
    way."""
    if text.count("[") + text.count("{") <= limit:
        return None
    depth, pos = 0, 0
    while True:
        quote = text.find('"', pos)
        segment = text[pos:] if quote < 0 else text[pos:quote]
        opens = segment.count("[") + segment.count("{")
        if depth + opens <= limit:
            depth += opens - segment.count("]") - segment.count("}")
        else:
            for at, char in enumerate(segment):
                if char in "[{":
                    depth += 1
                    if depth > limit:
                        return pos + at
                elif char in "]}":
                    depth -= 1
        string = _STRING.match(text, quote) if quote >= 0 else None
        if string is None:  # the end, or an unterminated string: the decoder stops there
            return None
        pos = string.end()


def lone_surrogate(value: object, where: str = "") -> str | None:
    """A message naming the first string (or key) of a decoded JSON value that holds a
    lone surrogate, or None. Recursion is bounded by `MAX_JSON_DEPTH`."""
    if isinstance(value, str):
        found = _SURROGATE.search(value)
        if found is None:
            return None
        return (
            f"{where or 'the value'}: text holds a lone surrogate "
            f"(\\u{ord(found.group()):04x}) at character {found.start()}, which is not "
            "valid Unicode"
        )
    if isinstance(value, dict):
        for key, item in value.items():
            name = f"{where}.{_shown(key)}" if where else _shown(key)
            problem = lone_surrogate(key, f"{name} (the key)") or lone_surrogate(item, name)
            if problem:
                return problem
    elif isinstance(value, list):
        for n, item in enumerate(value):
            problem = lone_surrogate(item, f"{where}[{n}]")
            if problem:
                return problem
    return None


def _shown(key: str) -> str:
    """A key as it can be printed: escaped surrogates, at most 40 characters."""
    text = printable(key)
    return text if len(text) <= 40 else text[:37] + "..."


def printable(text: str | Path) -> str:
    """Text (or a path) as it can be printed and written as UTF-8: lone surrogates, as
    in a file name whose bytes are not UTF-8, come out escaped (`\\udcff`)."""
    return str(text).encode("utf-8", "backslashreplace").decode("utf-8")


# --------------------------------------------------------------------------- writing


def write_jsonl(records: Iterable[dict], path: str | Path) -> None:
    """Write one JSON value per line, atomically (`atomic_file`): an interrupted write
    never leaves a half-written file."""
    with atomic_file(path) as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


def append_jsonl(records: Iterable[dict], path: str | Path) -> None:
    """Append one JSON value per line to `path` (created with the mode a plain `open`
    gives), whole lines in one `write` to a file opened for appending: a crash can tear
    only the last line, which `read_values` reports as `invalid_json`, and a torn line
    is ended before the next append, so it costs only itself."""
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
    if not data:
        return
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    except OSError as err:
        raise output_error(path, err) from None


_UMASK_LOCK = threading.Lock()


def process_umask() -> int:
    """The process umask, read from /proc/self/status where Linux shows it (nothing
    changes); elsewhere set to 0o077 and restored at once, under a lock."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        old = os.umask(0o077)
        os.umask(old)
    return old


def follow_umask(path: str | Path, folder: bool = False) -> None:
    """Give `path` the mode a plain `open` (or `mkdir`) would have given it: 0o666 (a
    folder 0o777) less the process umask. Temporary files and folders are created 0o600
    and 0o700, which an atomic write would otherwise keep."""
    os.chmod(path, (0o777 if folder else 0o666) & ~process_umask())


def follow_umask_tree(folder: str | Path) -> None:
    """`follow_umask` for `folder` and everything under it: a folder written into a
    temporary one, where some writers (safetensors) also create their files 0o600."""
    for path in [Path(folder), *Path(folder).rglob("*")]:
        if not path.is_symlink():
            follow_umask(path, folder=path.is_dir())


def output_error(path: str | Path, err: OSError) -> OutputError:
    """The one-line error for an output that cannot be written, naming the user's
    `path` (not a temporary file beside it) and what to do."""
    shown = printable(path)
    if isinstance(err, IsADirectoryError) or Path(path).is_dir():
        return OutputError(f"{shown} is a folder: give the path of a file to write")
    if isinstance(err, (FileExistsError, NotADirectoryError)) and err.filename:
        return OutputError(
            f"cannot write {shown}: {printable(err.filename)} is a file, where a folder "
            "must be: give a path in a folder"
        )
    reason = err.strerror or str(err)
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return OutputError(f"cannot write {shown}: {reason}: free space or give another disk")
    return OutputError(f"cannot write {shown}: {reason}: give a path in a writable folder")


@contextmanager
def atomic_file(path: str | Path, mode: str = "w") -> Iterator:
    """An open temporary file beside `path`, renamed onto it when the block ends: a
    reader sees the old file or the whole new one. The file gets the mode a plain
    `open` would give (an existing file's mode, else 0o666 less the umask). An OS error
    while writing becomes an `OutputError` naming `path`; the temporary file is removed
    whatever happens."""
    path = Path(path)
    try:
        if path.is_dir():
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:
        raise output_error(path, err) from None
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
            yield f
        try:
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        except FileNotFoundError:
            follow_umask(tmp)
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OutputError) or err.filename not in (None, tmp, str(path)):
            raise  # another output's, or another file the block read: not this one's
        raise output_error(path, err) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

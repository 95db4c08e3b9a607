"""Which adapter a log needs: read from a folder's layout or from the first record of a
known format, and, when none matches, what the first record lacks (a misspelt field named)."""

from __future__ import annotations

import difflib
from pathlib import Path

from orchrm.jsonl import read_values
from orchrm.store.adapters import FormatError
from orchrm.tasks.run import RUN_SCHEMA


def detect_adapter(path: Path) -> str:
    """The adapter a file or folder needs, from its layout or from the first JSON object
    of a known format among its first `SNIFF_LINES` lines (bad lines are skipped).
    Raises FormatError, or OSError when the file cannot be read."""
    if path.is_dir():
        if (path / "generated_code").is_dir():
            return "steps"
        raise FormatError(f"{path}: a folder must hold generated_code/ (MAS-Orchestra steps)")
    first = None
    for line, value in read_values(path):
        found = _format_of(value) if isinstance(value, dict) else None
        if first is None and isinstance(value, dict):
            first = (line, value)
        if found or line >= SNIFF_LINES:
            if found:
                return found
            break
    raise FormatError(f"cannot detect the format of {path}: " + _near_miss(first))


KNOWN_FIELDS = ("schema", "chosen", "rejected", "mas_code", "thinking", "question")
"""The fields `_format_of` recognizes a format by."""


def _near_miss(first: tuple[int, dict] | None) -> str:
    """What the first JSON object lacks to be a known format, naming a misspelt field."""
    if first is None:
        return "no JSON object in it; give --adapter (generic needs --map)"
    line, record = first
    keys = [k for k in record if isinstance(k, str)]
    shown = ", ".join(repr(k) for k in keys[:12]) + (" ..." if len(keys) > 12 else "")
    hints = []
    for key in keys:
        close = difflib.get_close_matches(key, KNOWN_FIELDS, n=1, cutoff=0.8)
        if close and close[0] not in record:
            hints.append(f"{key!r} (did you mean {close[0]!r}?)")
    return (
        f"line {line} has fields {shown or 'none'}"
        + (f"; {', '.join(hints)}" if hints else "")
        + f"; an orchrm log has schema {RUN_SCHEMA!r}, a preference record chosen and "
        "rejected, a diagram record mas_code or thinking and question; or give --adapter "
        "(generic needs --map)"
    )


SNIFF_LINES = 1000
"""Lines `detect_adapter` reads at most to find a record of a known format."""


def _format_of(first: dict) -> str | None:
    if first.get("schema") == RUN_SCHEMA:
        return "orchrm"
    if "chosen" in first and "rejected" in first:
        return "preference"
    if "mas_code" in first or ("thinking" in first and "question" in first):
        return "diagram"
    return None

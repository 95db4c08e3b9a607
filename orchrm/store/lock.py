"""Who holds a store: the process a DuckDB lock error names.

DuckDB takes an exclusive file lock for a read-write connection and a shared one for a
read-only connection, so a second writer, or a reader while a writer works, cannot
open the file. Its error says `Could not set lock on file "PATH": Conflicting lock is
held in PROGRAM (PID N)` on POSIX systems; elsewhere the holder may go unnamed. The text
is read with plain substring searches, in time linear in its length."""

from __future__ import annotations

from dataclasses import dataclass

from orchrm.jsonl import printable

LOCK_MARKERS = ("Could not set lock on file", "Conflicting lock is held")
"""What a DuckDB error says when another process holds the file's lock."""
_HELD_IN = "Conflicting lock is held in "
_PID = "(PID "
_MAX_PID_DIGITS = 10
"""Longer runs of digits are no process id (and `int` refuses very long ones)."""
_MAX_PROGRAM_CHARS = 500


@dataclass(frozen=True)
class LockHolder:
    """The process that holds a store's lock, as far as DuckDB names it."""

    pid: int | None = None
    """Its process id (None: DuckDB did not say)."""
    program: str | None = None
    """The program it runs, as DuckDB names it (an interpreter's path for orchrm)."""

    def __str__(self) -> str:
        if self.pid is None:
            return "DuckDB does not say which"
        return f"PID {self.pid}" + (f", {self.program}" if self.program else "")


def lock_holder(text: str) -> LockHolder | None:
    """The holder a DuckDB error text names; None when the text is not about a lock
    another process holds. A text that names no holder gives an empty `LockHolder`."""
    if not any(marker in text for marker in LOCK_MARKERS):
        return None
    held_in = text.find(_HELD_IN)
    start = held_in + len(_HELD_IN) if held_in >= 0 else 0
    mark = text.find(_PID, start)
    pid = _pid_at(text, mark + len(_PID)) if mark >= 0 else None
    program = _one_line(text[start:mark].strip()) if held_in >= 0 and mark > start else None
    return LockHolder(pid, program or None)


def _pid_at(text: str, start: int) -> int | None:
    """The process id written from `start` up to a closing parenthesis, else None."""
    end = start
    while end < len(text) and end - start <= _MAX_PID_DIGITS and "0" <= text[end] <= "9":
        end += 1
    closed = end < len(text) and text[end] == ")"
    return int(text[start:end]) if closed and 0 < end - start <= _MAX_PID_DIGITS else None


def _one_line(text: str) -> str:
    """`text` fit for a one-line message: line breaks escaped, lone surrogates too, and
    cut to a bounded length."""
    if len(text) > _MAX_PROGRAM_CHARS:
        text = text[: _MAX_PROGRAM_CHARS - 3] + "..."
    return printable(text.replace("\r", "\\r").replace("\n", "\\n"))

"""What every `orchrm` command prints with: the consoles, user errors, problem lists."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from orchrm.errors import OrchrmError
from orchrm.jsonl import printable

# No wrapping at the console's width: a message or path is one line in a file or a pipe
# (`grep error:` finds it whole) and on a terminal, which folds long lines itself.
# Tables still fit the width.
console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)

EXAMPLES = 5
"""Problems `parse`, `ingest` and `score` print without --details (the first ones)."""


USAGE, UNREADABLE, UNWRITABLE, BUSY = 2, 3, 4, 5
"""Exit statuses by kind of failure, the same in every command (docs/robustness.md#exit-status):
a setting or input that cannot be used; an input file or folder that cannot be read; an
output that cannot be written; something another process holds (a store's lock). 0 is
success and 1 a bug (its traceback)."""


def error(message: str) -> None:
    """A user error that does not stop the command: one unwrapped line on stderr (the
    message is not read as markup, so paths with brackets print as they are)."""
    err_console.print(Text.assemble(("error:", "red"), " ", message), highlight=False)


def fail(message: str, code: int = USAGE) -> None:
    """A user error: its line (`error`), exit status `code`."""
    error(message)
    raise typer.Exit(code)


@contextmanager
def user_errors() -> Iterator[None]:
    """A user's error (`OrchrmError`, or an OS error about a named file) as one line on
    stderr and the exit status of its kind (`USAGE`, `UNREADABLE`, `UNWRITABLE`);
    anything else is a bug and keeps its traceback (exit status 1)."""
    try:
        yield
    except OrchrmError as err:
        fail(str(err), err.exit_code)
    except OSError as err:
        # An OS error that names a file is about the user's files or disk; one without a
        # file name comes from deeper down and stays a traceback. Outputs go through
        # jsonl.atomic_file (OutputError), so the rest are inputs, but for a disk that is
        # full or read-only.
        if err.filename is None:
            raise
        full = err.errno in (errno.EROFS, errno.ENOSPC, errno.EDQUOT)
        fail(f"{err.filename}: {err.strerror or err}", UNWRITABLE if full else UNREADABLE)


def warn(message: str) -> None:
    """Something the user should know that does not stop the command: one line on stderr."""
    err_console.print(Text.assemble(("warning:", "yellow"), " ", message), highlight=False)


def report_unreadable(path: Path, err: OSError) -> dict:
    """Report a file that cannot be read at all (on stderr) and describe it for JSON."""
    if isinstance(err, FileNotFoundError):
        message = f"no such file: {printable(path)}"
    else:
        message = f"cannot read {printable(path)}: {err.strerror or err}"
    error(message)
    return {"path": printable(path), "error": message}


def exit_if_unreadable(unreadable: list) -> None:
    """Exit `UNREADABLE`, saying how many, when some file could not be read."""
    if unreadable:
        err_console.print(f"{len(unreadable)} file(s) could not be read", highlight=False)
        raise typer.Exit(UNREADABLE)


def print_problems(
    problems: list[tuple[str, str, str]],
    limit: int | None,
    *,
    to: Console | None = None,
    rest: str | None = "all: --details",
) -> None:
    """`where: code: message` (where: `file:line`, or `file[index]` for a record of a
    JSON list) for the first `limit` problems (all when None), the messages cut to 160
    characters; `rest` says where the others are."""
    shown = problems if limit is None else problems[:limit]
    if not shown:
        return
    out = to or console
    if limit is not None:
        said = f" ({rest})" if rest else ""
        out.print(
            f"first {len(shown)} of {len(problems)} problem(s){said}:",
            markup=False,
            highlight=False,
        )
    for where, code, message in shown:
        text = message if limit is None or len(message) <= 160 else message[:157] + "..."
        out.print(f"{where}: {code}: {text}", markup=False, highlight=False)


def csv_values(value: str | None) -> tuple[str, ...]:
    """The non-empty, stripped items of a comma-separated option."""
    return tuple(v.strip() for v in (value or "").split(",") if v.strip())

"""The progress bar every long job shows (executions, ingest, training)."""

from __future__ import annotations

from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn


@contextmanager
def progress_bar(description: str, total: int, enabled: bool = True):
    """A rich progress bar (count, ETA) on stderr; yields (bar, task) for `bar.advance`.
    Only on a terminal: redrawn into a file or a pipe it would only leave blank lines."""
    console = Console(stderr=True)
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        disable=not enabled or not console.is_terminal,
        transient=True,
        console=console,
    ) as bar:
        yield bar, bar.add_task(description, total=total)

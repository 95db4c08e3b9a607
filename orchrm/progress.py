"""The progress bar every long job shows (executions, ingest, training), and silence
for the bars of the libraries orchrm drives (`library_bars_off`)."""

from __future__ import annotations

import warnings
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


@contextmanager
def library_bars_off():
    """transformers' progress bars (loading weights, writing shards) off inside the
    block, as they were after: a library call prints no bar of its own. Left on when
    transformers' verbosity asks for its info (TRANSFORMERS_VERBOSITY=info or debug)."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    if was and hf_logging.get_verbosity() > hf_logging.INFO:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was and not hf_logging.is_progress_bar_enabled():
            with warnings.catch_warnings():  # huggingface_hub's, when its variable says off
                warnings.simplefilter("ignore")
                hf_logging.enable_progress_bar()

"""The `orchrm` command: one module per command group, each thin (parse the options,
build the config, call the library, render the result)."""

from __future__ import annotations

import os
import sys

if "torch" not in sys.modules:
    # PyTorch reads this once, at its first allocation: tensors of 2 MiB and more then
    # sit on transparent huge pages, one page fault for 2 MiB instead of 512
    # (orchrm.training.heap). Set here, before anything imports torch.
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

import typer
from typer.core import TyperGroup

from orchrm import __version__
from orchrm.cli.bestofn import cross_validate_command, eval_command
from orchrm.cli.console import console, user_errors
from orchrm.cli.demo import demo_command
from orchrm.cli.help import HelpCommand
from orchrm.cli.parse import parse_command
from orchrm.cli.rl import rl_command
from orchrm.cli.rm import (
    calibrate_command,
    evaluate_rm_command,
    plan_memory_command,
    score_command,
    train_command,
)
from orchrm.cli.run import run_command
from orchrm.cli.serve import serve_command, serve_llm_command
from orchrm.cli.store import ingest_command, pairs_app, store_app
from orchrm.cli.view import view_command
from orchrm.cli.world import world_app


class OrchrmGroup(TyperGroup):
    """The top command: a user's error (`OrchrmError`, or an OS error about a named file)
    is one line on stderr and the exit status of its kind (`console.USAGE`,
    `UNREADABLE`, `UNWRITABLE`); anything else is a bug and keeps its traceback (exit
    status 1)."""

    def invoke(self, ctx: typer.Context):
        """Run the chosen command, turning user errors into their one line."""
        with user_errors():
            return super().invoke(ctx)


app = typer.Typer(
    cls=OrchrmGroup,
    rich_markup_mode=None,
    name="orchrm",
    help="Reward modeling for multi-agent orchestrations: score orchestrations before they run.",
    no_args_is_help=True,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        console.print(f"orchrm {__version__}")
        raise typer.Exit()


THIRD_PARTY = ("transformers", "trl", "peft", "accelerate", "datasets", "huggingface_hub", "torch")
"""Libraries whose logging, warnings and progress bars stay quiet unless `-v`."""


def quiet_third_party() -> None:
    """Errors only from the libraries orchrm drives: their info logs, load reports,
    warnings and tqdm bars would bury orchrm's own output. Environment variables first,
    as the libraries read them when imported."""
    import logging
    import os
    import warnings

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("DATASETS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    for name in THIRD_PARTY:
        logging.getLogger(name).setLevel(logging.ERROR)
        warnings.filterwarnings("ignore", module=rf"{name}(\.|$)")


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    verbose: bool = typer.Option(
        False,
        "-v",
        "--verbose",
        help="Show the logs, warnings and progress bars of the "
        "libraries orchrm uses (transformers, TRL, PEFT, accelerate, datasets).",
    ),
) -> None:
    """orchrm: parse, validate, score and select orchestrations."""
    if not verbose:
        quiet_third_party()


app.command("parse", cls=HelpCommand)(parse_command)
app.command("run", cls=HelpCommand)(run_command)
app.add_typer(world_app, name="world")
app.command("ingest", cls=HelpCommand)(ingest_command)
app.add_typer(store_app, name="store")
app.add_typer(pairs_app, name="pairs")
app.command("train", cls=HelpCommand)(train_command)
app.command("plan-memory", cls=HelpCommand)(plan_memory_command)
app.command("evaluate-rm", cls=HelpCommand)(evaluate_rm_command)
app.command("score", cls=HelpCommand)(score_command)
app.command("calibrate", cls=HelpCommand)(calibrate_command)
app.command("eval", cls=HelpCommand)(eval_command)
app.command("cross-validate", cls=HelpCommand)(cross_validate_command)
app.command("demo", cls=HelpCommand)(demo_command)
app.command("serve", cls=HelpCommand)(serve_command)
app.command("serve-llm", cls=HelpCommand)(serve_llm_command)
app.command("rl", cls=HelpCommand)(rl_command)
app.command("view", cls=HelpCommand)(view_command)

__all__ = ["app"]

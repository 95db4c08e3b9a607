"""The `orchrm` command: one module per command group, each thin (parse the options,
build the config, call the library, render the result)."""

from __future__ import annotations

import typer

from orchrm import __version__
from orchrm.cli.bestofn import cross_validate_command, eval_command
from orchrm.cli.console import console
from orchrm.cli.demo import demo_command
from orchrm.cli.parse import parse_command
from orchrm.cli.rl import rl_command
from orchrm.cli.rm import evaluate_rm_command, score_command, train_command
from orchrm.cli.run import run_command
from orchrm.cli.serve import serve_command
from orchrm.cli.store import ingest_command, pairs_app, store_app
from orchrm.cli.world import world_app

app = typer.Typer(
    name="orchrm",
    help="Reward modeling for multi-agent orchestrations: score orchestrations before they run.",
    no_args_is_help=True,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        console.print(f"orchrm {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """orchrm: parse, validate, score and select orchestrations."""


app.command("parse")(parse_command)
app.command("run")(run_command)
app.add_typer(world_app, name="world")
app.command("ingest")(ingest_command)
app.add_typer(store_app, name="store")
app.add_typer(pairs_app, name="pairs")
app.command("train")(train_command)
app.command("evaluate-rm")(evaluate_rm_command)
app.command("score")(score_command)
app.command("eval")(eval_command)
app.command("cross-validate")(cross_validate_command)
app.command("demo")(demo_command)
app.command("serve")(serve_command)
app.command("rl")(rl_command)

__all__ = ["app"]

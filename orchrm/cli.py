"""The `orchrm` command. Thin: it reads arguments, calls the library, prints results."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from orchrm import __version__
from orchrm.parse import ParseSummary, summarize_file

app = typer.Typer(
    name="orchrm",
    help="Reward modeling for multi-agent orchestrations: score orchestrations before they run.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()


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


@app.command("parse")
def parse_command(
    files: list[Path] = typer.Argument(
        ..., help="JSONL/JSON record files, or plain text files holding one harmony output."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
    details: bool = typer.Option(
        False, "--details", help="List every invalid or unparseable record with its line."
    ),
) -> None:
    """Parse and validate orchestrations in FILES and count the outcomes.

    Every record is counted once: valid, parsed but invalid (by rule), or unparseable
    (by reason).
    """
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        console.print(f"[red]error:[/red] no such file: {', '.join(missing)}")
        raise typer.Exit(2)
    summaries = [summarize_file(f) for f in files]
    total = _total(summaries)
    if as_json:
        print(
            json.dumps(
                {"files": [s.to_dict() for s in summaries], "total": total.to_dict()}, indent=2
            )
        )
        return
    table = Table(title="orchestrations")
    for column in ("file", "records", "valid", "invalid", "unparseable"):
        table.add_column(column, justify="left" if column == "file" else "right", overflow="fold")
    for s in [*summaries, total] if len(summaries) > 1 else summaries:
        table.add_row(s.path, str(s.records), str(s.valid), str(s.invalid), str(s.unparseable))
    console.print(table)
    if total.invalid or total.unparseable:
        causes = Table(title="why not valid")
        for column in ("outcome", "code", "records"):
            causes.add_column(column, justify="right" if column == "records" else "left")
        for rule, n in sorted(total.invalid_by_rule.items()):
            causes.add_row("invalid", rule, str(n))
        for reason, n in sorted(total.unparseable_by_reason.items()):
            causes.add_row("unparseable", reason, str(n))
        console.print(causes)
    if details:
        for s in summaries:
            for p in s.problems:
                console.print(
                    f"{s.path}:{p['line']}: {p['kind']} {p['code']}: {p['message']}",
                    markup=False,
                    highlight=False,
                )


def _total(summaries: list[ParseSummary]) -> ParseSummary:
    total = ParseSummary("total")
    for s in summaries:
        total.records += s.records
        total.valid += s.valid
        total.invalid += s.invalid
        total.unparseable += s.unparseable
        total.invalid_by_rule += s.invalid_by_rule
        total.unparseable_by_reason += s.unparseable_by_reason
    return total

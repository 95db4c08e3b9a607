"""`orchrm parse`: count valid, invalid and unparseable orchestrations in files."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from orchrm.cli.console import (
    EXAMPLES,
    USAGE,
    console,
    error,
    exit_if_unreadable,
    print_problems,
    report_unreadable,
    warn,
)
from orchrm.cli.options import JsonOutput, config_options
from orchrm.configs import config
from orchrm.parse import ParseSummary, summarize_file
from orchrm.parse.records import location


@config
class ParseOutput(JsonOutput):
    """What `orchrm parse` prints."""

    details: bool = False
    """List every invalid or unparseable record with its line."""


@config_options(ParseOutput, into="output")
def parse_command(
    output: ParseOutput,
    files: list[Path] = typer.Argument(
        ..., help="JSONL/JSON record files, or plain text files holding one harmony output."
    ),
) -> None:
    """Parse and validate orchestrations in FILES and count the outcomes.

    Every record is counted once: valid, parsed but invalid (by rule), or unparseable
    (by reason). A file that cannot be read is reported and the others still are; the
    exit status is then 3. Files that hold no record at all: exit status 2.
    """
    summaries, unreadable = [], []
    for f in files:
        try:
            summaries.append(summarize_file(f))
        except OSError as err:
            unreadable.append(report_unreadable(f, err))
    total = ParseSummary.total(summaries)
    if output.json:
        out = {"files": [s.to_dict() for s in summaries], "total": total.to_dict()}
        print(json.dumps({**out, "unreadable": unreadable}, indent=2))
    elif total.records:
        _print_summaries(summaries, total, output.details)
    empty = [s.path for s in summaries if not s.records]
    if empty:  # nothing parsed is an error; an empty file beside others, a warning
        (warn if total.records else error)(f"no record in {', '.join(empty)}: {NO_RECORD}")
    exit_if_unreadable(unreadable)
    if empty and not total.records:
        raise typer.Exit(USAGE)


NO_RECORD = "the file is empty or holds only blank lines"


def _print_summaries(summaries: list[ParseSummary], total: ParseSummary, details: bool) -> None:
    """The counts per file, why records are not valid, and the first (or every) problem."""
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
    problems = [
        (location(s.path, p["line"], p.get("index")), f"{p['kind']} {p['code']}", p["message"])
        for s in summaries
        for p in s.problems
    ]
    print_problems(problems, None if details else EXAMPLES)

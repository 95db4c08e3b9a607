"""`orchrm ingest`, `orchrm store stats`, `orchrm pairs`: the artifact store and its pairs."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table
from typer.core import TyperGroup

from orchrm.cli.console import (
    EXAMPLES,
    UNREADABLE,
    console,
    csv_values,
    err_console,
    error,
    fail,
    print_problems,
    warn,
)
from orchrm.cli.help import HelpCommand
from orchrm.cli.options import JsonOutput, assignments, config_options
from orchrm.configs import config
from orchrm.jsonl import printable
from orchrm.store.config import ExportConfig, IngestConfig, MineConfig, OpenConfig

STORE = {"store": {"envvar": "ORCHRM_STORE", "metavar": "<path>"},
         "wait_for_lock": {"metavar": "SECONDS"}}  # fmt: skip
"""How the options of `OpenConfig`'s fields read, the same in every command that opens
the store: the store's path also from the environment."""


@config
class StoreOutput(JsonOutput, OpenConfig):
    """`orchrm store stats`: the store, and what the command prints."""


@config
class IngestOutput(JsonOutput, IngestConfig):
    """`IngestConfig`, and what `orchrm ingest` prints."""

    details: bool = False
    """List every malformed record."""


@config
class MineOutput(JsonOutput, MineConfig, OpenConfig):
    """`MineConfig`, the store it mines, and what `orchrm pairs mine` prints (MineConfig's
    checks run: it comes before OpenConfig)."""


def open_store(
    path: Path,
    read_only: bool = False,
    create: bool = False,
    *,
    wait_for_lock: float = OpenConfig.wait_for_lock,
    as_json: bool = False,
):
    """The store at `path`. Only `create` (what `orchrm ingest` asks) makes a new one: a
    command that reads or mines a store refuses a path where there is none, so a typo
    never leaves an empty store behind. A store another process holds is waited for up
    to `wait_for_lock` seconds (said on stderr after the first), then `StoreBusy` (exit
    status 5), which `as_json` also prints on stdout as a JSON error object."""
    from orchrm.store.db import Store, StoreBusy

    if not create and not path.exists():
        fail(
            f"no store at {printable(path)}: `orchrm ingest` creates one; give the store's "
            "path with --store or ORCHRM_STORE",
            UNREADABLE,
        )
    limit = OpenConfig(wait_for_lock=wait_for_lock).wait_for_lock
    try:
        return Store(path, read_only=read_only, wait_for_lock=limit, say=_say)
    except StoreBusy as busy:
        told = StoreBusy(busy.path, busy.holder, busy.waited, wait_option="--wait-for-lock")
        if as_json:
            print(json.dumps(told.to_dict(), indent=2))
        raise told from None


def _say(message: str) -> None:
    err_console.print(message, markup=False, highlight=False, soft_wrap=True)


@config_options(
    IngestOutput, settings={**STORE, "map": {"collect": assignments("--map", "FIELD=COLUMN")}}
)
def ingest_command(
    config: IngestOutput,
    files: list[Path] = typer.Argument(..., help="Log files, or MAS-Orchestra step folders."),
) -> None:
    """Ingest logs into the store. Every record is counted: added, already there
    (duplicate) or malformed (with file, line and reason). A file that cannot be read
    (or, with --strict, holds a malformed record) is reported and left out, the others
    are still ingested, and the exit status is 3. A store is created only when a file
    can be ingested."""
    from orchrm.store.ingest import IngestError, IngestSummary, read_log, write_log

    given = {"domain": config.domain, "orchestrator": config.orchestrator, "map": config.map}
    options = {k: v for k, v in given.items() if v}
    store, adapter, as_json = Path(config.store), config.adapter, config.json
    if not any(f.exists() for f in files):
        # Nothing to ingest: a store is not created for it. With some files there, the
        # missing ones are reported each in its row and the others still ingested.
        fail(
            f"no such file: {', '.join(printable(f) for f in files)} (nothing was ingested)",
            UNREADABLE,
        )
    summaries, db = [], None
    opening = {"create": True, "wait_for_lock": config.wait_for_lock, "as_json": as_json}
    try:
        if store.exists():  # a store that is busy or not a store is said before any reading
            db = open_store(store, **opening)
        for path in files:
            try:
                read = read_log(
                    path, adapter, strict=config.strict, options=options, progress=not as_json
                )
                db = db or open_store(store, **opening)  # created for a file that can be added
                summary = write_log(db, read)
            except IngestError as err:
                summary = IngestSummary(path=printable(path), adapter=adapter, error=str(err))
                error(str(err))
            summaries.append(summary)
    finally:
        if db is not None:
            db.close()
    if as_json:
        print(json.dumps([s.to_dict() for s in summaries], indent=2))
    else:
        _print_ingest(summaries, store if db is not None else None, config.details)
    failed = [s for s in summaries if s.error]
    if failed:
        err_console.print(f"{len(failed)} file(s) not ingested", highlight=False)
        raise typer.Exit(UNREADABLE)


def _print_ingest(summaries: list, store: Path | None, details: bool) -> None:
    """The ingest table, malformed counts by reason, and the first (or every) problem;
    `store` None: no store was opened, nothing was ingested."""
    title = f"ingested into {printable(store)}" if store else "nothing ingested (no store made)"
    table = Table(title=title)
    for column in ("file", "adapter", "records", "added", "duplicates", "malformed"):
        table.add_column(
            column, justify="left" if column in ("file", "adapter") else "right", overflow="fold"
        )
    for s in summaries:
        counts = (s.records, s.added, s.duplicates, s.malformed)
        table.add_row(s.path, s.adapter, *(("-",) * 4 if s.error else map(str, counts)))
    console.print(table)
    for s in summaries:
        for reason, n in sorted(s.malformed_by_reason.items()):
            console.print(f"  {s.path}: {n} malformed ({reason})", markup=False, highlight=False)
        if s.blank_lines:
            console.print(f"  {s.path}: {s.blank_lines} blank line(s)", markup=False)
        if s.error:
            console.print(f"  {s.path}: not ingested: {s.error}", markup=False, highlight=False)
    problems = [
        (f"{s.path}:{p['line']}", p["reason"], p["message"]) for s in summaries for p in s.problems
    ]
    print_problems(problems, None if details else EXAMPLES)


store_app = typer.Typer(
    cls=TyperGroup, rich_markup_mode=None, help="The artifact store.", no_args_is_help=True
)


@store_app.command("stats", cls=HelpCommand)
@config_options(StoreOutput, settings=STORE)
def store_stats(config: StoreOutput) -> None:
    """What the store holds: rows per table, orchestrations per orchestrator and their
    outcomes, pairs per dataset, kind and split."""
    from orchrm.store.db import store_summary

    store, as_json = Path(config.store), config.json
    with open_store(
        store, read_only=True, wait_for_lock=config.wait_for_lock, as_json=as_json
    ) as db:
        summary = store_summary(db)
    if as_json:
        print(json.dumps(summary, indent=2, default=str))
        return
    console.print(
        f"store {store} (schema {summary['schema_version']}): "
        + ", ".join(f"{n} {t}" for t, n in summary["counts"].items()),
        highlight=False,
    )
    table = Table(title="orchestrations")
    columns = [
        "orchestrator",
        "domain",
        "step",
        "total",
        "valid",
        "invalid",
        "unparseable",
        "executed",
        "correct",
    ]
    for column in columns:
        table.add_column(column, justify="right" if column not in columns[:2] else "left")
    for row in summary["orchestrations"]:
        table.add_row(*("" if row[c] is None else str(row[c]) for c in columns))
    console.print(table)
    if summary["pairs"]:
        pairs = Table(title="pairs")
        for column in ("dataset", "kind", "split", "pairs", "tasks"):
            pairs.add_column(column, justify="right" if column in ("pairs", "tasks") else "left")
        for row in summary["pairs"]:
            pairs.add_row(*(str(row[c]) for c in ("dataset", "kind", "split", "pairs", "tasks")))
        console.print(pairs)


pairs_app = typer.Typer(
    cls=TyperGroup,
    rich_markup_mode=None,
    help="Win/lose pairs: mine and export.",
    no_args_is_help=True,
)


def _ratio(text: str) -> dict[str, float]:
    """`SOB:SOO:COI`, e.g. `1:0:3`, as the mix of kinds."""
    try:
        sob, soo, coi = (float(x) for x in text.split(":"))
    except ValueError:
        raise typer.BadParameter(f"{text!r}: give SoB:SoO:CoI, e.g. 1:0:3") from None
    return {"sob": sob, "soo": soo, "coi": coi}


def _shares(text: str) -> tuple[float, ...]:
    """`TRAIN,VALIDATION,TEST`, e.g. `0.8,0.1,0.1`, as the split's shares of tasks."""
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise typer.BadParameter(f"{text!r}: give three shares, e.g. 0.8,0.1,0.1") from None


def _spell_ratio(ratio: dict[str, float]) -> str:
    return ":".join(f"{ratio[k]:g}" for k in ("sob", "soo", "coi"))


def _spell_list(values: tuple) -> str:
    return ",".join(map(str, values))


@pairs_app.command("mine", cls=HelpCommand)
@config_options(
    MineOutput,
    flags={"cap_per_task": "--cap", "allow_invalid_rejected": "--invalid-rejected"},
    settings={
        **STORE,
        "ratio": {"parser": _ratio, "spell": _spell_ratio},
        "specialized": {"parser": csv_values, "spell": _spell_list},
        "base": {"parser": csv_values, "spell": _spell_list},
        "split": {"parser": _shares, "spell": _spell_list},
        "specialized_for": {
            "collect": assignments("--specialized-for", "ORCHESTRATOR=DOMAIN"),
            "metavar": "ORCHESTRATOR=DOMAIN",
        },
    },
)
def pairs_mine(config: MineOutput) -> None:
    """Mine correct-over-incorrect, specialized-over-base and specialized-over-other-domain
    pairs, cap them per task, mix them, and split them by task. When no pair is kept the
    store is left as it was and the exit status is 2."""
    from dataclasses import asdict

    from orchrm.store.pairs import mine

    store, as_json = Path(config.store), config.json
    with open_store(store, wait_for_lock=config.wait_for_lock, as_json=as_json) as db:
        summary = mine(db, config)
    if as_json:
        print(json.dumps(asdict(summary), indent=2))
        return
    _print_mined(summary, config)


def _print_mined(summary, config: MineConfig) -> None:
    """Pairs kept of those available per kind, pairs and tasks per split, and a warning
    for each split that has a share of tasks but no pair."""
    kept, available = sum(summary.kept.values()), sum(summary.available.values())
    console.print(
        f"dataset {summary.dataset!r}: {kept:,} pairs kept of {available:,} available",
        highlight=False,
    )
    for kind in sorted(summary.available):
        console.print(
            f"  {kind}: {summary.kept.get(kind, 0):,} kept of {summary.available[kind]:,}",
            highlight=False,
        )
    for split in ("train", "validation", "test"):
        pairs, tasks = summary.by_split.get(split, 0), summary.tasks_by_split.get(split, 0)
        console.print(f"  {split}: {pairs:,} pairs from {tasks:,} tasks", highlight=False)
    if config.denoise:
        console.print(
            f"  denoised: {summary.denoised:,} coi pairs judged on the success rates of "
            f"{summary.plans_with_runs:,} plans with {config.min_runs}+ runs; "
            f"{summary.plans_few_runs:,} plans left out with fewer runs",
            highlight=False,
        )
    for kind in summary.left_out:
        warn(
            f"no {kind} pair available: left out of the mix (see --specialized, "
            "--base, --step-threshold, --specialized-for)"
        )
    for split, share in zip(("train", "validation", "test"), config.split, strict=True):
        if share > 0 and not summary.by_split.get(split):
            warn(
                f"the {split} split is empty: {share:g} of "
                f"{sum(summary.tasks_by_split.values())} tasks drew no pair there"
                + (
                    "; `orchrm train` will have no validation (mine more tasks or raise "
                    "the share with --split)"
                    if split == "validation"
                    else ""
                )
            )


@pairs_app.command("export", cls=HelpCommand)
@config_options(ExportConfig, required=["out"], settings={**STORE, "out": {"metavar": "<path>"}})
def pairs_export(config: ExportConfig) -> None:
    """Export a dataset as preference data (prompt/chosen/rejected, one file per split) or
    in the OrchRM-datasets format (input/chosen/rejected/source)."""
    from orchrm.store.pairs import export, export_orchrm_datasets

    out, dataset, fmt, max_length = (
        Path(config.out),
        config.dataset,
        config.format,
        config.max_length,
    )
    store, tokenizer = Path(config.store), config.tokenizer
    with open_store(store, read_only=True, wait_for_lock=config.wait_for_lock) as db:
        if fmt == "orchrm-datasets":
            n = export_orchrm_datasets(db, out, dataset)
            console.print(f"{n} pairs -> {out}")
            return
        max_tokens, count = max_length, None
        if tokenizer != "approx":
            from orchrm.rmodel.tokens import backbone_budget

            max_tokens, count = backbone_budget(tokenizer, max_length)
        written = export(db, out, dataset, fmt, max_tokens, count, config.domain_in_text)
    for part, path in written.items():
        console.print(f"{part}: {path}")
    if "validation" not in written:
        warn(f"dataset {dataset!r} has no validation pairs: no validation file was written")

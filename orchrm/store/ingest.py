"""Ingest logs into the store, accounting for every input record.

`ingest_file` reads a file with its adapter (`orchrm.store.adapters`), then parses,
validates, grades (when a log has no label) and renders every orchestration, and writes
the file in one transaction. Every input record is counted: added, already in the store
(duplicate), or malformed (with its line and a reason code); blank lines are counted
apart. In strict mode one malformed record keeps the whole file out. A file that cannot
be read at all raises `IngestError`, and nothing of it is written. `read_log` and
`write_log` are its two halves: a file is read and checked before a store is needed.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from orchrm.errors import OrchrmError
from orchrm.jsonl import BLANK, FileSummary, printable
from orchrm.orchestration import Orchestration, render_for_rm, validate
from orchrm.parse import ParseError, parse_harmony
from orchrm.progress import progress_bar
from orchrm.store.adapters import (
    READERS,
    FormatError,
    LogRecord,
    Malformed,
    check_options,
)
from orchrm.store.db import Store, content_hash
from orchrm.store.detect import detect_adapter
from orchrm.tasks.grading import grade


class IngestError(OrchrmError):
    """A file cannot be ingested as asked (strict mode with malformed records, unknown
    format, unreadable file). Nothing of the file was written."""


@dataclass(kw_only=True)
class IngestSummary(FileSummary):
    """What one file did to the store; `records == added + duplicates + malformed`.
    `error` says why a file was not ingested at all (then every count is 0)."""

    adapter: str
    added: int = 0
    duplicates: int = 0
    malformed: int = 0
    malformed_by_reason: Counter = field(default_factory=Counter)
    pairs_added: int = 0
    error: str | None = None


# --------------------------------------------------------------------------- ingest


def ingest_file(
    store: Store,
    path: str | Path,
    adapter: str = "auto",
    *,
    strict: bool = False,
    options: dict | None = None,
    progress: bool = False,
) -> IngestSummary:
    """Ingest one file (or a training-step folder) into `store` in one transaction
    (`read_log`, then `write_log`). Raises IngestError when the file cannot be read, its
    format is unknown, or (strict) it holds a malformed record."""
    return write_log(
        store, read_log(path, adapter, strict=strict, options=options, progress=progress)
    )


@dataclass
class ReadLog:
    """A file read and staged by `read_log`, for `write_log` to write."""

    summary: IngestSummary
    staged: _Staged
    pairs: dict
    ingest_id: str


def read_log(
    path: str | Path,
    adapter: str = "auto",
    *,
    strict: bool = False,
    options: dict | None = None,
    progress: bool = False,
) -> ReadLog:
    """Read, check and stage one file (or a training-step folder) without a store, so a
    store need not exist for a file that cannot be ingested. Raises IngestError as
    `ingest_file` does."""
    path = Path(path)
    if not path.exists():
        raise IngestError(f"no such file or folder: {printable(path)}")
    options = options or {}
    try:
        adapter = detect_adapter(path) if adapter == "auto" else adapter
        check_options(adapter, options)
        summary, staged = _read(path, adapter, options, progress)
        digest = _file_digest(path)
    except FormatError as err:
        raise IngestError(str(err)) from None
    except OSError as err:  # missing, a folder, no permission, an I/O error
        raise IngestError(f"cannot read {printable(path)}: {err.strerror or err}") from None
    if strict and summary.malformed:
        first = summary.problems[0]
        raise IngestError(
            f"{summary.path}: {summary.malformed} malformed record(s), nothing ingested "
            f"(strict); first at line {first['line']}: {first['message']}"
        )
    pairs = _pairs(staged, summary, path)
    key = content_hash(digest, adapter, json.dumps(options, sort_keys=True))
    return ReadLog(summary, staged, pairs, key)


def write_log(store: Store, read: ReadLog) -> IngestSummary:
    """Write what `read_log` staged into `store` in one transaction; its summary."""
    _write(store, read.staged, read.pairs, read.summary, read.ingest_id)
    return read.summary


def _read(path: Path, adapter: str, options: dict, progress: bool) -> tuple[IngestSummary, _Staged]:
    """Count and stage every item the adapter yields for a file."""
    summary = IngestSummary(path=printable(path), adapter=adapter)
    staged = _Staged()
    source = printable(path.name)
    with progress_bar(f"ingesting {source}", None, progress) as (bar, tracker):
        for line, item in READERS[adapter](path, options):
            bar.advance(tracker)
            if item is BLANK:
                summary.blank_lines += 1
            else:
                _collect(line, item, source, summary, staged)
    return summary, staged


def _pairs(staged: _Staged, summary: IngestSummary, path: Path) -> dict[str, dict]:
    """The pair rows of a preference file; a pair with an unusable side is malformed."""
    pairs = {}
    for line, pair in staged.sides.items():
        (chosen, task_id, kind), (rejected, _, _) = pair["chosen"], pair["rejected"]
        unusable = [
            side
            for side, orch in (("chosen", chosen), ("rejected", rejected))
            if staged.orchestrations[orch]["parsed"] is None
        ]
        if unusable:  # stored, but a pair the reward model cannot read is not a pair
            reason = f"{' and '.join(unusable)} side unparseable"
            bad = Malformed("unparseable_side", reason)
            _collect(line, bad, printable(path.name), summary, staged, recount=True)
            continue
        pair_id = content_hash(kind, chosen, rejected)  # one pair per kind, as mined
        pairs[pair_id] = {
            "dataset": f"import:{printable(path.stem)}",
            "pair_id": pair_id,
            "task_id": task_id,
            "kind": kind,
            "chosen_id": chosen,
            "rejected_id": rejected,
            "split": "train",
        }
    return pairs


def _write(
    store: Store, staged: _Staged, pairs: dict, summary: IngestSummary, ingest_id: str
) -> None:
    """Write a file's staged rows and its ingest record in one transaction."""
    with store.transaction() as db:
        added = _insert(db, "orchestrations", "orch_id", list(staged.orchestrations.values()))
        _insert(db, "tasks", "task_id", list(staged.tasks.values()))
        _insert(db, "executions", "orch_id", list(staged.executions.values()))
        if summary.adapter == "preference":  # a record is a pair: count pairs
            added = summary.pairs_added = _insert(
                db, "pairs", "pair_id", list(pairs.values()), also=("dataset",)
            )
        summary.added = added
        summary.duplicates = summary.records - summary.malformed - added
        db.execute(
            "INSERT OR IGNORE INTO ingests (ingest_id, path, adapter, records, added, "
            "duplicates, malformed) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                ingest_id,
                summary.path,
                summary.adapter,
                summary.records,
                summary.added,
                summary.duplicates,
                summary.malformed,
            ],
        )


@dataclass
class _Staged:
    """A file's rows waiting for its transaction, keyed so repeats collapse."""

    tasks: dict = field(default_factory=dict)
    orchestrations: dict = field(default_factory=dict)
    executions: dict = field(default_factory=dict)
    sides: dict = field(default_factory=dict)  # preference line -> {side: (orch, task, kind)}


def _collect(
    line: int,
    item: LogRecord | Malformed,
    source: str,
    summary: IngestSummary,
    staged: _Staged,
    *,
    recount: bool = False,
) -> None:
    """Count one adapter item and stage its rows (`recount`: a record already counted
    turns out malformed)."""
    if isinstance(item, Malformed):
        summary.records += not recount
        summary.malformed += 1
        summary.malformed_by_reason[item.reason] += 1
        summary.problems.append({"line": line, "reason": item.reason, "message": item.message})
        return
    if item.pair is None or item.pair[1] == "chosen":  # a preference line is one record
        summary.records += 1
    task_id, orch_id, row, execution = _rows(item, source)
    staged.tasks.setdefault(
        task_id,
        {
            "task_id": task_id,
            "question": item.question,
            "answer": item.truth,
            "domain": item.domain,
        },
    )
    staged.orchestrations[orch_id] = row
    if execution:
        staged.executions[orch_id] = execution
    if item.pair:
        staged.sides.setdefault(line, {})[item.pair[1]] = (orch_id, task_id, item.pair[0])


def _rows(item: LogRecord, file_name: str) -> tuple[str, str, dict, dict | None]:
    task_id = item.task_id or "q-" + content_hash(item.question.strip())
    parsed = item.orchestration
    if isinstance(parsed, str):
        try:
            parsed = parse_harmony(parsed)
        except ParseError as err:
            parsed = err
    raw = item.raw or (json.dumps(parsed.to_dict()) if isinstance(parsed, Orchestration) else "")
    # A seeded execution is one of the sample's executions: its seed is part of its key,
    # so repeated executions are kept side by side (one sample text, one rm_hash).
    seed = () if item.execution_seed is None else (item.execution_seed,)
    orch_id = content_hash(task_id, item.orchestrator, item.step, item.sample_index, raw, *seed)
    row = {
        "orch_id": orch_id,
        "task_id": task_id,
        "orchestrator": item.orchestrator,
        "step": item.step,
        "sample_index": item.sample_index,
        "domain": item.domain,
        "raw": raw,
        "parsed": None,
        "parse_reason": None,
        "parse_message": None,
        "violations": "",
        "valid": False,
        "rm_hash": None,
        "logprob": item.logprob,
        "source": file_name,
    }
    if isinstance(parsed, Orchestration):
        violations = validate(parsed)
        row.update(
            parsed=json.dumps(parsed.to_dict()),
            valid=not violations,
            violations=",".join(dict.fromkeys(v.rule.value for v in violations)),
            rm_hash=content_hash(render_for_rm(item.question, parsed)),
        )
    else:
        row.update(parse_reason=parsed.reason, parse_message=parsed.message)
    execution = None
    if item.executed:
        correct = item.correct
        if correct is None and item.truth is not None:
            correct = grade(item.answer, item.truth, item.domain)
        execution = {
            "orch_id": orch_id,
            "answer": item.answer,
            "correct": correct,
            "prompt_tokens": item.prompt_tokens,
            "completion_tokens": item.completion_tokens,
            "error": item.error,
            "p_success": item.p_success,
        }
    return task_id, orch_id, row, execution


_COLUMNS = {
    "orchestrations": [
        "orch_id",
        "task_id",
        "orchestrator",
        "step",
        "sample_index",
        "domain",
        "raw",
        "parsed",
        "parse_reason",
        "parse_message",
        "violations",
        "valid",
        "rm_hash",
        "logprob",
        "source",
    ],
    "tasks": ["task_id", "question", "answer", "domain"],
    "executions": [
        "orch_id",
        "answer",
        "correct",
        "prompt_tokens",
        "completion_tokens",
        "error",
        "p_success",
    ],
    "pairs": ["dataset", "pair_id", "task_id", "kind", "chosen_id", "rejected_id", "split"],
}
_TYPES = {
    "step": pa.int32(),
    "sample_index": pa.int32(),
    "logprob": pa.float64(),
    "valid": pa.bool_(),
    "correct": pa.bool_(),
    "prompt_tokens": pa.int64(),
    "completion_tokens": pa.int64(),
    "p_success": pa.float64(),
}


def _insert(db, table: str, key: str, rows: list[dict], also: tuple[str, ...] = ()) -> int:
    """Insert rows whose key is new (bulk, through Arrow); returns how many were new."""
    if not rows:
        return 0
    columns = _COLUMNS[table]
    schema = pa.schema([(c, _TYPES.get(c, pa.string())) for c in columns])
    batch = pa.Table.from_pylist([{c: r.get(c) for c in columns} for r in rows], schema=schema)
    db.register("incoming", batch)
    try:
        keys = " AND ".join(f"t.{k} = i.{k}" for k in (*also, key))
        new = db.execute(
            f"SELECT count(*) FROM incoming i WHERE NOT EXISTS "
            f"(SELECT 1 FROM {table} t WHERE {keys})"
        ).fetchone()[0]
        names = ", ".join(columns)  # named: a column left out (a pair's weight) takes its default
        db.execute(f"INSERT OR IGNORE INTO {table} ({names}) SELECT {names} FROM incoming")
    finally:
        db.unregister("incoming")
    return new


def _file_digest(path: Path) -> str:
    """sha256 of a file, or of a folder's files with their names, read in chunks."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        digest.update(f.name.encode("utf-8", "surrogateescape"))
        with open(f, "rb") as stream:
            while chunk := stream.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()

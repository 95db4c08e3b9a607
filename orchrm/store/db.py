"""The artifact store: one embedded DuckDB file holding tasks, orchestrations,
executions, ingests and mined pairs.

Rows are keyed by content hashes, so writing the same artifact twice adds nothing.
`Store.transaction()` wraps a unit of work (one ingested file, one mining run): it lands
whole or not at all. The schema is versioned in the `meta` table; a store written by an
older orchrm is migrated on open, one written by a newer orchrm is refused.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

SCHEMA_VERSION = 1
DEFAULT_PATH = "orchrm.duckdb"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS tasks (
    task_id VARCHAR PRIMARY KEY,
    question VARCHAR NOT NULL,
    answer VARCHAR,
    domain VARCHAR
);
CREATE TABLE IF NOT EXISTS orchestrations (
    orch_id VARCHAR PRIMARY KEY,      -- content hash of task, source, step, sample, text
    task_id VARCHAR NOT NULL,
    orchestrator VARCHAR NOT NULL,
    step INTEGER,                     -- training step / checkpoint, NULL if unknown
    sample_index INTEGER,
    domain VARCHAR,
    raw VARCHAR,                      -- what the orchestrator wrote
    parsed VARCHAR,                   -- orchrm JSON, NULL when unparseable
    parse_reason VARCHAR,             -- ParseError reason when unparseable
    parse_message VARCHAR,
    violations VARCHAR,               -- broken rules, comma-separated ('' when valid)
    valid BOOLEAN NOT NULL,
    rm_hash VARCHAR,                  -- hash of the reward-model text (de-duplication)
    logprob DOUBLE,
    source VARCHAR                    -- adapter and file it came from
);
CREATE TABLE IF NOT EXISTS executions (
    orch_id VARCHAR PRIMARY KEY,
    answer VARCHAR,
    correct BOOLEAN,
    prompt_tokens BIGINT,
    completion_tokens BIGINT,
    error VARCHAR,
    p_success DOUBLE                  -- true success probability (world logs only)
);
CREATE TABLE IF NOT EXISTS ingests (
    ingest_id VARCHAR PRIMARY KEY,    -- hash of file content, adapter and options
    path VARCHAR,
    adapter VARCHAR,
    records INTEGER,
    added INTEGER,
    duplicates INTEGER,
    malformed INTEGER,
    ingested_at TIMESTAMP DEFAULT current_timestamp
);
CREATE TABLE IF NOT EXISTS pairs (
    dataset VARCHAR NOT NULL,
    pair_id VARCHAR NOT NULL,
    task_id VARCHAR NOT NULL,
    kind VARCHAR NOT NULL,            -- coi, sob or soo
    chosen_id VARCHAR NOT NULL,
    rejected_id VARCHAR NOT NULL,
    split VARCHAR NOT NULL,           -- train, validation or test
    PRIMARY KEY (dataset, pair_id)
);
"""

MIGRATIONS: dict[int, str] = {}
"""SQL that takes a store from version N to N + 1 (none yet: version 1 is the first)."""


class StoreError(Exception):
    """The store cannot be opened or used as asked (wrong version, locked, corrupt)."""


def content_hash(*parts: object) -> str:
    """A stable key for a tuple of values (sha256, 32 hex characters)."""
    digest = hashlib.sha256("\x1f".join("" if p is None else str(p) for p in parts).encode())
    return digest.hexdigest()[:32]


class Store:
    """An open store. Use as a context manager, or call `close()`."""

    def __init__(self, path: str | Path = DEFAULT_PATH, read_only: bool = False):
        self.path = str(path)
        try:
            self.db = duckdb.connect(self.path, read_only=read_only)
        except duckdb.Error as err:
            raise StoreError(f"cannot open store {self.path}: {err}") from None
        if not read_only:
            self.db.execute(_SCHEMA)
        self._check_version(read_only)

    def _check_version(self, read_only: bool) -> None:
        row = self.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            if read_only:
                raise StoreError(f"{self.path} is not an orchrm store (no schema version)")
            self.db.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
            return
        version = int(row[0])
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {version}, written by a newer orchrm; this "
                f"orchrm reads versions up to {SCHEMA_VERSION}: upgrade orchrm"
            )
        if version < SCHEMA_VERSION:
            if read_only:
                raise StoreError(
                    f"{self.path} has schema version {version}: open it writable "
                    f"once to migrate it to {SCHEMA_VERSION}"
                )
            with self.transaction():
                for v in range(version, SCHEMA_VERSION):
                    self.db.execute(MIGRATIONS[v])
                self.db.execute(
                    "UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)]
                )

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """All statements inside land together or, on any exception, not at all."""
        self.db.execute("BEGIN TRANSACTION")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def counts(self) -> dict[str, int]:
        """Rows per table."""
        tables = ("tasks", "orchestrations", "executions", "ingests", "pairs")
        return {t: self.db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def store_summary(store: Store) -> dict:
    """What the store holds, as plain data (for `orchrm store stats`)."""
    db = store.db
    rows = db.execute(
        """
        SELECT o.orchestrator, coalesce(nullif(o.domain, ''), t.domain) AS domain, o.step,
               count(*) AS total, count(*) FILTER (WHERE o.valid) AS valid,
               count(*) FILTER (WHERE o.parsed IS NOT NULL AND NOT o.valid) AS invalid,
               count(*) FILTER (WHERE o.parsed IS NULL) AS unparseable,
               count(e.orch_id) AS executed, count(*) FILTER (WHERE e.correct) AS correct
        FROM orchestrations o JOIN tasks t USING (task_id) LEFT JOIN executions e USING (orch_id)
        GROUP BY ALL ORDER BY ALL
        """
    )
    names = [d[0] for d in rows.description]
    orchestrations = [dict(zip(names, r, strict=True)) for r in rows.fetchall()]
    pairs = db.execute(
        "SELECT dataset, kind, split, count(*) AS pairs, count(DISTINCT task_id) AS tasks "
        "FROM pairs GROUP BY ALL ORDER BY ALL"
    )
    names = [d[0] for d in pairs.description]
    version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    return {
        "schema_version": int(version),
        "counts": store.counts(),
        "orchestrations": orchestrations,
        "pairs": [dict(zip(names, r, strict=True)) for r in pairs.fetchall()],
    }

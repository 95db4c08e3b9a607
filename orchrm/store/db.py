"""The artifact store: one embedded DuckDB file holding tasks, orchestrations,
executions, ingests and mined pairs.

Rows are keyed by content hashes, so writing the same artifact twice adds nothing.
`Store.transaction()` wraps a unit of work (one ingested file, one mining run): it lands
whole or not at all. The schema is versioned in the `meta` table. A file is inspected
read-only before anything is written: a store written by an older orchrm is migrated on
open; one written by a newer orchrm, another program's DuckDB database, a damaged file
or a file that is not a DuckDB database is refused and left as it was. A store another
process holds (DuckDB locks the file: one writer, or any number of readers) is
`StoreBusy`, waited for up to a limit when asked. Every connection has DuckDB's extension
auto-install and auto-load off, so opening a store never reaches the network.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from orchrm.errors import Busy, MissingInput, OrchrmError
from orchrm.store.config import OpenConfig
from orchrm.store.lock import LockHolder, lock_holder

SCHEMA_VERSION = 2
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
    weight DOUBLE DEFAULT 1.0,        -- P(chosen is the better plan), 1 for a sure pair
    PRIMARY KEY (dataset, pair_id)
);
"""

MIGRATIONS: dict[int, str] = {
    1: "ALTER TABLE pairs ADD COLUMN IF NOT EXISTS weight DOUBLE DEFAULT 1.0",
}
"""SQL that takes a store from version N to N + 1 (2 gives each pair its `weight`: pairs
judged on repeated executions are sure only up to a probability)."""

TABLES = ("meta", "tasks", "orchestrations", "executions", "ingests", "pairs")
"""The tables of a store of the current schema version."""

CONNECTION_CONFIG = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "enable_external_access": False,
    "lock_configuration": True,
}
"""DuckDB settings of every connection orchrm opens. A file DuckDB does not recognise
(a SQLite file, say) would otherwise make it download and load an extension; SQL sent
to the store has no business reading or writing other files; and the locked
configuration keeps a query from turning either back on."""

_DUCKDB_MAGIC = b"DUCK"
"""Bytes 8 to 11 of every DuckDB database file."""
_HEADER_BYTES = 3 * 4096
"""DuckDB's file header (one main header, two database headers) before the first block."""
_SIGNATURES = (
    (b"SQLite format 3\x00", "a SQLite database"),
    (b"PAR1", "a Parquet file"),
    (b"PK\x03\x04", "a zip archive"),
    (b"\x1f\x8b", "a gzip file"),
)


class StoreError(OrchrmError):
    """The store cannot be opened or used as asked (wrong version, locked, corrupt)."""


class NoStore(StoreError, MissingInput):
    """No store where the user pointed, or one that cannot be read (exit status 3, as any
    input that cannot be read)."""


class StoreBusy(StoreError, Busy):
    """Another process holds the store's lock: an ingest writing to it, or a reader while
    this process would write (exit status 5). The message names the store, the holder
    and how long this process waited; where the command offers a way to wait
    (`wait_option`, its flag), the advice names it."""

    def __init__(
        self,
        path: str,
        holder: LockHolder,
        waited: float = 0.0,
        wait_option: str | None = None,
    ):
        super().__init__(path, holder, waited, wait_option)
        self.path, self.holder, self.waited = path, holder, waited
        self.wait_option = wait_option

    def __str__(self) -> str:
        held = f"another process holds its lock ({self.holder})"
        advice = "wait for it to finish and try again"
        if self.waited:
            held = f"another process still holds its lock after {self.waited:g} s ({self.holder})"
            if self.wait_option:
                advice = f"wait for it to finish, or give a longer {self.wait_option}"
        elif self.wait_option:
            advice = f"wait for it to finish, or give {self.wait_option} SECONDS to wait for it"
        return f"cannot open store {self.path}: {held}; {advice}"

    def to_dict(self) -> dict:
        """The error as a command's `--json` prints it."""
        holder = self.holder
        return {
            "error": "store_busy",
            "message": str(self),
            "store": self.path,
            "pid": holder.pid,
            "program": holder.program,
            "waited_s": self.waited,
        }


def content_hash(*parts: object) -> str:
    """A stable key for a tuple of values (sha256, 32 hex characters)."""
    digest = hashlib.sha256("\x1f".join("" if p is None else str(p) for p in parts).encode())
    return digest.hexdigest()[:32]


def connect(path: str | Path, *, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with `CONNECTION_CONFIG`: the one way orchrm opens DuckDB. A
    file another process holds is `StoreBusy`."""
    try:
        return duckdb.connect(str(path), read_only=read_only, config=dict(CONNECTION_CONFIG))
    except duckdb.IOException as err:
        holder = lock_holder(str(err))
        if holder is None:
            raise
        raise StoreBusy(str(path), holder) from None


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def _not_duckdb(path: Path) -> str | None:
    """What the file is when it is plainly not a DuckDB database (None: it may be one).
    Read from its first bytes, so DuckDB never sees a file it would hand to an extension."""
    try:
        with path.open("rb") as f:
            head = f.read(16)
    except OSError as err:
        raise NoStore(f"cannot read store {path}: {err.strerror or err}") from None
    for signature, kind in _SIGNATURES:
        if head.startswith(signature):
            return f"it is {kind}, not a DuckDB database"
    if head[8:12] != _DUCKDB_MAGIC:
        return "it is not a DuckDB database (no DuckDB file header)"
    return None


def _stored_version(db: duckdb.DuckDBPyConnection, path: Path) -> int | None:
    """The schema version of the open database at `path`, None when it holds nothing
    at all; a `StoreError` when it is not an orchrm store or one this orchrm cannot use."""
    objects = db.execute(
        "SELECT schema_name, table_name FROM duckdb_tables() "
        "WHERE database_name = current_database() "
        "UNION ALL SELECT schema_name, view_name FROM duckdb_views() "
        "WHERE database_name = current_database() AND NOT internal"
    ).fetchall()
    if not objects:
        return None
    tables = {name for schema, name in objects if schema == "main"}
    if "meta" not in tables and set(TABLES[1:]) <= tables:
        raise StoreError(f"{path} is damaged: it has orchrm's tables but no meta table")
    if "meta" not in tables:
        names = sorted(f"{s}.{n}" if s != "main" else n for s, n in objects)
        listed = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise StoreError(
            f"{path} is not an orchrm store: it has tables ({listed}) and no meta table"
        )
    try:
        rows = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
    except duckdb.BinderException:
        message = f"{path} is not an orchrm store: its meta table has no key/value columns"
        raise StoreError(message) from None
    text = str(rows[0][0]) if rows else ""
    if not (text.isascii() and text.isdigit()):
        found = f"schema version {text!r}" if rows else "no schema version"
        raise StoreError(f"{path} is not an orchrm store: its meta table has {found}")
    version = int(text)
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path} has schema version {version}, written by a newer orchrm; this "
            f"orchrm reads versions up to {SCHEMA_VERSION}: upgrade orchrm"
        )
    if any(v not in MIGRATIONS for v in range(version, SCHEMA_VERSION)):
        raise StoreError(f"{path} has schema version {version}, which this orchrm cannot migrate")
    missing = [t for t in TABLES if t not in tables]
    if version == SCHEMA_VERSION and missing:
        raise StoreError(f"{path} is damaged: table(s) {', '.join(missing)} missing")
    return version


def _check_size(db: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Refuse a file shorter than the blocks in use, or not a whole number of blocks
    (a cut-off copy). Free blocks are not counted: DuckDB drops free blocks at the end
    of the file, so the header's total may exceed the file. Skipped while a write-ahead
    log is pending: its replay may count blocks the file does not hold yet."""
    if Path(f"{path}.wal").exists():
        return
    block_size, used = db.execute(
        "SELECT block_size, used_blocks FROM pragma_database_size() "
        "WHERE database_name = current_database()"
    ).fetchone()
    expected, actual = _HEADER_BYTES + block_size * used, path.stat().st_size
    if actual < expected or (actual - _HEADER_BYTES) % block_size:
        raise StoreError(
            f"{path} is damaged: the file has {actual} bytes, its blocks in use need "
            f"{expected} (truncated?)"
        )


def _connect_to_inspect(path: Path) -> duckdb.DuckDBPyConnection:
    try:
        return connect(path, read_only=True)
    except duckdb.ConnectionException as err:
        if "different configuration" not in str(err):
            raise
        # DuckDB refuses a read-only connection while this process holds the file open
        # for writing; a second orchrm connection then shares that open database (which
        # passed inspection when it was opened) and writes nothing by connecting.
        return connect(path, read_only=False)


def inspect_store(path: str | Path) -> int | None:
    """Look at the file at `path` without writing anything: its schema version, or None
    when there is nothing there yet (no file, an empty file, an empty DuckDB database).
    Anything orchrm must not write into raises `StoreError` saying what it is."""
    path = Path(path)
    if not path.exists():
        return None
    if path.is_dir():
        raise StoreError(f"{path} is a directory, not a store file")
    if not path.stat().st_size:
        return None
    kind = _not_duckdb(path)
    if kind is not None:
        raise StoreError(f"cannot open store {path}: {kind}")
    try:
        db = _connect_to_inspect(path)
    except duckdb.Error as err:
        raise StoreError(f"cannot open store {path}: {_first_line(err)}") from None
    try:
        version = _stored_version(db, path)
        if version is not None:
            _check_size(db, path)
        return version
    except duckdb.Error as err:
        raise StoreError(f"{path} is damaged: {_first_line(err)}") from None
    finally:
        db.close()


_FIRST_PAUSE, _LONGEST_PAUSE = 0.05, 0.5
"""Seconds between tries to open a busy store: doubled after each, up to the longest."""
_TELL_AFTER = 1.0
"""Seconds of waiting for a busy store before saying so."""


def _wait_for_lock(
    attempt: Callable[[], int | None], limit: float, say: Callable[[str], None] | None
) -> int | None:
    """What `attempt()` returns, tried again with a growing pause while it raises
    `StoreBusy`, until `limit` seconds have passed; then `StoreBusy` saying how long it
    waited. `say` hears once, after the first second, whom it waits for."""
    start, pause, told = time.monotonic(), _FIRST_PAUSE, False
    while True:
        try:
            return attempt()
        except StoreBusy as busy:
            waited = time.monotonic() - start
            if not waited < limit:  # a NaN limit too: fail, never wait forever
                if not limit > 0:
                    raise
                raise StoreBusy(busy.path, busy.holder, limit) from None
            if say is not None and not told and waited >= _TELL_AFTER:
                say(f"waiting for the store {busy.path} (held by {busy.holder})...")
                told = True
            time.sleep(min(pause, limit - waited))
            pause = min(2 * pause, _LONGEST_PAUSE)


class Store:
    """An open store. Use as a context manager, or call `close()`.

    The file is inspected read-only first (`inspect_store`) and written only when it is
    new or an orchrm store this orchrm can use; a refused file is left untouched. With
    `read_only` nothing is created: a missing or empty store is an error. A store another
    process holds is tried again for up to `wait_for_lock` seconds (`say` hears once,
    after the first second, that it waits), then `StoreBusy`."""

    def __init__(
        self,
        path: str | Path = DEFAULT_PATH,
        read_only: bool = False,
        *,
        wait_for_lock: float = OpenConfig.wait_for_lock,
        say: Callable[[str], None] | None = None,
    ):
        self.path = str(path)
        version = _wait_for_lock(lambda: self._open(read_only), wait_for_lock, say)
        if version is None:
            self._create()
        elif version < SCHEMA_VERSION:
            self._migrate(version)

    def _open(self, read_only: bool) -> int | None:
        """Inspect the file, then connect (`self.db`); the schema version it had."""
        path = self.path
        version = inspect_store(path)
        exists = Path(path).exists()
        if read_only and version is None:
            if not exists:
                raise NoStore(f"{self.path} does not exist: ingest something first")
            raise StoreError(f"{self.path} holds no orchrm store yet: ingest something first")
        if read_only and version < SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {version}: open it writable "
                f"once to migrate it to {SCHEMA_VERSION}"
            )
        if exists and not Path(path).stat().st_size:
            Path(path).unlink()  # an empty file: DuckDB will not start a database in it
        try:
            self.db = connect(self.path, read_only=read_only)
        except duckdb.Error as err:
            raise StoreError(f"cannot open store {self.path}: {_first_line(err)}") from None
        return version

    def _create(self) -> None:
        with self.transaction():
            self.db.execute(_SCHEMA)
            self.db.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])

    def _migrate(self, version: int) -> None:
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


def _records(db: duckdb.DuckDBPyConnection, query: str) -> list[dict]:
    """Every row of `query` as a dict, fetched before the connection runs anything else
    (a DuckDB connection holds one pending result: the next `execute` discards it)."""
    result = db.execute(query)
    names = [d[0] for d in result.description]
    return [dict(zip(names, r, strict=True)) for r in result.fetchall()]


def store_summary(store: Store) -> dict:
    """What the store holds, as plain data (for `orchrm store stats`)."""
    db = store.db
    orchestrations = _records(
        db,
        """
        SELECT o.orchestrator, coalesce(nullif(o.domain, ''), t.domain) AS domain, o.step,
               count(*) AS total, count(*) FILTER (WHERE o.valid) AS valid,
               count(*) FILTER (WHERE o.parsed IS NOT NULL AND NOT o.valid) AS invalid,
               count(*) FILTER (WHERE o.parsed IS NULL) AS unparseable,
               count(e.orch_id) AS executed, count(*) FILTER (WHERE e.correct) AS correct
        FROM orchestrations o JOIN tasks t USING (task_id) LEFT JOIN executions e USING (orch_id)
        GROUP BY ALL ORDER BY ALL
        """,
    )
    pairs = _records(
        db,
        "SELECT dataset, kind, split, count(*) AS pairs, count(DISTINCT task_id) AS tasks "
        "FROM pairs GROUP BY ALL ORDER BY ALL",
    )
    version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    return {
        "schema_version": int(version),
        "counts": store.counts(),
        "orchestrations": orchestrations,
        "pairs": pairs,
    }

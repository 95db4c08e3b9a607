"""orchrm.store.db: a versioned DuckDB file, transactions, content-hash keys."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import time

import duckdb
import pytest

from orchrm.store.db import (
    CONNECTION_CONFIG,
    MIGRATIONS,
    SCHEMA_VERSION,
    Store,
    StoreError,
    connect,
    content_hash,
    store_summary,
)


def test_new_store_records_its_schema_version(tmp_path):
    path = tmp_path / "s.duckdb"
    with Store(path) as store:
        assert store.counts() == dict.fromkeys(
            ("tasks", "orchestrations", "executions", "ingests", "pairs"), 0
        )
    with Store(path, read_only=True) as store:
        assert store_summary(store)["schema_version"] == SCHEMA_VERSION


def test_a_store_from_a_newer_orchrm_is_refused_clearly(tmp_path):
    path = tmp_path / "s.duckdb"
    Store(path).close()
    db = duckdb.connect(str(path))
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)])
    db.close()
    with pytest.raises(StoreError, match="newer orchrm"):
        Store(path)


def test_an_older_store_is_migrated_on_open(tmp_path, monkeypatch):
    path = tmp_path / "s.duckdb"
    Store(path).close()
    db = duckdb.connect(str(path))
    db.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    db.close()
    monkeypatch.setattr(
        "orchrm.store.db.MIGRATIONS",
        {**MIGRATIONS, 0: "CREATE TABLE IF NOT EXISTS migrated (x INTEGER)"},
    )
    with pytest.raises(StoreError, match="open it writable"):
        Store(path, read_only=True)
    with Store(path) as store:
        assert store_summary(store)["schema_version"] == SCHEMA_VERSION
        assert store.db.execute("SELECT count(*) FROM migrated").fetchone() == (0,)


def test_a_version_1_store_gives_its_pairs_weight_1(tmp_path):
    """Version 2 added the pairs' weight: a version-1 store's pairs read as sure pairs."""
    path = tmp_path / "s.duckdb"
    Store(path).close()
    _plain_duckdb(
        path,
        "ALTER TABLE pairs DROP COLUMN weight",
        "INSERT INTO pairs VALUES ('d', 'p', 't', 'coi', 'a', 'b', 'train')",
        "UPDATE meta SET value = '1' WHERE key = 'schema_version'",
    )
    with Store(path) as store:
        assert store_summary(store)["schema_version"] == SCHEMA_VERSION == 2
        assert store.db.execute("SELECT pair_id, weight FROM pairs").fetchall() == [("p", 1.0)]


def _store_with_rows(path):
    with Store(path) as store:
        store.db.execute(
            "INSERT INTO tasks SELECT 't' || i, repeat('q', 200), NULL, 'math' "
            "FROM range(3000) r(i)"
        )


def _plain_duckdb(path, *statements):
    db = duckdb.connect(str(path))
    for statement in statements:
        db.execute(statement)
    db.close()


def _newer(path):
    Store(path).close()
    _plain_duckdb(path, f"UPDATE meta SET value = '{SCHEMA_VERSION + 1}'")


def _unmigratable(path):
    Store(path).close()
    _plain_duckdb(path, "UPDATE meta SET value = '0'")


def _foreign(path):
    _plain_duckdb(path, "CREATE TABLE customers (id INTEGER, name VARCHAR)")


def _foreign_meta(path):
    _plain_duckdb(path, "CREATE TABLE meta (id INTEGER)", "CREATE TABLE other (x INTEGER)")


def _meta_dropped(path):
    Store(path).close()
    _plain_duckdb(path, "DROP TABLE meta")


def _version_text(path):
    Store(path).close()
    _plain_duckdb(path, "UPDATE meta SET value = 'one'")


def _no_version_row(path):
    Store(path).close()
    _plain_duckdb(path, "DELETE FROM meta")


def _table_dropped(path):
    Store(path).close()
    _plain_duckdb(path, "DROP TABLE pairs")


def _sqlite(path):
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()


def _truncated(keep):
    def make(path):
        _store_with_rows(path)
        data = path.read_bytes()
        path.write_bytes(data[: keep(len(data))])

    return make


def _garbled(path):
    _store_with_rows(path)
    data = bytearray(path.read_bytes())
    data[4096:12288] = os.urandom(8192)  # both database headers
    path.write_bytes(bytes(data))


REFUSED = {
    "newer version": (_newer, "newer orchrm"),
    "version with no migration": (_unmigratable, "cannot migrate"),
    "foreign DuckDB database": (_foreign, r"not an orchrm store: it has tables \(customers\)"),
    "foreign meta table": (_foreign_meta, "meta table has no key/value columns"),
    "meta table dropped": (_meta_dropped, "orchrm's tables but no meta table"),
    "version not a number": (_version_text, "schema version 'one'"),
    "no version row": (_no_version_row, "no schema version"),
    "table dropped": (_table_dropped, r"damaged: table\(s\) pairs missing"),
    "SQLite file": (_sqlite, "SQLite database, not a DuckDB database"),
    "text file": (lambda p: p.write_text("not a database\n" * 10), "not a DuckDB database"),
    "random bytes": (lambda p: p.write_bytes(os.urandom(70_000)), "not a DuckDB database"),
    "cut after 100 bytes": (_truncated(lambda n: 100), "cannot open store"),
    "cut in half": (_truncated(lambda n: n // 2), "is damaged"),
    "one byte short": (_truncated(lambda n: n - 1), "damaged: .*truncated"),
    "headers garbled": (_garbled, "cannot open store"),
}


def _fingerprint(folder):
    """Every file in the folder: name, content hash and modification time."""
    return {
        p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(folder.iterdir())
    }


@pytest.mark.parametrize("read_only", [False, True], ids=["writable", "read-only"])
@pytest.mark.parametrize("case", list(REFUSED))
def test_a_file_orchrm_cannot_use_is_refused_and_left_byte_identical(tmp_path, case, read_only):
    make, reason = REFUSED[case]
    path = tmp_path / "s.duckdb"
    make(path)
    before = _fingerprint(tmp_path)
    time.sleep(0.01)  # a write would move the modification time
    with pytest.raises(StoreError, match=reason) as refused:
        Store(path, read_only=read_only)
    assert str(path) in str(refused.value)
    assert _fingerprint(tmp_path) == before  # same bytes, same mtime, no new file


def test_a_store_that_grew_and_shrank_over_many_writes_opens_again(tmp_path):
    # DuckDB drops free blocks at the end of the file on checkpoint, so a healthy
    # store can be shorter than the header's total block count.
    path = tmp_path / "s.duckdb"
    for cycle in range(6):
        with Store(path) as store, store.transaction() as db:
            db.execute(f"CREATE TABLE scratch_{cycle} AS SELECT range AS x FROM range(200000)")
            if cycle:
                db.execute(f"DROP TABLE scratch_{cycle - 1}")
    with Store(path, read_only=True) as store:
        assert store.counts() == dict.fromkeys(
            ("tasks", "orchestrations", "executions", "ingests", "pairs"), 0
        )
        scratch = "SELECT table_name FROM duckdb_tables() WHERE table_name LIKE 'scratch%'"
        assert store.db.execute(scratch).fetchall() == [("scratch_5",)]  # drops kept too
        kept = store.db.execute("SELECT count(*), sum(x) FROM scratch_5").fetchone()
        assert kept == (200_000, sum(range(200_000)))  # the last write, whole


def test_a_missing_store_is_created_only_by_a_writable_open(tmp_path):
    path = tmp_path / "s.duckdb"
    with pytest.raises(StoreError, match="does not exist"):
        Store(path, read_only=True)
    assert not list(tmp_path.iterdir())
    with Store(path) as store:
        assert store.counts()["tasks"] == 0


@pytest.mark.parametrize("kind", ["empty file", "empty DuckDB database"])
def test_an_empty_file_becomes_a_fresh_store(tmp_path, kind):
    path = tmp_path / "s.duckdb"
    if kind == "empty file":
        path.touch()
    else:
        _plain_duckdb(path)
    before = _fingerprint(tmp_path)
    with pytest.raises(StoreError, match="holds no orchrm store yet"):
        Store(path, read_only=True)
    assert _fingerprint(tmp_path) == before
    with Store(path) as store:
        assert store.counts()["pairs"] == 0
    with Store(path, read_only=True) as store:
        assert store_summary(store)["schema_version"] == SCHEMA_VERSION


def test_every_connection_has_extension_downloads_and_file_access_off(tmp_path):
    with Store(tmp_path / "s.duckdb") as store:
        settings = dict(
            store.db.execute(
                "SELECT name, value FROM duckdb_settings() WHERE name IN ?",
                [list(CONNECTION_CONFIG)],
            ).fetchall()
        )
        assert settings == {
            "autoinstall_known_extensions": "false",
            "autoload_known_extensions": "false",
            "allow_community_extensions": "false",
            "enable_external_access": "false",
            "lock_configuration": "true",
        }
        # SQL sent to the store can neither turn them back on nor read other files.
        with pytest.raises(duckdb.Error, match="locked"):
            store.db.execute("SET autoinstall_known_extensions = true")
        with pytest.raises(duckdb.Error):
            store.db.execute(f"SELECT * FROM read_csv('{tmp_path / 's.duckdb'}')")


def test_a_sqlite_file_fails_fast_and_never_reaches_duckdb(tmp_path, monkeypatch):
    path = tmp_path / "s.sqlite"
    _sqlite(path)
    opened = []
    monkeypatch.setattr("orchrm.store.db.duckdb.connect", lambda *a, **k: opened.append(a))
    with pytest.raises(StoreError, match="SQLite database"):
        Store(path)
    assert opened == []
    monkeypatch.undo()
    # Were DuckDB handed it anyway, it refuses to fetch the sqlite extension it would need.
    started = time.perf_counter()
    with pytest.raises(duckdb.Error, match="disabled"):
        connect(path, read_only=True)
    assert time.perf_counter() - started < 10


def _strace_works() -> bool:
    if shutil.which("strace") is None:
        return False
    probe = subprocess.run(["strace", "-qq", "-o", os.devnull, "true"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _strace_works(), reason="needs strace (system calls are watched)")
def test_opening_a_sqlite_file_opens_no_network_socket(tmp_path):
    path = tmp_path / "s.sqlite"
    _sqlite(path)
    script = """
import sys
from orchrm.store.db import Store, connect
for attempt in (lambda: Store(sys.argv[1]), lambda: connect(sys.argv[1], read_only=True)):
    try:
        attempt()
    except Exception as err:
        print(type(err).__name__)
"""
    log = tmp_path / "calls.txt"
    watch = ["strace", "-f", "-qq", "-e", "trace=socket,connect", "-o", str(log)]
    done = subprocess.run(
        [*watch, sys.executable, "-c", script, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.split() == ["StoreError", "PermissionException"], done.stderr[-2000:]
    calls = log.read_text()
    assert "AF_INET" not in calls, calls  # no DNS look-up, no download


def test_a_second_store_in_the_same_process_shares_the_open_file(tmp_path):
    path = tmp_path / "s.duckdb"
    with Store(path) as first, Store(path) as second:
        second.db.execute("INSERT INTO tasks VALUES ('t1', 'q', NULL, 'math')")
        assert first.counts()["tasks"] == 1


def test_a_store_another_process_writes_to_is_refused_by_name(tmp_path):
    path = tmp_path / "s.duckdb"
    Store(path).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, sys, time; db = duckdb.connect({str(path)!r}); "
            "print('open', flush=True); time.sleep(120)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(StoreError, match=f"cannot open store {path}.*lock"):
            Store(path)
    finally:
        holder.kill()
        holder.wait()


def test_transaction_lands_whole_or_not_at_all(tmp_path):
    with Store(tmp_path / "s.duckdb") as store:
        with pytest.raises(RuntimeError), store.transaction() as db:
            db.execute("INSERT INTO tasks VALUES ('t1', 'q', NULL, 'math')")
            raise RuntimeError("boom")
        assert store.counts()["tasks"] == 0
        with store.transaction() as db:
            db.execute("INSERT INTO tasks VALUES ('t1', 'q', NULL, 'math')")
        assert store.counts()["tasks"] == 1


def test_content_hash_is_stable_and_separates_fields():
    assert content_hash("a", 1, None) == content_hash("a", 1, None)
    assert content_hash("ab", "c") != content_hash("a", "bc")
    assert len(content_hash("x")) == 32

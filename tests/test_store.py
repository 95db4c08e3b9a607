"""orchrm.store.db: a versioned DuckDB file, transactions, content-hash keys."""

from __future__ import annotations

import duckdb
import pytest

from orchrm.store.db import SCHEMA_VERSION, Store, StoreError, content_hash, store_summary


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
        "orchrm.store.db.MIGRATIONS", {0: "CREATE TABLE IF NOT EXISTS migrated (x INTEGER)"}
    )
    with pytest.raises(StoreError, match="open it writable"):
        Store(path, read_only=True)
    with Store(path) as store:
        assert store_summary(store)["schema_version"] == SCHEMA_VERSION
        assert store.db.execute("SELECT count(*) FROM migrated").fetchone() == (0,)


def test_a_file_that_is_not_a_store_is_refused(tmp_path):
    path = tmp_path / "junk.duckdb"
    path.write_text("not a database")
    with pytest.raises(StoreError, match="cannot open store"):
        Store(path)


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

"""A store another process holds: exit status 5 with one line naming the store and the
holder, a JSON error under `--json`, and `--wait-for-lock` waiting for it. The lock is
real: a second process opens the store with DuckDB and holds it until told to let go."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchrm.store.db import Store, StoreBusy
from orchrm.store.lock import LockHolder, lock_holder
from tests.samples import HIGH_DOM

ORCHRM = Path(sys.executable).with_name("orchrm")
DUCKDB_TEXT = (
    'IO Error: Could not set lock on file "/data/s.duckdb": Conflicting lock is held in '
    "/usr/bin/python3.11 (PID 4242). See also https://duckdb.org/docs/current/connect/concurrency"
)
HOLD = (
    "import sys, duckdb\n"
    "db = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == 'read')\n"
    "print('held', flush=True)\n"
    "sys.stdin.readline()\n"
    "db.close()\n"
)
"""A process that holds the store, read-write or read-only, until a line on its stdin."""


def hold(path: Path, mode: str = "write") -> subprocess.Popen:
    """A process holding the store at `path` (`mode` write or read), once it says so."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


def release(holder: subprocess.Popen) -> None:
    """Tell the holder to close the store and wait for it to exit."""
    if holder.poll() is None:
        holder.stdin.write("\n")
        holder.stdin.flush()
    holder.wait(timeout=10)


@pytest.fixture
def store(tmp_path) -> Path:
    """A store with no rows, closed."""
    path = tmp_path / "s.duckdb"
    Store(path).close()
    return path


@pytest.fixture
def held(store):
    """The store, held read-write by another process."""
    holder = hold(store)
    yield holder
    holder.kill()
    holder.wait()


@pytest.fixture
def log(tmp_path) -> Path:
    path = tmp_path / "log.jsonl"
    path.write_text(json.dumps({"q": "What is 2 + 2?", "o": HIGH_DOM}) + "\n")
    return path


GENERIC = ("--adapter", "generic", "--map", "question=q", "--map", "orchestration=o")


def test_the_holder_is_read_from_duckdbs_lock_text():
    assert lock_holder(DUCKDB_TEXT) == LockHolder(4242, "/usr/bin/python3.11")
    assert str(lock_holder(DUCKDB_TEXT)) == "PID 4242, /usr/bin/python3.11"
    unnamed = 'IO Error: Could not set lock on file "C:\\s.duckdb": the file is in use'
    assert lock_holder(unnamed) == LockHolder()
    assert str(LockHolder()) == "DuckDB does not say which"
    cut = DUCKDB_TEXT.replace("(PID 4242)", "(PID 42")
    assert lock_holder(cut) == LockHolder(None, "/usr/bin/python3.11")
    assert lock_holder("IO Error: Cannot open file: No such file or directory") is None


def test_reading_the_lock_text_is_linear_in_hostile_text():
    hostile = "Conflicting lock is held in " + "(PID 1" * 200_000 + "\n(PID " + "9" * 100_000
    start = time.perf_counter()
    holder = lock_holder(hostile)
    assert time.perf_counter() - start < 1
    assert holder.pid is None and len(holder.program or "") <= 500
    assert "\n" not in (lock_holder(DUCKDB_TEXT.replace("python3.11", "py\nthon")).program)


@pytest.mark.parametrize(("holding", "read_only"), [("write", True), ("read", False)])
def test_the_store_says_who_holds_it_and_how_long_it_waited(store, holding, read_only):
    holder = hold(store, holding)
    try:
        with pytest.raises(StoreBusy) as busy:
            Store(store, read_only=read_only)
        assert busy.value.exit_code == 5 and busy.value.holder.pid == holder.pid
        assert str(busy.value) == (
            f"cannot open store {store}: another process holds its lock ({busy.value.holder}); "
            "wait for it to finish and try again"
        )
        said = []
        start = time.monotonic()
        with pytest.raises(StoreBusy, match=r"still holds its lock after 0\.3 s") as late:
            Store(store, read_only=read_only, wait_for_lock=0.3, say=said.append)
        assert 0.3 <= time.monotonic() - start < 5 and not said  # told only after 1 s
        assert late.value.to_dict()["pid"] == holder.pid
    finally:
        release(holder)
    with Store(store, read_only=read_only) as opened:
        assert opened.counts()["tasks"] == 0


def test_a_busy_store_is_exit_status_5_and_one_line_naming_it_and_its_holder(
    store, held, log, orchrm_cli
):
    for command in (("ingest", str(log), *GENERIC), ("store", "stats")):
        result = orchrm_cli(*command, "--store", str(store), timeout=60)
        assert result.returncode == 5, result.stderr
        assert result.stdout == ""
        [line] = result.stderr.strip().splitlines()
        assert line.startswith(f"error: cannot open store {store}: another process holds")
        assert f"(PID {held.pid}, " in line and "--wait-for-lock SECONDS" in line


def test_a_busy_store_under_json_prints_a_json_error(store, held, log, orchrm_cli):
    for command in (("ingest", str(log), *GENERIC), ("store", "stats"), ("pairs", "mine")):
        result = orchrm_cli(*command, "--store", str(store), "--json", timeout=60)
        assert result.returncode == 5, result.stderr
        error = json.loads(result.stdout)
        assert error["error"] == "store_busy" and error["store"] == str(store)
        assert error["pid"] == held.pid and error["waited_s"] == 0
        assert result.stderr.strip() == f"error: {error['message']}"


def test_waiting_for_the_lock_ingests_once_the_holder_lets_go(store, held, log):
    command = ("ingest", str(log), *GENERIC, "--store", str(store), "--json")
    waiting = subprocess.Popen(
        [ORCHRM, *command, "--wait-for-lock", "10"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200", "HF_HUB_OFFLINE": "1"},
    )
    try:
        said = waiting.stderr.readline()  # after its first second of waiting
        assert said.startswith(f"waiting for the store {store} (held by PID {held.pid}, ")
        release(held)
        out, err = waiting.communicate(timeout=30)
    finally:
        waiting.kill()
    assert waiting.returncode == 0, err
    assert [s["added"] for s in json.loads(out)] == [1]

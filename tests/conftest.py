"""Fixtures every test module may use, and the environment every test starts from.

A test's verdict must not depend on the machine it lands on, so the host's say in it is
taken away here, before orchrm, typer or torch is imported:

- precision: `dtype auto` resolves to fp32 unless the run says otherwise
  (`ORCHRM_BF16=1 make test` runs the whole suite with auto meaning bf16); tests that
  check a precision set it themselves (`dtype=`, or ORCHRM_BF16 through monkeypatch);
- the terminal: the host's width and colour settings (COLUMNS, FORCE_COLOR,
  GITHUB_ACTIONS, ...) are dropped, so rich and typer print plain text at their
  defaults; tests that need a width give it;
- parallel: the suite runs on pytest-xdist workers, one per core up to four, each
  test file on one worker and the files that keep other processes busy (`SHARE_CORES`)
  on one together, the larger groups first (`-n 0` runs it in one process);
- threads: the cores shared among the workers, at most two OpenMP/PyTorch threads a
  worker (one on CI's 2 cores with its 2 workers), unless the run says (OMP_NUM_THREADS);
  `THREADS` gives the same count to what a test starts (a llama.cpp server);
- proxies: loopback is never sent through a proxy the host names;
- the command: `orchrm_cli` (`run_orchrm`) runs `orchrm` in the test's own process
  through typer's test runner, and puts back what a command sets for the whole process;
  a test that needs what only a process shows (a signal, a lock another process holds,
  the installed entry point) asks for a process of its own;
- caches: orchrm's cache (`ORCHRM_CACHE`: GGUF files converted to model directories) is
  one folder per run, shared by its workers, never the user's;
- randomness: the suite runs in a random order (pytest-randomly; the last line of the
  run gives its seed, and `--randomly-seed=N` repeats that order, `-p no:randomly` keeps
  the file order). So that no test draws on what the tests before it left in a random
  generator, torch is seeded before every fixture is built and every test runs, from
  the fixture's or the test's name: the same weights whatever ran before; the
  servers' log limiter starts every test empty, and so does PyTorch's thread count.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

for _name in (
    "COLUMNS",
    "LINES",
    "FORCE_COLOR",
    "NO_COLOR",
    "PY_COLORS",
    "TTY_COMPATIBLE",
    "TTY_INTERACTIVE",
    "TERMINAL_WIDTH",
    "GITHUB_ACTIONS",
):
    os.environ.pop(_name, None)
os.environ.setdefault("ORCHRM_BF16", "0")
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
os.environ.setdefault("OMP_NUM_THREADS", str(max(1, min(2, (os.cpu_count() or 2) // _WORKERS))))
THREADS = int(os.environ["OMP_NUM_THREADS"])
"""The threads a test gives what it starts: a worker's share of the cores (at most 2)."""
os.environ["HF_HUB_OFFLINE"] = "1"
for _name in ("NO_PROXY", "no_proxy"):
    _kept = [h for h in os.environ.get(_name, "").split(",") if h]
    os.environ[_name] = ",".join([*_kept, "127.0.0.1", "localhost", "::1"])

ORCHRM = Path(sys.executable).with_name("orchrm")


def _seed_torch(name: str) -> None:
    """torch's generators set from `name` alone (torch is imported by then, or nothing
    has drawn from it)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(zlib.crc32(name.encode()))


@pytest.hookimpl(tryfirst=True)
def pytest_fixture_setup(fixturedef, request) -> None:
    _seed_torch(f"{fixturedef.baseid}::{fixturedef.argname}")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item) -> None:
    _seed_torch(item.nodeid)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    """The servers' log limiter is one per process: a test that checks a log line must
    not find its kind spent by the refusals of the tests before it. PyTorch's thread
    count is one per process too: every test starts with the run's (OMP_NUM_THREADS),
    whatever an earlier test set, so a model scored here sums as one scored in a
    subprocess does (bf16 sums differ with the thread count)."""
    guard = sys.modules.get("orchrm.serve.guard")
    if guard is not None:
        guard._LIMITER.reset()
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.fixture(scope="session", autouse=True)
def _run_cache(tmp_path_factory) -> None:
    """`ORCHRM_CACHE` in this run's temporary folder, one for all its xdist workers (and
    the processes tests start): a GGUF is converted once per run, under its lock."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    os.environ["ORCHRM_CACHE"] = str(root / "orchrm-cache")


SHARE_CORES = {
    "test_real_llm.py",
    "test_real_exec.py",
    "test_rl_pretrained.py",
    "test_rm.py",
    "test_rm_scale.py",
}
"""Test files whose tests keep a core busy from other processes (a llama.cpp server, an
`accelerate launch` of two processes): they run on one worker, one after the other, so
no two of them share the cores at once."""


def pytest_xdist_make_scheduler(config, log):
    """Each test file runs on one xdist worker, its module fixtures built once; the files
    of `SHARE_CORES` all on the same one, one after the other. Groups are given to the
    scheduler here rather than through `xdist_group` marks: xdist writes those into the
    test ids, which pytest 9.2 no longer reads back (pytest-xdist issue 1386)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "share-cores" if Path(path).name in SHARE_CORES else path

    return ByFile(config, log)


@pytest.fixture
def launch_port() -> str:
    """A free loopback port for `accelerate launch --main_process_port`: its default,
    29500, is taken by any other distributed job on the machine."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


def run_orchrm(
    *args: str,
    cwd: str | os.PathLike | None = None,
    process: bool = False,
    timeout: float = 300,
    columns: int | None = 200,
) -> subprocess.CompletedProcess:
    """Run `orchrm *args` offline, `columns` wide (None: COLUMNS unset, as in a pipe), and
    return what it printed and its exit status as `subprocess.run` would.

    In this process by default, through typer's test runner (click's `CliRunner`: stdin
    empty, stdout and stderr captured apart), with what a command sets for the whole
    process put back after it: environment variables, the libraries' log levels and
    warning filters, the working directory, torch's thread count. A bug's traceback is
    written to stderr as the installed command writes it. `process=True` runs the
    installed command in a process of its own instead, for what only a process shows
    (a lock held by another process, a signal, the entry point itself); `timeout`
    applies to it alone."""
    width = {"COLUMNS": None if columns is None else str(columns)}
    if process:
        env = {k: v for k, v in {**os.environ, **width}.items() if v is not None}
        command = [str(ORCHRM)] if ORCHRM.exists() else [sys.executable, "-m", "orchrm"]
        return subprocess.run(
            [*command, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
            env={**env, "HF_HUB_OFFLINE": "1"},
        )
    import logging
    import traceback
    import warnings

    from typer.testing import CliRunner

    from orchrm.cli import THIRD_PARTY, app

    environ, here = dict(os.environ), os.getcwd()
    levels = {name: logging.getLogger(name).level for name in THIRD_PARTY}
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    try:
        if cwd is not None:
            os.chdir(cwd)
        with warnings.catch_warnings():
            result = CliRunner().invoke(app, [str(a) for a in args], env=width, prog_name="orchrm")
    finally:
        os.chdir(here)
        os.environ.clear()
        os.environ.update(environ)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(threads or int(os.environ["OMP_NUM_THREADS"]))
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(["orchrm", *args], result.exit_code, result.stdout, stderr)


@pytest.fixture
def orchrm_cli() -> Callable[..., subprocess.CompletedProcess]:
    """`run_orchrm`: the `orchrm` command run in this process (`process=True`: in its own)."""
    return run_orchrm


def every_command(command, path=()):
    """Every command under `command` with its path, groups included."""
    import typer

    yield path, command
    if hasattr(command, "list_commands"):
        ctx = typer.Context(command)
        for name in command.list_commands(ctx):
            yield from every_command(command.get_command(ctx, name), (*path, name))


def pytest_terminal_summary(terminalreporter, config) -> None:
    """The random order's seed, printed even under -q, so a failure's order can be run
    again."""
    seed = getattr(config.option, "randomly_seed", None)
    if isinstance(seed, int) and config.pluginmanager.hasplugin("randomly"):
        terminalreporter.write_line(f"test order: random, --randomly-seed={seed} repeats it")

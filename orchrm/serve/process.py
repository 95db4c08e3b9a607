"""`orchrm serve` in a process of its own, as a service manager runs it: the command that
starts it, a free loopback port, and `serve_process`, which starts it there, waits until
/healthz answers and stops it at the end."""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

STARTUP_S = 120.0
"""How long `serve_process` waits for /healthz to answer before it gives up."""
STOP_S = 60.0
"""How long `serve_process` waits after SIGTERM before it kills the server."""


def orchrm_command() -> list[str]:
    """The installed `orchrm` command beside this Python, else `python -m orchrm` (orchrm
    on the path without its console script, as on a machine that reads it from a
    checkout)."""
    script = Path(sys.executable).with_name("orchrm")
    return [str(script)] if script.exists() else [sys.executable, "-m", "orchrm"]


def free_port() -> int:
    """A loopback port no socket holds at the moment of asking."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(port: int, path: str) -> tuple[int, str]:
    """(status, body text) of a GET on the loopback."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


@contextlib.contextmanager
def serve_process(model: Path, log: Path, *options: str) -> Iterator[tuple[subprocess.Popen, int]]:
    """`orchrm serve` of `model` in its own process on a free loopback port, in fp32, with
    every limit at its default unless `options` (more `orchrm serve` options) set it, and
    without `ORCHRM_API_KEY`; its output goes to the file `log`. Yields (process, port)
    once /healthz answers (RuntimeError with the log when it exits first or does not
    answer within `STARTUP_S`). At the end, a server still running gets SIGTERM, and is
    killed after `STOP_S`."""
    port = free_port()
    args = ["serve", "--rm", str(model), "--port", str(port), "--dtype", "fp32", *options]
    env = {k: v for k, v in os.environ.items() if k != "ORCHRM_API_KEY"}
    with log.open("w") as out:
        process = subprocess.Popen(
            [*orchrm_command(), *args], stdout=out, stderr=subprocess.STDOUT, env=env
        )
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            if process.poll() is not None or time.monotonic() >= deadline:
                raise RuntimeError(f"`orchrm serve` did not answer /healthz:\n{log.read_text()}")
            try:
                if get(port, "/healthz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)
        yield process, port
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def orchrm_serve(model: Path, log: Path, *options: str) -> Iterator[int]:
    """`serve_process`, yielding its port."""
    with serve_process(model, log, *options) as (_, port):
        yield port

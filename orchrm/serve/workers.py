"""Worker processes for work whose cost grows with untrusted input, under a deadline.

A `WorkerPool` keeps `size` Python processes, each running one job at a time: a
picklable function and its arguments, sent over a socket pair. A job past its deadline
is answered with `WorkerTimeout` at once; its worker gets a short grace to finish and
is then killed and replaced (threads cannot be stopped, processes can), so a slow job
costs the service one worker for its deadline plus the grace, and never the event loop,
which does no such work itself. Callers beyond `max_queued` waiting for a worker get
`WorkerBusy` at once rather than a place in an unbounded queue.

Workers are started with `python -c`, not `multiprocessing`, so they never re-run the
embedding program's main module; each exits when the service's end of its socket closes.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import subprocess
import sys
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import Any

log = logging.getLogger("orchrm.serve")

GRACE_S = 1.0
"""How long a job past its deadline may still finish before its worker is killed."""
RESTART_BACKOFF_S = (0.5, 2.0, 10.0)
"""Waits between failed attempts to replace a worker (the last one repeats)."""


class WorkerBusy(Exception):
    """Every worker is busy and `max_queued` callers are already waiting."""


class WorkerTimeout(Exception):
    """The job did not finish before its deadline."""


class WorkerFailed(Exception):
    """The job raised an error the pool does not pass through, or its worker died; the
    message holds the worker's traceback."""


def worker_main(fd: int) -> None:
    """A worker's loop: run each received (function, args), send back its outcome."""
    conn = Connection(fd)
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        fn, args = job
        try:
            outcome: tuple = ("ok", fn(*args))
        except Exception as err:  # sent back; the caller decides what it means
            outcome = ("raised", err, traceback.format_exc())
        try:
            conn.send(outcome)
        except Exception:  # the outcome does not pickle: send its traceback alone
            conn.send(("raised", None, traceback.format_exc()))


class _Worker:
    """One worker process and the service's end of its socket."""

    def __init__(self, initializer: tuple[Callable, tuple] | None):
        self.initializer = initializer
        self.process: subprocess.Popen | None = None
        self.conn: Connection | None = None

    def start(self) -> None:
        """Start the process and run the initializer in it (blocking)."""
        ours, theirs = socket.socketpair()
        code = "import sys; from orchrm.serve.workers import worker_main as m; m(int(sys.argv[1]))"
        self.process = subprocess.Popen(
            [sys.executable, "-c", code, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        self.conn = Connection(ours.detach())
        if self.initializer is not None:
            unwrap(self.call(*self.initializer))

    def call(self, fn: Callable, args: tuple) -> tuple:
        """Run `fn(*args)` in the process (blocking): its outcome, or ("died", ...)."""
        try:
            self.conn.send((fn, args))
            return self.conn.recv()
        except (EOFError, OSError):
            return ("died", None, f"the worker process exited ({self.process.poll()})")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
            self.process.wait()

    def stop(self, timeout: float = 2.0) -> None:
        """Ask the process to exit; kill it if it has not within `timeout`."""
        if self.alive():
            try:
                self.conn.send(None)
                self.process.wait(timeout)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        if self.conn is not None:
            self.conn.close()


def unwrap(outcome: tuple) -> Any:
    """A job's result, or its error raised here: `passthrough` errors as they are
    (the worker's `ApiError`), anything else as `WorkerFailed`."""
    if outcome[0] == "ok":
        return outcome[1]
    _, err, text = outcome
    if err is not None and getattr(err, "passthrough", False):
        raise err
    raise WorkerFailed(text)


class WorkerPool:
    """`size` worker processes running jobs under deadlines (module docstring).
    `on_restart()` is called each time a worker is replaced."""

    def __init__(
        self,
        size: int,
        max_queued: int,
        initializer: tuple[Callable, tuple] | None = None,
        on_restart: Callable[[], None] = lambda: None,
    ):
        self.size, self.max_queued, self.on_restart = size, max_queued, on_restart
        self._workers = [_Worker(initializer) for _ in range(size)]
        self._threads = ThreadPoolExecutor(2 * size, thread_name_prefix="orchrm-prepare")
        self._idle: asyncio.Queue[_Worker] | None = None
        self._waiting = 0
        self._background: set[asyncio.Task] = set()
        self._closing = False

    async def start(self) -> None:
        """Start every worker (on the running event loop) and wait until all are ready."""
        loop = asyncio.get_running_loop()
        self._idle = asyncio.Queue()
        await asyncio.gather(*(loop.run_in_executor(self._threads, w.start) for w in self._workers))
        for w in self._workers:
            self._idle.put_nowait(w)

    async def run(self, deadline: float, fn: Callable, *args: Any) -> Any:
        """`fn(*args)` in a worker, by `deadline` (the event loop's clock)."""
        loop = asyncio.get_running_loop()
        if self._waiting >= self.max_queued and self._idle.empty():
            raise WorkerBusy(f"{self._waiting} requests are already waiting for a worker")
        self._waiting += 1
        try:
            worker = await asyncio.wait_for(self._idle.get(), deadline - loop.time())
        except TimeoutError:
            raise WorkerTimeout("no worker came free before the deadline") from None
        finally:
            self._waiting -= 1
        job = loop.run_in_executor(self._threads, worker.call, fn, args)
        try:
            outcome = await asyncio.wait_for(asyncio.shield(job), deadline - loop.time())
        except (TimeoutError, asyncio.CancelledError) as err:
            self._spawn(self._reclaim(worker, job))
            if isinstance(err, asyncio.CancelledError):
                raise
            raise WorkerTimeout("the job ran past its deadline") from None
        self._spawn(self._give_back(worker))
        return unwrap(outcome)

    async def close(self) -> None:
        """Stop every worker (those still running a job are killed)."""
        self._closing = True
        for task in list(self._background):
            task.cancel()
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(self._threads, w.stop) for w in self._workers))
        self._threads.shutdown(wait=False, cancel_futures=True)

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _reclaim(self, worker: _Worker, job: asyncio.Future) -> None:
        """Give an overrunning job `GRACE_S` to finish, else kill its worker; then hand
        the worker (replaced if it had to die) back to the pool."""
        try:
            await asyncio.wait_for(asyncio.shield(job), GRACE_S)
        except TimeoutError:
            worker.kill()
            await job
        await self._give_back(worker)

    async def _give_back(self, worker: _Worker) -> None:
        """Put `worker` back in the idle queue, replacing its process first if it died."""
        loop = asyncio.get_running_loop()
        attempt = 0
        while not worker.alive() and not self._closing:
            try:
                await loop.run_in_executor(self._threads, worker.start)
                self.on_restart()
            except Exception as err:  # a failed start is retried, not fatal
                wait = RESTART_BACKOFF_S[min(attempt, len(RESTART_BACKOFF_S) - 1)]
                log.error("could not start a prepare worker (%s); retrying in %g s", err, wait)
                worker.kill()
                attempt += 1
                await asyncio.sleep(wait)
        if not self._closing:
            self._idle.put_nowait(worker)

"""`CallerBatcher`: one scorer shared by many threads, their calls scored together.

Frameworks call a reward function the way they run everything else: verl's reward loop
calls a synchronous reward function from an executor thread per sample, TRL and user code
from their own threads. A model and its tokenizer are not safe to use from several threads
at once (a fast tokenizer holds its truncation setting as state that every call changes),
and scoring one text per call leaves the batched forward pass unused. A `CallerBatcher`
serves both needs: callers queue their items, and one worker thread (started when calls
arrive, gone when none is left) scores every call queued so far in one round, then the
calls that arrived meanwhile in the next. Every call gets its own results, in its own
order, and only one thread at a time touches the model.

A failure stays with the call that caused it: a round of several calls that raises is
scored again one call at a time, so the other calls get the results they would have got
alone and only a call whose own items fail gets the error, raised in its thread as a copy
of its own. A scorer that does not return within the round's bound (`timeout_s`) fails
the calls waiting on it with `ScoringTimeout` instead of holding them forever.
"""

from __future__ import annotations

import copy
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from orchrm.errors import ConfigError, OrchrmError

Item = TypeVar("Item")
Result = TypeVar("Result")

ITEMS_PER_TIMEOUT = 32
"""A call of the scorer may take `timeout_s` per this many items it is given, so that one
call of a whole file (one round of thousands of items) is not cut off; 32 is the forward
batch of `OrchRM` and the request size of `RemoteScorer`."""


class ScoringError(OrchrmError):
    """A scoring round failed without an error of the scorer's own to pass on: it hung
    (`ScoringTimeout`), or it raised an error that cannot be copied for each caller."""


class ScoringTimeout(ScoringError, TimeoutError):
    """The scorer has not returned within its bound (`CallerBatcher.timeout_s`): the calls
    it was scoring, and those waiting behind it, fail with this."""


class _Call(Generic[Item, Result]):
    """One caller's items and, once done, its results or the error it gets. A call is also
    done once its caller has given up waiting (a timeout): the worker then drops it."""

    __slots__ = ("done", "error", "items", "results")

    def __init__(self, items: list[Item]) -> None:
        self.items = items
        self.results: list[Result] | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()

    def outcome(self) -> list[Result]:
        """The results, or a fresh copy of the error raised `from` it in this thread."""
        if self.error is not None:
            raise _fresh(self.error) from self.error
        assert self.results is not None
        return self.results


@dataclass(frozen=True)
class _Attempt:
    """The call of the scorer running now: when it is overdue, and what it holds."""

    calls: list[_Call]
    items: int
    bound_s: float
    deadline: float


class CallerBatcher(Generic[Item, Result]):
    """Calls of `run` from any number of threads, one round at a time, each round the
    concatenation of every call queued since the last (module docstring). `run` takes a
    list of items and returns one result per item, in order.

    An error of a round of several calls sends each call to `run` again alone: each call
    then gets exactly its one-at-a-time results or the error its own items raise, as a
    copy of the same type (an error whose type cannot be copied arrives as a
    `ScoringError`), raised from the original in the caller's thread.

    `timeout_s` bounds each call of `run`: `timeout_s` per `ITEMS_PER_TIMEOUT` items it
    is given (None: no bound). Once a call of `run` is overdue, its callers, the calls
    queued behind it and calls arriving while it still runs fail with `ScoringTimeout`.
    Its thread cannot be stopped and keeps the scorer; if it ever returns, its results
    are dropped and later calls are scored as before. The default, 600 s per 32 items, is
    about twice the longest a `RemoteScorer` request of 32 texts may take with its
    default retries (5 tries of 60 s).

    `rounds` and `largest_round` (in calls) say how much batching took place."""

    def __init__(
        self, run: Callable[[list[Item]], Sequence[Result]], timeout_s: float | None = 600.0
    ) -> None:
        if timeout_s is not None and not timeout_s > 0:
            raise ConfigError(f"timeout_s must be more than 0 or None, not {timeout_s!r}")
        self._run = run
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._queued: list[_Call[Item, Result]] = []
        self._serving = False  # a worker thread is alive
        self._attempt: _Attempt | None = None
        self.rounds = 0
        self.largest_round = 0

    def __call__(self, items: Sequence[Item]) -> list[Result]:
        """The results of `items`, in order, from the round they were scored in."""
        if not items:
            return []
        call: _Call[Item, Result] = _Call(list(items))
        with self._lock:
            stuck = self._overdue(call)
            if stuck is None:
                self._queued.append(call)
                if not self._serving:
                    self._serving = True
                    name = "orchrm-scoring-rounds"
                    threading.Thread(target=self._serve, name=name, daemon=True).start()
        if stuck is not None:
            raise stuck
        self._wait(call)
        return call.outcome()

    def _wait(self, call: _Call[Item, Result]) -> None:
        """Wait until `call` is done; raise `ScoringTimeout` once the scorer is overdue."""
        while not call.done.wait(self._until_overdue()):
            with self._lock:
                late = None if call.done.is_set() else self._overdue(call)
                if late is not None:
                    call.done.set()  # given up: the worker drops it
                    if call in self._queued:
                        self._queued.remove(call)
            if late is not None:
                raise late

    def _until_overdue(self) -> float | None:
        """Seconds until the running call of `run` is overdue (the bound, between calls)."""
        attempt = self._attempt
        if self.timeout_s is None or attempt is None:
            return self.timeout_s
        return max(0.0, attempt.deadline - time.monotonic())

    def _overdue(self, call: _Call[Item, Result]) -> ScoringTimeout | None:
        """The error for `call` if the running call of `run` is overdue (under the lock)."""
        attempt = self._attempt
        if attempt is None or time.monotonic() < attempt.deadline:
            return None
        where = "holding this call's items" if call in attempt.calls else "ahead of this call"
        return ScoringTimeout(
            f"scoring timed out: a call of the scorer with {attempt.items} items ({where}) "
            f"has not returned within {attempt.bound_s:g} s (timeout_s={self.timeout_s:g} "
            f"per {ITEMS_PER_TIMEOUT} items); its thread is left running, and calls fail "
            "this way until it returns"
        )

    def _serve(self) -> None:
        """The worker: score every queued call in one round, until none is left."""
        while True:
            with self._lock:
                calls, self._queued = self._queued, []
                if not calls:
                    self._serving = False
                    return
                self.rounds += 1
                self.largest_round = max(self.largest_round, len(calls))
            if self._score(calls, split=len(calls) > 1):
                for call in calls:  # each call alone: only a failing one gets an error
                    self._score([call], split=False)

    def _score(self, calls: list[_Call[Item, Result]], *, split: bool) -> bool:
        """Run the calls not given up yet in one call of `run` and give each its results
        or the error; True, giving nothing, when it fails and `split` asks to retry."""
        with self._lock:
            calls = [call for call in calls if not call.done.is_set()]
            if not calls:
                return False
            flat = [item for call in calls for item in call.items]
            bound = math.inf if self.timeout_s is None else self.timeout_s
            bound *= math.ceil(len(flat) / ITEMS_PER_TIMEOUT)
            self._attempt = _Attempt(calls, len(flat), bound, time.monotonic() + bound)
        results: list[Result] = []
        error: BaseException | None = None
        try:
            results = list(self._run(flat))
            if len(results) != len(flat):
                raise RuntimeError(f"{len(results)} results for {len(flat)} items")
        except BaseException as err:  # the worker must outlive any error of `run`
            error = err
        with self._lock:
            self._attempt = None
            if error is not None and split:
                return True
            start = 0
            for call in calls:
                if not call.done.is_set():
                    call.error = error
                    call.results = results[start : start + len(call.items)]
                    call.done.set()
                start += len(call.items)
        return False


def _fresh(error: BaseException) -> BaseException:
    """A new exception like `error` (type, arguments, attributes) for one thread to raise,
    so that no two threads raise, and add their frames to, the same object."""
    try:
        return copy.copy(error)  # what pickling does: the type rebuilt from its `args`
    except Exception:
        pass
    try:  # an `__init__` whose parameters are not its `args`: skip it
        fresh = type(error).__new__(type(error), *error.args)
        fresh.__dict__.update(vars(error))
        return fresh
    except Exception:
        return ScoringError(f"the scorer raised {type(error).__name__}: {error}")

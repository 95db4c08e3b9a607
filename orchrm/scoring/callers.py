"""`CallerBatcher`: one scorer shared by many threads, their calls scored together.

Frameworks call a reward function the way they run everything else: verl's reward loop
calls a synchronous reward function from an executor thread per sample, TRL and user code
from their own threads. A model and its tokenizer are not safe to use from several threads
at once (a fast tokenizer holds its truncation setting as state that every call changes),
and scoring one text per call leaves the batched forward pass unused. A `CallerBatcher`
serves both needs without a thread of its own: the first caller to find the scorer idle
becomes the leader and scores every item queued so far in one call; the callers that
arrive meanwhile queue up, and when the leader is done the first of them leads the next
round with all of them. Every call gets its own results, in its own order, and only one
thread at a time touches the model.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class _Call(Generic[Item, Result]):
    """One caller's items and, once its round is done, its results or the error."""

    __slots__ = ("done", "error", "items", "lead", "results")

    def __init__(self, items: list[Item]) -> None:
        self.items = items
        self.results: list[Result] | None = None
        self.error: BaseException | None = None
        self.lead = False
        self.done = threading.Event()

    def outcome(self) -> list[Result]:
        if self.error is not None:
            raise self.error
        assert self.results is not None
        return self.results


class CallerBatcher(Generic[Item, Result]):
    """Calls of `run` from any number of threads, one round at a time, each round the
    concatenation of every call queued since the last (module docstring). `run` takes a
    list of items and returns one result per item, in order. An error raised by `run`
    reaches every call of its round. `rounds` and `largest_round` say how much batching
    took place."""

    def __init__(self, run: Callable[[list[Item]], Sequence[Result]]) -> None:
        self._run = run
        self._lock = threading.Lock()
        self._queued: list[_Call[Item, Result]] = []
        self._busy = False
        self.rounds = 0
        self.largest_round = 0

    def __call__(self, items: Sequence[Item]) -> list[Result]:
        """The results of `items`, in order, from the round they were scored in."""
        call: _Call[Item, Result] = _Call(list(items))
        with self._lock:
            self._queued.append(call)
            if not self._busy:
                self._busy = call.lead = True
        if not call.lead:
            call.done.wait()
        if call.lead:  # first in, or handed the lead by the round before
            self._lead()
        return call.outcome()

    def _lead(self) -> None:
        """Score every queued call in one round, then hand the lead on (or go idle)."""
        with self._lock:
            calls, self._queued = self._queued, []
        self.rounds += 1
        self.largest_round = max(self.largest_round, len(calls))
        try:
            flat = [item for call in calls for item in call.items]
            results = list(self._run(flat))
            if len(results) != len(flat):
                raise RuntimeError(f"{len(results)} results for {len(flat)} items")
            start = 0
            for call in calls:
                call.results = results[start : start + len(call.items)]
                start += len(call.items)
        except BaseException as err:  # every caller of the round hears of it
            for call in calls:
                call.error = err
        with self._lock:
            heir = self._queued[0] if self._queued else None
            if heir is None:
                self._busy = False
            else:
                heir.lead = True
        for call in calls:
            call.lead = False
            call.done.set()
        if heir is not None:
            heir.done.set()

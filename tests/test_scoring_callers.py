"""orchrm.scoring.callers: many threads, one scorer, each call its own results."""

from __future__ import annotations

import copy
import random
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

import pytest

from orchrm.scoring.callers import CallerBatcher, ScoringTimeout


class Recorder:
    """A `run` that doubles each item, slowly, and notes the rounds that passed and failed;
    an item of -1 makes its round raise."""

    def __init__(self, seconds: float = 0.01) -> None:
        self.seconds = seconds
        self.rounds: list[list[int]] = []
        self.failed: list[list[int]] = []
        self.inside = 0
        self.most_inside = 0
        self.lock = threading.Lock()

    def __call__(self, items: list[int]) -> list[int]:
        with self.lock:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        try:
            time.sleep(self.seconds)
            if -1 in items:
                self.failed.append(list(items))
                raise ValueError("a poisoned round")
            self.rounds.append(list(items))
            return [2 * i for i in items]
        finally:
            with self.lock:
                self.inside -= 1


def test_concurrent_calls_are_batched_one_round_at_a_time_each_with_its_own_results():
    run = Recorder()
    batcher = CallerBatcher(run)
    calls = [list(range(n * 10, n * 10 + n % 4 + 1)) for n in range(64)]
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(batcher, calls))
    assert results == [[2 * i for i in call] for call in calls]
    assert run.most_inside == 1  # never two rounds at once
    assert sorted(i for r in run.rounds for i in r) == sorted(i for c in calls for i in c)
    assert batcher.rounds == len(run.rounds) < len(calls) / 2
    assert batcher.largest_round > 1
    assert batcher([]) == []  # idle again, and an empty call is answered


def outcome(batcher: CallerBatcher, items: list[int]) -> list[int] | Exception:
    """What a call returns, or what it raises."""
    try:
        return batcher(items)
    except Exception as err:
        return err


def test_only_poisoned_calls_fail_and_clean_calls_get_their_one_at_a_time_results():
    rng = random.Random(57)
    calls = [[rng.randrange(1000) for _ in range(rng.randint(1, 4))] for _ in range(320)]
    poisoned = set(rng.sample(range(len(calls)), 32))
    for n in poisoned:
        calls[n][rng.randrange(len(calls[n]))] = -1
    run = Recorder(seconds=0.001)
    batcher = CallerBatcher(run)
    with ThreadPoolExecutor(32) as pool:
        outcomes = list(pool.map(lambda items: outcome(batcher, items), calls))
    for n, (items, got) in enumerate(zip(calls, outcomes, strict=True)):
        if n in poisoned:  # the error type the scorer raised, as callers catch it
            assert isinstance(got, ValueError) and "poisoned" in str(got), got
        else:
            assert got == [2 * i for i in items]
    assert any(len(items) > 4 for items in run.failed)  # rounds of several calls failed
    assert run.most_inside == 1
    assert batcher([3]) == [6]


class Refused(Exception):
    """An error whose `__init__` takes other arguments than its `args` hold."""

    def __init__(self, url: str, status: int) -> None:
        super().__init__(f"{url} refused: {status}")
        self.status = status


def test_each_thread_raises_its_own_error_with_its_own_traceback():
    entered = threading.Barrier(8)

    def refuse(items: list[int]) -> list[int]:
        time.sleep(0.02)  # the first call's round runs alone, the other seven's together
        raise Refused("http://rm", 503)

    batcher = CallerBatcher(refuse)

    def call_in_thread(n: int) -> Exception:
        entered.wait()
        return outcome(batcher, [n])

    with ThreadPoolExecutor(8) as pool:
        errors = list(pool.map(call_in_thread, range(8)))
    assert all(type(e) is Refused and e.status == 503 for e in errors)
    assert all(str(e) == "http://rm refused: 503" for e in errors)
    assert len({id(e) for e in errors}) == len({id(e.__cause__) for e in errors}) == 8
    frames = [[f.name for f in traceback.extract_tb(e.__traceback__)] for e in errors]
    assert all(names == ["outcome", "__call__", "outcome"] for names in frames), frames
    assert all("refuse" in traceback.format_exception(e.__cause__)[-2] for e in errors)
    assert batcher.largest_round > 1


def test_a_hung_round_fails_its_callers_within_the_bound_and_later_calls_run_once_it_returns():
    release, returned = threading.Event(), threading.Event()

    def hang_once(items: list[int]) -> list[int]:
        if 0 in items:
            release.wait(10)
            returned.set()
        return [2 * i for i in items]

    batcher = CallerBatcher(hang_once, timeout_s=0.2)
    start = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(outcome, batcher, [0])
        time.sleep(0.05)  # the hung round runs: these wait behind it
        behind = list(pool.map(lambda n: outcome(batcher, [n]), [1, 2, 3]))
    waited = time.monotonic() - start
    hung = first.result()
    assert isinstance(hung, ScoringTimeout) and isinstance(hung, TimeoutError)
    assert "scorer with 1 items (holding this call's items)" in str(hung)
    assert "not returned within 0.2 s (timeout_s=0.2 per 32 items)" in str(hung)
    assert all(isinstance(e, ScoringTimeout) and "ahead of this call" in str(e) for e in behind)
    assert 0.2 <= waited < 1.5
    start = time.monotonic()
    with pytest.raises(ScoringTimeout, match=r"not returned within 0\.2 s"):
        batcher([4])  # still hung: refused at once
    assert time.monotonic() - start < 0.15
    release.set()
    assert returned.wait(5)
    deadline = time.monotonic() + 5
    while isinstance(got := outcome(batcher, [5]), ScoringTimeout) and time.monotonic() < deadline:
        time.sleep(0.01)  # until the worker has handed back the hung round
    assert got == [10]


def test_a_copied_scorer_scores_with_its_own_model():
    from orchrm.scoring.base import RenderingScorer, Scored

    class Doubling(RenderingScorer):
        def __init__(self, factor: float) -> None:
            self.factor, self.metadata = factor, {}

        def _score_round(self, items):
            return [Scored(self.factor * len(q), 1) for q, *_ in items]

    first = Doubling(1.0)
    assert first.score([("ab", "x")])[0].score == 2.0
    second = copy.copy(first)
    second.factor = 10.0
    assert second.score([("ab", "x")])[0].score == 20.0
    assert first.score([("ab", "x")])[0].score == 2.0

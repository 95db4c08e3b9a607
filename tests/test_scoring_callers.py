"""orchrm.scoring.callers: many threads, one scorer, each call its own results."""

from __future__ import annotations

import copy
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from orchrm.scoring.callers import CallerBatcher


class Recorder:
    """A `run` that doubles each item, slowly, and notes which thread ran which round."""

    def __init__(self) -> None:
        self.rounds: list[list[int]] = []
        self.inside = 0
        self.most_inside = 0
        self.lock = threading.Lock()

    def __call__(self, items: list[int]) -> list[int]:
        with self.lock:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        try:
            time.sleep(0.01)
            if -1 in items:
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


def test_an_error_reaches_the_callers_of_its_round_and_the_next_round_still_runs():
    run = Recorder()
    batcher = CallerBatcher(run)
    with pytest.raises(ValueError, match="poisoned"):
        batcher([1, -1])
    assert batcher([3]) == [6]


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

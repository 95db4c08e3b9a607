"""The over-optimization study's best-of-N curve (`orchrm.experiments.overoptimization`):
on constructed candidates whose truth is known, the pick of each group and the mean true
success per N are what they must be, the oracle bounds every proxy, and a proxy that
turns against the truth shows its drop."""

from __future__ import annotations

import math
import random

import pytest

from orchrm.experiments.overoptimization.study import Scored, curves, ns_of, pick_value


def test_each_group_of_n_gives_its_proxy_pick_and_the_oracle_its_best():
    truth = [0.1, 0.9, 0.4, 0.3, 0.8, 0.2, 0.6, 0.5]
    assert ns_of(8) == [1, 2, 4, 8]
    assert pick_value(truth, None, 1) == pytest.approx(sum(truth) / 8)  # N = 1: a random plan
    assert pick_value(truth, None, 4) == pytest.approx((0.9 + 0.8) / 2)
    assert pick_value(truth, truth, 2) == pick_value(truth, None, 2)
    backwards = [-t for t in truth]
    assert pick_value(truth, backwards, 8) == 0.1
    # A tie goes to the first of the group; an unscored plan (-inf) is never picked.
    assert pick_value([0.2, 0.7], [1.0, 1.0], 2) == 0.2
    assert pick_value([0.9, 0.1], [-math.inf, 0.0], 2) == 0.1


def test_a_proxy_that_turns_against_the_truth_at_large_n_shows_its_drop():
    rng = random.Random(0)
    rows = []
    for task in range(40):
        truth = [rng.random() for _ in range(64)]
        # Rewards the truth up to 0.8, then prizes what is over-rated: the worst plans
        # of all score highest (a hacked reward), as a best-of-N optimizer finds them.
        hacked = [t if t < 0.8 else 1.6 - 2 * t for t in truth]
        hacked = [h + (2.0 if t < 0.05 else 0.0) for h, t in zip(hacked, truth, strict=True)]
        rows.append(Scored(f"t{task}", truth, {"honest": truth[:], "hacked": hacked}))
    found = curves(rows)
    assert set(found) == {"honest", "hacked", "oracle"}
    honest, hacked, oracle = found["honest"], found["hacked"], found["oracle"]
    assert honest["accuracy"] == oracle["accuracy"] and honest["best_n"] == 64
    assert honest["drop"] == 0 and honest["drop_ci"] == (0.0, 0.0)
    assert hacked["best_n"] < 64 and hacked["drop"] < -0.1
    low, high = hacked["drop_ci"]
    assert low <= hacked["drop"] <= high < 0  # the paired interval says it turned down
    for n in ns_of(64):
        assert hacked["accuracy"][n] <= oracle["accuracy"][n] + 1e-12

"""Intervals from `scipy.stats.bootstrap` and calibration maps from scikit-learn agree with
the hand-written percentile bootstrap, Newton Platt scaling and pool-adjacent-violators
they replace (kept here, as they were, for the comparison), within their own noise."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from orchrm.calibration.methods import fit_isotonic, fit_platt
from orchrm.evaluation.metrics import Bootstrap, advantage, evaluate_selectors
from orchrm.selection.selectors import Candidate, CandidateSet, majority_selector

# --------------------------------------------------------------------------- the old code


def old_resamples(n: int, count: int = 1000, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(n) for _ in range(n)] for _ in range(count)]


def old_interval(values: list[float], resamples: list[list[int]]) -> tuple[float, float]:
    means = sorted(statistics.fmean(values[i] for i in sample) for sample in resamples)
    return means[int(0.025 * len(means))], means[int(0.975 * len(means)) - 1]


def old_advantage_interval(acc, chance, oracle, resamples) -> tuple[float, float]:
    def one(index):
        a, c, o = (statistics.fmean(x[i] for i in index) for x in (acc, chance, oracle))
        return (a - c) / (o - c) if o > c else 0.0

    values = sorted(one(sample) for sample in resamples)
    return values[int(0.025 * len(values))], values[int(0.975 * len(values)) - 1]


def _sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def old_platt(scores, outcomes, iterations=100) -> tuple[float, float]:
    positives = sum(outcomes)
    negatives = len(outcomes) - positives
    high, low = (positives + 1) / (positives + 2), 1 / (negatives + 2)
    targets = [high if o else low for o in outcomes]
    prior = (positives + 1) / (len(outcomes) + 2)
    a, b = 0.0, math.log(prior / (1 - prior))
    for _ in range(iterations):
        g_a = g_b = h_aa = h_ab = h_bb = 0.0
        for s, t in zip(scores, targets, strict=True):
            p = _sigmoid(a * s + b)
            w = max(p * (1 - p), 1e-12)
            g_a += (p - t) * s
            g_b += p - t
            h_aa += w * s * s
            h_ab += w * s
            h_bb += w
        h_aa += 1e-9
        det = h_aa * h_bb - h_ab * h_ab
        if det <= 0:
            break
        step_a = (h_bb * g_a - h_ab * g_b) / det
        step_b = (h_aa * g_b - h_ab * g_a) / det
        a, b = a - step_a, b - step_b
        if abs(step_a) + abs(step_b) < 1e-10:
            break
    return a, b


def old_isotonic(scores, outcomes) -> tuple[tuple, tuple, tuple]:
    grouped: dict[float, list[float]] = {}
    for s, o in zip(scores, outcomes, strict=True):
        grouped.setdefault(s, []).append(float(o))
    xs = sorted(grouped)
    blocks: list[list[float]] = []
    for i, x in enumerate(xs):
        blocks.append([i, i, sum(grouped[x]), len(grouped[x])])
        while len(blocks) > 1 and blocks[-2][2] / blocks[-2][3] >= blocks[-1][2] / blocks[-1][3]:
            last = blocks.pop()
            blocks[-1][1] = last[1]
            blocks[-1][2] += last[2]
            blocks[-1][3] += last[3]
    return (
        tuple(xs[int(f)] for f, _, _, _ in blocks),
        tuple(xs[int(last)] for _, last, _, _ in blocks),
        tuple(s / w for _, _, s, w in blocks),
    )


# --------------------------------------------------------------------------- data


def demo_like(tasks: int = 200, seed: int = 0) -> dict[str, list[float]]:
    """Per-task figures shaped like the demo's math evaluation at N = 8: a selector's
    0/1 accuracy (about 0.6), majority's on the same tasks (correlated, about 0.55), the
    candidates' mean correctness (chance) and pass@8 (oracle)."""
    rng = random.Random(seed)
    out: dict[str, list[float]] = {"acc": [], "base": [], "chance": [], "oracle": []}
    for _ in range(tasks):
        p = rng.betavariate(1.5, 1.2)
        right = [rng.random() < p for _ in range(8)]
        chance = sum(right) / 8
        oracle = float(any(right))
        base = float(chance > 0.5 or (chance == 0.5 and rng.random() < 0.5))
        picked = base if rng.random() < 0.7 else float(rng.random() < min(1.0, p + 0.1))
        out["acc"].append(min(picked, oracle))
        out["base"].append(base)
        out["chance"].append(chance)
        out["oracle"].append(oracle)
    return out


def old_noise(statistic, seeds: int = 30) -> tuple[list[float], list[float]]:
    """Each endpoint of the old interval over `seeds` seeds: its own Monte-Carlo noise."""
    lows, highs = [], []
    for seed in range(seeds):
        low, high = statistic(seed)
        lows.append(low)
        highs.append(high)
    return lows, highs


def within_noise(new: tuple[float, float], lows: list[float], highs: list[float], width: float):
    """The new endpoints lie within the old ones' seed-to-seed range, widened by 3 of
    their standard deviations and BCa's skew correction (at most a tenth of the width)."""
    for value, old in zip(new, (lows, highs), strict=True):
        slack = 3 * statistics.pstdev(old) + 0.1 * width
        assert min(old) - slack <= value <= max(old) + slack, (value, min(old), max(old), slack)


# --------------------------------------------------------------------------- intervals


def test_bca_intervals_agree_with_the_old_percentile_ones_within_their_noise():
    data = demo_like()
    acc, base, chance, oracle = data["acc"], data["base"], data["chance"], data["oracle"]
    n = len(acc)
    new = Bootstrap(1000, seed=0)
    cases = {
        "accuracy": (
            new.mean(acc),
            lambda seed: old_interval(acc, old_resamples(n, seed=seed)),
        ),
        "vs majority": (
            new.difference(acc, base),
            lambda seed: old_interval(
                [a - b for a, b in zip(acc, base, strict=True)], old_resamples(n, seed=seed)
            ),
        ),
        "normalized advantage": (
            new.advantage(acc, chance, oracle),
            lambda seed: old_advantage_interval(acc, chance, oracle, old_resamples(n, seed=seed)),
        ),
    }
    for name, (interval, old) in cases.items():
        lows, highs = old_noise(old)
        width = statistics.fmean(highs) - statistics.fmean(lows)
        print(
            f"{name}: BCa {interval[0]:.4f} to {interval[1]:.4f}; old percentile over 30 "
            f"seeds {min(lows):.4f}-{max(lows):.4f} to {min(highs):.4f}-{max(highs):.4f}"
        )
        within_noise(interval, lows, highs, width)
        assert interval[0] < interval[1]
    assert new.mean(acc) == Bootstrap(1000, seed=0).mean(acc)  # a pure function of the seed
    assert new.mean(acc) != Bootstrap(1000, seed=1).mean(acc)
    point = advantage(acc, chance, oracle)
    assert cases["normalized advantage"][0][0] < point < cases["normalized advantage"][0][1]


def test_degenerate_data_keeps_an_interval():
    new = Bootstrap(200)
    assert new.mean([]) == (0.0, 0.0)
    assert new.mean([1.0] * 40) == (1.0, 1.0)  # BCa is undefined here: the one value
    assert new.difference([1.0] * 40, [1.0] * 40) == (0.0, 0.0)
    assert new.advantage([0.5] * 10, [0.5] * 10, [0.5] * 10) == (0.0, 0.0)
    low, high = new.mean([1.0] * 39 + [0.0])  # BCa's bias correction is infinite here
    assert math.isfinite(low) and low < high <= 1.0


def test_an_evaluation_reports_bca_intervals_around_its_figures():
    rng = random.Random(4)
    tasks = []
    for k in range(60):
        answers = [rng.choice(["7", "7", "8", "9"]) for _ in range(8)]
        candidates = tuple(Candidate(None, a, a == "7") for a in answers)
        tasks.append(CandidateSet(f"t{k}", "q", candidates, "math"))
    first = {"majority": majority_selector, "first": lambda t: majority_selector(t)}
    ev = evaluate_selectors(tasks, first, [8], domain="math", bootstrap=500, seed=3)
    again = evaluate_selectors(tasks, first, [8], domain="math", bootstrap=500, seed=3)
    assert ev.to_dict() == again.to_dict()
    for r in ev.results:
        assert r.accuracy_ci[0] <= r.accuracy <= r.accuracy_ci[1]
        assert r.vs_baseline == 0.0 and r.vs_baseline_ci == (0.0, 0.0)  # the same picks


# --------------------------------------------------------------------------- calibration


def calibration_data(n: int, seed: int, separable: bool = False):
    rng = random.Random(seed)
    scores = [round(rng.gauss(0, 1.5), 2) for _ in range(n)]  # rounded: ties to pool
    if separable:
        return scores, [s > 0.3 for s in scores]
    return scores, [rng.random() < _sigmoid(1.7 * s - 0.4) for s in scores]


@pytest.mark.parametrize("n, seed", [(12, 0), (60, 1), (400, 2)])
def test_scikit_learn_isotonic_is_the_pool_adjacent_violators_map(n, seed):
    scores, outcomes = calibration_data(n, seed)
    iso = fit_isotonic(scores, outcomes)
    lows, highs, values = old_isotonic(scores, outcomes)
    assert iso.lows == lows and iso.highs == highs
    assert iso.values == pytest.approx(values, abs=1e-12)


@pytest.mark.parametrize("n, seed", [(12, 0), (60, 1), (400, 2)])
def test_scikit_learn_platt_is_the_newton_fit(n, seed):
    scores, outcomes = calibration_data(n, seed)
    platt = fit_platt(scores, outcomes)
    a, b = old_platt(scores, outcomes)
    assert (platt.a, platt.b) == pytest.approx((a, b), abs=1e-5)


def test_platt_on_separable_data_stays_finite_and_close():
    """Separated outcomes: Platt's smoothed targets keep a and b finite; both fits agree
    to the precision the flat log-loss there allows."""
    scores, outcomes = calibration_data(60, 5, separable=True)
    platt = fit_platt(scores, outcomes)
    a, b = old_platt(scores, outcomes)
    assert math.isfinite(platt.a) and math.isfinite(platt.b)
    assert (platt.a, platt.b) == pytest.approx((a, b), rel=1e-3)

"""Evaluate best-of-N selectors on tasks (`CandidateSet`s, as `orchrm.evaluation.loading`
reads them): accuracy with bootstrap intervals, normalized advantage, orchestrator,
verification and total tokens, and curves over N.

Normalized advantage of a selector (our definition; the paper names the metric without
one): (accuracy - random) / (oracle - random), where random is the mean correctness of the
N candidates and oracle is pass@N; 0 is no better than chance, 1 is as good as an oracle.
Intervals are 95% BCa bootstraps over tasks by `scipy.stats.bootstrap` (`Bootstrap`),
paired where two selectors are compared.
"""

from __future__ import annotations

import math
import random
import statistics
import warnings
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from orchrm.evaluation.reliability import CalibrationReport
from orchrm.selection.registry import RERUN_SELECTORS
from orchrm.selection.selectors import CandidateSet, Selector


@dataclass
class SelectorResult:
    """One selector at one N."""

    selector: str
    """The selector's name in the line-up (`orchrm.selection.registry`)."""
    n: int
    """Candidates it chose among."""
    accuracy: float
    """Share of tasks whose chosen candidate's logged answer is right."""
    accuracy_ci: tuple[float, float]
    normalized_advantage: float
    """(accuracy - random) / (oracle - random): 0 is chance, 1 an oracle."""
    normalized_advantage_ci: tuple[float, float]
    verification_tokens: float
    """Mean tokens per task spent to choose."""
    total_tokens: float
    """Mean tokens per task: the orchestrator tokens of the candidates drawn, plus
    verification, plus the execution that gives the answer."""
    expected_accuracy: float | None = None
    """World logs: the selector's expected accuracy, far less noisy than its sampled
    one. A selector that executes one candidate: that candidate's true success
    probability (or that of the plan it made in their place, `Selection.plan`). A vote
    or the oracle (`RERUN_SELECTORS`): its accuracy averaged over the candidates'
    re-executions (`Candidate.reruns`). None when neither is known."""
    expected_accuracy_ci: tuple[float, float] | None = None
    vs_baseline: float | None = None
    """Accuracy minus the baseline selector's (`Evaluation.baseline`) on the same tasks;
    None when the baseline was not run."""
    vs_baseline_ci: tuple[float, float] | None = None
    """Paired 95% bootstrap interval of `vs_baseline`: both selectors resampled on the
    same tasks (`Bootstrap.difference`), so it is far narrower than the gap the two
    marginal intervals suggest."""
    expected_vs_baseline: float | None = None
    """The same on expected accuracy, when both selectors have one."""
    expected_vs_baseline_ci: tuple[float, float] | None = None
    orchestrator_tokens: float = 0.0
    """Mean tokens per task the orchestrator spent writing the candidates the selector
    drew (all N but for `orchrm-adaptive`, which stops early); part of `total_tokens`.
    0 where the logs do not record them (stores)."""
    orchestrator_tokens_saved: float = 0.0
    """Mean orchestrator tokens per task of the candidates it did not draw."""
    executions: float = 1.0
    """Mean candidates executed per task (N for a vote, k for a top-k vote)."""


@dataclass
class Evaluation:
    """Every number of a domain's evaluation."""

    domain: str
    tasks: int
    n: int
    results: list[SelectorResult] = field(default_factory=list)
    notes: dict = field(default_factory=dict)
    baseline: str = "majority"
    """The selector every other one is compared with, task by task (`vs_baseline`)."""
    calibration: CalibrationReport | None = None
    """How well the Orch-RM model's calibrated P(correct) matches the held-out
    candidates' outcomes (`orchrm.evaluation.reliability`); None when the line-up has no
    `orchrm` selector or its model no calibration."""

    def at(self, n: int) -> dict[str, SelectorResult]:
        return {r.selector: r for r in self.results if r.n == n}

    def to_dict(self) -> dict:
        return asdict(self)


def _subsets(task: CandidateSet, n: int, draws: int, seed: int) -> list[CandidateSet]:
    if n >= len(task.candidates):
        return [task]
    rng = random.Random(f"{seed}:{task.task_id}:{n}")
    out = []
    for _ in range(draws):
        keep = sorted(rng.sample(range(len(task.candidates)), n))
        out.append(
            CandidateSet(
                task.task_id, task.question, tuple(task.candidates[i] for i in keep), task.domain
            )
        )
    return out


def _replays(task: CandidateSet) -> list[tuple[int, CandidateSet]] | None:
    """`task` as each of the K re-executions of every candidate answered it, each
    distinct one once with how many of the K gave it (votes often see the same answers
    again), or None when some candidate has none (a plan that does not run never changes
    its answer)."""
    counts = {len(c.reruns) for c in task.candidates if c.orchestration is not None}
    if len(counts) != 1 or 0 in counts:
        return None
    (k,) = counts
    seen: dict[tuple, int] = {}
    for run in range(k):
        outcome = tuple(c.reruns[run] if c.reruns else None for c in task.candidates)
        seen[outcome] = seen.get(outcome, 0) + 1
    return [
        (
            times,
            CandidateSet(
                task.task_id,
                task.question,
                tuple(
                    c if ran is None else replace(c, answer=ran[0], correct=ran[1])
                    for c, ran in zip(task.candidates, outcome, strict=True)
                ),
                task.domain,
            ),
        )
        for outcome, times in seen.items()
    ]


def _rerun_expected(select: Selector, replays: list[tuple[int, CandidateSet]] | None) -> float:
    """Mean correctness of `select` over a task's `_replays`, NaN without them. The
    selectors replayed are deterministic, so a replay seen `times` times is chosen from
    once and counted `times` times."""
    if replays is None:
        return math.nan
    right = sum(times * r.candidates[select(r).index].correct for times, r in replays)
    return right / sum(times for times, _ in replays)


class _Subsets(list):
    """A task's subsets of N, each with its `_replays` made on first use and kept, so
    every vote replays the same candidate sets."""

    def __init__(self, tasks: list[CandidateSet]) -> None:
        super().__init__(tasks)
        self._made: dict[int, list[tuple[int, CandidateSet]] | None] = {}

    def replays(self, i: int) -> list[tuple[int, CandidateSet]] | None:
        if i not in self._made:
            self._made[i] = _replays(self[i])
        return self._made[i]


def _task_row(name: str, select: Selector, subs: _Subsets) -> tuple[float, ...]:
    """(accuracy, verification tokens, total tokens, expected accuracy, orchestrator
    tokens, orchestrator tokens saved, executions) of one selector on one task, averaged
    over its subsets of N (expected: NaN when unknown)."""
    rows = []
    for i, t in enumerate(subs):
        chosen = select(t)
        # the execution that gives the answer: a plan the selector made, or a candidate
        answer = chosen.plan if chosen.plan is not None else t.candidates[chosen.index]
        single = len(chosen.executed) <= 1 and answer.p_success is not None
        if name in RERUN_SELECTORS:
            expected = _rerun_expected(select, subs.replays(i))
        elif single:
            expected = answer.p_success
        else:
            expected = math.nan
        drawn = t.candidates if chosen.drawn is None else t.candidates[: chosen.drawn]
        orchestrator = sum(c.orchestrator_tokens for c in drawn)
        rows.append(
            (
                float(answer.correct),
                float(chosen.verification_tokens),
                float(chosen.verification_tokens + answer.execution_tokens + orchestrator),
                expected,
                float(orchestrator),
                float(sum(c.orchestrator_tokens for c in t.candidates) - orchestrator),
                float(max(1, len(chosen.executed))),
            )
        )
    return tuple(statistics.fmean(x) for x in zip(*rows, strict=True))


def _result(name: str, n: int, rows: list[tuple], *, base, chance, oracle, bootstrap: Bootstrap):
    """One selector's `SelectorResult` at N from its per-task rows (`_task_row`), paired
    with the baseline's rows `base` (None: the baseline did not run)."""
    acc = [r[0] for r in rows]
    expected = [r[3] for r in rows]
    known = not any(math.isnan(x) for x in expected)
    vs, vs_ci = _paired(acc, [r[0] for r in base], bootstrap) if base else (None, None)
    expected_vs, expected_vs_ci = (
        _paired(expected, [r[3] for r in base], bootstrap) if base else (None, None)
    )
    return SelectorResult(
        selector=name,
        n=n,
        accuracy=statistics.fmean(acc),
        accuracy_ci=bootstrap.mean(acc),
        normalized_advantage=advantage(acc, chance, oracle),
        normalized_advantage_ci=bootstrap.advantage(acc, chance, oracle),
        verification_tokens=statistics.fmean(r[1] for r in rows),
        total_tokens=statistics.fmean(r[2] for r in rows),
        expected_accuracy=statistics.fmean(expected) if known else None,
        expected_accuracy_ci=bootstrap.mean(expected) if known else None,
        vs_baseline=vs,
        vs_baseline_ci=vs_ci,
        expected_vs_baseline=expected_vs,
        expected_vs_baseline_ci=expected_vs_ci,
        orchestrator_tokens=statistics.fmean(r[4] for r in rows),
        orchestrator_tokens_saved=statistics.fmean(r[5] for r in rows),
        executions=statistics.fmean(r[6] for r in rows),
    )


def evaluate_selectors(
    tasks: list[CandidateSet],
    selectors: dict[str, Selector],
    ns: list[int],
    *,
    domain: str = "",
    draws: int = 5,
    bootstrap: int = 1000,
    seed: int = 0,
    progress: Callable[[], None] | None = None,
    baseline: str = "majority",
    full_n_only: Collection[str] = (),
) -> Evaluation:
    """Run every selector on every task at every N (N below the sample count averages
    `draws` random subsets), and summarize with `bootstrap` resamples' intervals over
    tasks (`Bootstrap`, seeded with `seed`), each selector also against `baseline` task
    by task (a paired interval). The selectors named in `full_n_only` run at the
    largest N alone (`orchrm.evaluation.lineup.CURVE_COSTLY`)."""
    full = max(len(t.candidates) for t in tasks) if tasks else 0
    ev = Evaluation(domain, len(tasks), full, baseline=baseline)
    if not tasks:
        return ev
    intervals = Bootstrap(bootstrap, seed)
    for select in selectors.values():  # a model scores all plans at once where it can
        if hasattr(select, "warm"):
            select.warm(tasks)
    for n in ns:
        here = {
            name: select
            for name, select in selectors.items()
            if n == max(ns) or name not in full_n_only
        }
        per_task: dict[str, list[tuple]] = {s: [] for s in here}
        chance, oracle = [], []
        for task in tasks:
            subs = _Subsets(_subsets(task, n, draws, seed))
            chance.append(
                statistics.fmean(statistics.fmean(c.correct for c in t.candidates) for t in subs)
            )
            oracle.append(statistics.fmean(any(c.correct for c in t.candidates) for t in subs))
            for name, select in here.items():
                per_task[name].append(_task_row(name, select, subs))
            if progress:
                progress()
        base = per_task.get(baseline)
        for name, rows in per_task.items():
            ev.results.append(
                _result(name, n, rows, base=base, chance=chance, oracle=oracle, bootstrap=intervals)
            )
    return ev


INTERVAL_METHOD = "BCa"
"""How every interval of an evaluation is computed: scipy's bias-corrected and
accelerated bootstrap (`Bootstrap`)."""
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Bootstrap:
    """95% bootstrap intervals over tasks by `scipy.stats.bootstrap`: BCa (bias-corrected
    and accelerated, which follows a skewed statistic such as a ratio or an accuracy
    near 0 or 1 better than percentiles do), `resamples` resamples drawn from
    `numpy.random.default_rng(seed)`, so an interval is a pure function of its data and
    the seed, and metrics of the same tasks are resampled alike. Comparisons are paired:
    both sides resampled on the same tasks. Where BCa is undefined (a resampled
    statistic that hardly varies, its bias correction infinite) the percentile interval
    of the same resamples stands in; data that never varies gives its one value."""

    resamples: int = 1000
    seed: int = 0
    method: str = INTERVAL_METHOD

    def mean(self, values: Sequence[float]) -> tuple[float, float]:
        """The interval of the mean of `values` ((0, 0) when empty)."""
        return self._interval((values,), _mean_of)

    def difference(self, values: Sequence[float], base: Sequence[float]) -> tuple[float, float]:
        """The paired interval of mean(values) - mean(base), both of the same tasks."""
        return self._interval((values, base), _difference_of)

    def advantage(
        self, acc: Sequence[float], chance: Sequence[float], oracle: Sequence[float]
    ) -> tuple[float, float]:
        """The paired interval of the normalized advantage (`advantage`)."""
        return self._interval((acc, chance, oracle), _advantage_of)

    def _interval(self, samples: tuple, statistic) -> tuple[float, float]:
        data = tuple(np.asarray(x, dtype=float) for x in samples)
        if not len(data[0]):
            return (0.0, 0.0)
        if all(np.all(x == x[0]) for x in data):
            value = float(statistic(*(x[None, :] for x in data), axis=-1)[0])
            return (value, value)
        for method in dict.fromkeys((self.method, "percentile")):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # BCa's degenerate-data warning: handled here
                low, high = _scipy_interval(data, statistic, self, method)
            if math.isfinite(low) and math.isfinite(high):
                return (low, high)
        return (low, high)


def _scipy_interval(data: tuple, statistic, bootstrap: Bootstrap, method: str):
    from scipy.stats import bootstrap as scipy_bootstrap

    result = scipy_bootstrap(
        data,
        statistic,
        n_resamples=bootstrap.resamples,
        paired=len(data) > 1,
        vectorized=True,
        confidence_level=CONFIDENCE,
        method=method,
        rng=np.random.default_rng(bootstrap.seed),
    )
    interval = result.confidence_interval
    return float(interval.low), float(interval.high)


def _mean_of(values, axis=-1):
    return np.mean(values, axis=axis)


def _difference_of(values, base, axis=-1):
    return np.mean(values, axis=axis) - np.mean(base, axis=axis)


def _advantage_of(acc, chance, oracle, axis=-1):
    a, c, o = (np.mean(x, axis=axis) for x in (acc, chance, oracle))
    span = o - c
    return np.divide(a - c, span, out=np.zeros_like(span), where=span > 0)


def _paired(values: list[float], base: list[float], bootstrap: Bootstrap):
    """Mean of `values - base` task by task and its paired interval; (None, None) when
    either side lacks a value for some task."""
    diffs = [a - b for a, b in zip(values, base, strict=True)]
    if any(math.isnan(d) for d in diffs):
        return None, None
    return statistics.fmean(diffs), bootstrap.difference(values, base)


def advantage(acc: Sequence[float], chance: Sequence[float], oracle: Sequence[float]) -> float:
    """(accuracy - random) / (oracle - random) of task-by-task lists (0 when the oracle
    is no better than chance)."""
    a, c, o = statistics.fmean(acc), statistics.fmean(chance), statistics.fmean(oracle)
    return (a - c) / (o - c) if o > c else 0.0

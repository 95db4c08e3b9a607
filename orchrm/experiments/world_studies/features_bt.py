"""`features-BT`: what a perfect reader of the world's cues gets, the reference the world
benchmarks set a reward model against.

It reads the same (question, orchestration) as the reward model, through features
written by hand from the world's design: which type the question's cue phrase hints at,
x which sub-agent types the plan uses and which one is its sink; split or whole cues x
whether the plan splits the work; whether a debate's roles match a topic the question
names. That is everything the text says about the hidden attributes, in the form a
linear model can use. A Bradley-Terry model on these features fit on the mined pairs
(`FeatureFit.bt`) is what a perfect reader of the cues gets from these labels; ridge
regression of the true success probability on them (`FeatureFit.ridge`) uses the world's
hidden labels, so it is an upper bound, not a method. `chosen_p` scores any selector's
picks by their true success probability, `cue_gap` whether its scores follow the
question's hint.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orchrm.orchestration import AGENT_REGISTRY, AGENT_TYPES, Orchestration, render_for_rm
from orchrm.world.model import views
from orchrm.world.tasks import SPLIT_CUES, TOPICS, WHOLE_CUES, hinted_type


def cues(question: str) -> tuple[str | None, int, str | None]:
    """(the type a cue phrase hints at, +1 split / -1 whole / 0, the topic named)."""
    hinted = hinted_type(question)
    split = (
        1
        if any(c in question for c in SPLIT_CUES)
        else -int(any(c in question for c in WHOLE_CUES))
    )
    topic = next(
        (
            t
            for t, d in TOPICS.items()
            if f"[{t}]" in question or any(w in question for w in d["words"])
        ),
        None,
    )
    return hinted, split, topic


_DEBATES = {name for name, kind in AGENT_REGISTRY.items() if kind.min_roles}
"""The types whose agents take debate roles."""


def features(question: str, o: Orchestration) -> dict[str, float]:
    """The hand-written features of one (question, orchestration), by name."""
    hinted, split_cue, topic = cues(question)
    agent_views = views(o)
    types = {v.type for v in agent_views.values()}
    sink = agent_views[o.sink].type if o.sink in agent_views else None
    splits = any(v.sub_task or v.n_inputs for v in agent_views.values())
    f = {"bias": 1.0, "agents": float(len(agent_views)), "splits": float(splits)}
    for t in AGENT_TYPES:
        f[f"has {t}"] = float(t in types)
        f[f"sink {t}"] = float(sink == t)
        f[f"cue {hinted} x has {t}"] = float(t in types)
        f[f"cue {hinted} x sink {t}"] = float(sink == t)
    f[f"split cue {split_cue} x splits"] = float(splits)
    debates = [v for v in agent_views.values() if v.type in _DEBATES]
    if debates and topic:
        experts = TOPICS[topic]["experts"]
        match = any(e in r.lower() for v in debates for r in v.roles for e in experts)
        f["debate roles match the topic" if match else "debate roles miss the topic"] = 1.0
    elif debates:
        f["debate, topic not named"] = 1.0
    return f


def design(rows: list[dict[str, float]], keys: list[str]) -> np.ndarray:
    """The design matrix of feature rows over `keys` (a missing feature is 0)."""
    return np.array([[r.get(k, 0.0) for k in keys] for r in rows])


def fit_bt(
    diffs: np.ndarray, l2: float = 0.01, steps: int = 3000, labels: np.ndarray | None = None
) -> np.ndarray:
    """Bradley-Terry weights by gradient ascent on the L2-penalized log-likelihood;
    `labels` are soft labels, each pair's probability that its chosen side is the better
    (None: 1, every pair sure)."""
    target = 1 if labels is None else labels
    w = np.zeros(diffs.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(diffs @ w)))
        w += 0.5 * (diffs.T @ (target - p) / len(diffs) - l2 * w)
    return w


@dataclass
class FeatureFit:
    """The hand-written features' two linear peers, fit on one domain's training logs."""

    keys: list[str]
    bt: np.ndarray
    """Bradley-Terry weights on the mined pairs (what a perfect cue reader gets)."""
    ridge: np.ndarray
    """Ridge weights on every candidate's true success probability (an upper bound)."""
    matched: int
    """Training pairs matched to candidates (the pairs the Bradley-Terry model saw)."""
    missing: int
    """Training pairs whose texts matched no candidate under the budgets given."""


def fit_features(train, pairs_file: Path, budgets) -> FeatureFit:
    """Fit both peers. `train`: the training tasks (both orchestrators' candidates);
    `pairs_file`: the exported train pairs, matched to candidates by their rendered text
    under each `(max_tokens, count_tokens)` of `budgets` (the export's cut)."""
    keys = sorted(
        {
            k
            for t in train
            for c in t.candidates
            if c.orchestration
            for k in features(t.question, c.orchestration)
        }
    )
    by_text, rows, truth = {}, [], []
    for t in train:
        for c in t.candidates:
            if c.orchestration is None or c.p_success is None:
                continue
            f = features(t.question, c.orchestration)
            for b in budgets:
                by_text[render_for_rm(t.question, c.orchestration, *b)] = f
            rows.append(f)
            truth.append(c.p_success)
    diffs, missing = [], 0
    for line in Path(pairs_file).read_text().splitlines():
        pair = json.loads(line)
        a = by_text.get(pair["prompt"] + pair["chosen"])
        b = by_text.get(pair["prompt"] + pair["rejected"])
        if a is None or b is None:
            missing += 1
            continue
        diffs.append(design([a], keys)[0] - design([b], keys)[0])
    x = design(rows, keys)
    ridge = np.linalg.solve(x.T @ x + np.eye(len(keys)), x.T @ np.array(truth))
    return FeatureFit(keys, fit_bt(np.array(diffs)), ridge, len(diffs), missing)


def linear_scores(tasks, keys: list[str], w: np.ndarray) -> list[list[float | None]]:
    """A linear model's score of every candidate (None: no plan)."""
    return [
        [
            None
            if c.orchestration is None
            else float(design([features(t.question, c.orchestration)], keys)[0] @ w)
            for c in t.candidates
        ]
        for t in tasks
    ]


def cue_gap(tasks, scores: list[list[float | None]]) -> float:
    """Mean over tasks with a type hint of (mean z-score of plans using the hinted type) -
    (mean z-score of plans without it), z within the task; 0.0 when no task qualifies."""
    gaps = []
    for task, row in zip(tasks, scores, strict=True):
        hinted = cues(task.question)[0]
        if hinted is None:
            continue
        pairs = [
            (s, hinted in {v.type for v in views(c.orchestration).values()})
            for c, s in zip(task.candidates, row, strict=True)
            if c.orchestration is not None and s is not None
        ]
        values = [s for s, _ in pairs]
        sd = statistics.pstdev(values) if len(values) > 1 else 0.0
        if sd == 0:
            continue
        mean = statistics.fmean(values)
        uses = [(s - mean) / sd for s, hit in pairs if hit]
        lacks = [(s - mean) / sd for s, hit in pairs if not hit]
        if uses and lacks:
            gaps.append(statistics.fmean(uses) - statistics.fmean(lacks))
    return statistics.fmean(gaps) if gaps else 0.0


def rm_scores(rm, tasks) -> list[list[float | None]]:
    """A reward model's (`orchrm.scoring.base.Scorer`) score of every candidate of every
    task (None: no plan)."""
    rows = []
    for t in tasks:
        scored = rm.score([(t.question, c.orchestration) for c in t.candidates if c.orchestration])
        it = iter(scored)
        rows.append([None if c.orchestration is None else next(it).score for c in t.candidates])
    return rows


def chosen_p(tasks, scores: list[list[float | None]]) -> float:
    """The mean true success probability of each task's highest-scored candidate."""
    picks = []
    for task, row in zip(tasks, scores, strict=True):
        best = max(range(len(row)), key=lambda i: -1e18 if row[i] is None else row[i])
        picks.append(task.candidates[best].p_success or 0.0)
    return statistics.fmean(picks)


def random_p(tasks) -> float:
    """The mean true success probability of a random pick (the mean over candidates)."""
    return statistics.fmean(
        statistics.fmean(c.p_success or 0.0 for c in t.candidates) for t in tasks
    )


def bayes_p(tasks) -> float:
    """The mean of each task's best true success probability."""
    return statistics.fmean(max(c.p_success or 0.0 for c in t.candidates) for t in tasks)

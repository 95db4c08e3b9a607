"""How much of what the text allows does the reward model get? World logs only.

    .venv/bin/python benchmarks/rm_ceiling.py [--demo orchrm-demo] [--domain math]
        [--rm DIR ...]

Reads a finished `orchrm demo` folder: the training logs and pairs of one domain, its
held-out test logs and its reward model (plus any `--rm` directories). Each selector
picks one of each held-out task's 8 specialized candidates, and the figure is the mean
*true* success probability of the pick (no execution noise).

The peers read the same (question, orchestration) through features written by hand
from the world's design: which type the question's cue phrase hints at, x which
sub-agent types the plan uses and which one is its sink; split or whole cues x whether
the plan splits the work; whether a debate's roles match a topic the question names.
That is everything the text says about the hidden attributes, in the form a linear
model can use.
- `features-BT`: a Bradley-Terry model on those features, fit on the same mined pairs
  the reward model trained on. This is what a perfect reader of the cues gets from
  these labels.
- `features-ridge`: ridge regression of the true success probability on the same
  features over every training candidate. It uses the world's hidden labels, so it is
  an upper bound, not a method.
`random` (the mean over candidates) and `bayes` (the best true probability) bound the
scale. The last column is the share of the random -> bayes gap each selector closes.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orchrm.evaluation.metrics import tasks_from_logs
from orchrm.orchestration import AGENT_TYPES, Orchestration, render_for_rm
from orchrm.scoring.local import OrchRM
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


def features(question: str, o: Orchestration) -> dict[str, float]:
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
    debates = [v for v in agent_views.values() if v.type == "DebateAgent"]
    if debates and topic:
        experts = TOPICS[topic]["experts"]
        match = any(e in r.lower() for v in debates for r in v.roles for e in experts)
        f["debate roles match the topic" if match else "debate roles miss the topic"] = 1.0
    elif debates:
        f["debate, topic not named"] = 1.0
    return f


def design(rows: list[dict[str, float]], keys: list[str]) -> np.ndarray:
    return np.array([[r.get(k, 0.0) for k in keys] for r in rows])


def fit_bt(diffs: np.ndarray, l2: float = 0.01, steps: int = 3000) -> np.ndarray:
    """Bradley-Terry weights by gradient ascent on the L2-penalized log-likelihood."""
    w = np.zeros(diffs.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(diffs @ w)))
        w += 0.5 * (diffs.T @ (1 - p) / len(diffs) - l2 * w)
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
    missing: int


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


def rm_scores(rm: OrchRM, tasks) -> list[list[float | None]]:
    """The reward model's score of every candidate of every task (None: no plan)."""
    rows = []
    for t in tasks:
        scored = rm.score([(t.question, c.orchestration) for c in t.candidates if c.orchestration])
        it = iter(scored)
        rows.append([None if c.orchestration is None else next(it).score for c in t.candidates])
    return rows


def chosen_p(tasks, scores: list[list[float | None]]) -> float:
    picks = []
    for task, row in zip(tasks, scores, strict=True):
        best = max(range(len(row)), key=lambda i: -1e18 if row[i] is None else row[i])
        picks.append(task.candidates[best].p_success or 0.0)
    return statistics.fmean(picks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--demo", default="orchrm-demo", help="a finished `orchrm demo` folder")
    parser.add_argument("--domain", default="math")
    parser.add_argument("--rm", action="append", default=[], help="more reward models")
    parser.add_argument("--n", type=int, default=8)
    args = parser.parse_args()
    demo = Path(args.demo)
    train_logs = demo / "logs" / f"{args.domain}.train.jsonl"
    test_logs = demo / "logs" / f"{args.domain}.test.jsonl"
    pairs = demo / "pairs" / args.domain / "train.jsonl"
    for path in (train_logs, test_logs, pairs):
        if not path.exists():
            raise SystemExit(f"{path} is missing: run `orchrm demo --out {demo}` first")

    train = [
        t
        for orchestrator in ("specialized", "base")
        for t in tasks_from_logs([str(train_logs)], orchestrator, args.n)
    ]
    test = [
        t
        for t in tasks_from_logs([str(test_logs)], "specialized", args.n)
        if len(t.candidates) >= args.n
    ]
    # The demo cuts its pairs to the reward model's budget: match them the same way.
    rm = OrchRM.load(demo / "rm" / args.domain / "model")
    budget = rm.budget
    fit = fit_features(train, pairs, (budget, (512, None)))  # and the export's default budget
    scored = {
        "features-BT (same pairs)": linear_scores(test, fit.keys, fit.bt),
        "features-ridge (true p labels)": linear_scores(test, fit.keys, fit.ridge),
    }
    results = {
        "random": statistics.fmean(
            statistics.fmean(c.p_success or 0.0 for c in t.candidates) for t in test
        ),
        "bayes": statistics.fmean(max(c.p_success or 0.0 for c in t.candidates) for t in test),
        **{name: chosen_p(test, scores) for name, scores in scored.items()},
    }
    demo_rm = demo / "rm" / args.domain / "model"
    for folder in [demo_rm, *map(Path, args.rm)]:
        rm = rm if folder == demo_rm else OrchRM.load(folder)
        full = rm_scores(rm, test)
        results[f"reward model {folder}"] = chosen_p(test, full)
        scored[f"reward model {folder}"] = full
    scored["bayes"] = [[c.p_success for c in t.candidates] for t in test]

    low, high = results["random"], results["bayes"]
    print(
        f"{args.domain}: {len(test)} held-out tasks x {args.n}; {fit.matched} training "
        f"pairs matched ({fit.missing} not), {len(fit.keys)} features\n"
    )
    print("| selector | true p of the pick | share of the random -> bayes gap | reads the cue |")
    print("| --- | ---: | ---: | ---: |")
    for name, value in sorted(results.items(), key=lambda kv: -kv[1]):
        gap = f"{cue_gap(test, scored[name]):+.2f}" if name in scored else "-"
        print(f"| {name} | {value:.3f} | {(value - low) / (high - low):.2f} | {gap} |")
    print(
        "\nreads the cue: within each task whose question hints at a sub-agent type, "
        "scores standardized, mean score of the plans that use that type minus that of "
        "the plans that do not, averaged over tasks (bayes: the true success probability, "
        "the size of the real effect; near 0: the selector ignores the question's hint)."
    )


if __name__ == "__main__":
    main()

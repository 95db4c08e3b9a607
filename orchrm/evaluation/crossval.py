"""Cross-validated best-of-N on a store: leave-one-task-out (or k folds of tasks).

For logs too small to hold out a test split (MAS-Orchestra's published samples: six
tasks), every fold trains a reward model on the pairs of all other tasks and scores the
candidates of its own tasks only, so no task is ever scored by a model that saw its pairs.
The per-fold choices are then evaluated together against the selectors that need no
training (majority vote, random, the orchestrator's log-probability, the oracle).
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import replace
from pathlib import Path

from orchrm.errors import InputError
from orchrm.evaluation.config import LotoConfig
from orchrm.evaluation.lineup import build_lineup, by_domain, evaluate_tasks
from orchrm.evaluation.loading import tasks_from_store
from orchrm.evaluation.metrics import Evaluation
from orchrm.jsonl import write_jsonl
from orchrm.selection.selectors import CandidateSet, RewardModelSelector, Selection
from orchrm.store.db import Store
from orchrm.store.pairs import mine, preference_rows


def fold_of(task_id: str, folds: int, seed: int = 0) -> int:
    """The fold a task falls in when tasks are split into `folds` folds by hash."""
    digest = hashlib.md5(f"{seed}:{task_id}".encode()).hexdigest()
    return int(digest[:8], 16) % folds


class _FoldSelector:
    """`orchrm` under cross-validation: each task is scored by its own fold's model."""

    def __init__(self, by_task: dict[str, RewardModelSelector]):
        self.by_task = by_task

    def __call__(self, task: CandidateSet) -> Selection:
        return self.by_task[task.task_id](task)


def _folds(tasks: list[CandidateSet], config: LotoConfig) -> list[list[CandidateSet]]:
    """The tasks of each fold: one task each, or `config.folds` folds by hash."""
    if config.folds is None:
        return [[t] for t in tasks]
    fold = {t.task_id: fold_of(t.task_id, config.folds, config.seed) for t in tasks}
    return [[t for t in tasks if fold[t.task_id] == f] for f in range(config.folds)]


def _fold_selector(
    members: list[CandidateSet], rows: list[dict], *, name: str, config: LotoConfig, say
) -> RewardModelSelector | None:
    """A reward model trained on the pairs of every task outside `members`, with the
    scores of `members`' candidates; None when no pair is left to train on."""
    from orchrm.scoring.load import load_scorer
    from orchrm.training.train import train

    out = Path(config.out) / name
    held = {t.task_id for t in members}
    train_rows = [r for r in rows if r["task_id"] not in held]
    if not train_rows:
        say(f"{name}: no pair outside its tasks to train on; its tasks are left out")
        return None
    write_jsonl(train_rows, out / "pairs" / "train.jsonl")
    summary = train(
        replace(config.train, pairs=str(out / "pairs"), out=str(out / "rm"), seed=config.seed)
    )
    # scored in the precision it trained in
    selector = RewardModelSelector(load_scorer(out / "rm" / "model", dtype=summary.dtype))
    selector.warm(members)  # every candidate scored once; subsets of N reuse the scores
    selector.rm = None  # the scores are all it needs from now on
    say(
        f"{name}: held out {len(members)} task(s), trained on {len(train_rows)} pairs "
        f"({summary.pairs_per_second:.1f} pairs/s)"
    )
    if not config.keep_models:
        shutil.rmtree(out / "rm", ignore_errors=True)
    return selector


def cross_validate(store: Store, config: LotoConfig, say=print) -> list[Evaluation]:
    """Mine, train one reward model per fold, evaluate best-of-N per domain."""
    from orchrm.rmodel.tokens import backbone_budget

    mined = mine(store, replace(config.mine, split=(1.0, 0.0, 0.0), seed=config.seed))
    say(f"pairs: {', '.join(f'{k} {v}' for k, v in mined.kept.items()) or 'none'}")
    max_tokens, count = backbone_budget(
        config.train.backbone, config.train.max_length, config.train.trust_remote_code
    )
    rows = preference_rows(store, config.mine.dataset, max_tokens=max_tokens, count_tokens=count)
    tasks = [
        t
        for t in tasks_from_store(store, config.orchestrator, config.n)
        if len(t.candidates) >= config.n
    ]
    if not tasks:
        raise InputError(f"no task in the store has {config.n} candidates")
    folds = _folds(tasks, config)
    chosen: dict[str, RewardModelSelector] = {}
    for f, members in enumerate(folds):
        if not members:
            continue
        selector = _fold_selector(members, rows, name=f"fold-{f:02d}", config=config, say=say)
        if selector is not None:
            chosen.update({t.task_id: selector for t in members})
    scored = [t for t in tasks if t.task_id in chosen]
    lineup = build_lineup(scored, rm_selector=_FoldSelector(chosen), seed=config.seed)
    protocol = (
        "leave-one-task-out" if config.folds is None else f"{len(folds)} folds of tasks (by hash)"
    )
    evaluations = []
    for domain, group in by_domain(lineup.tasks).items():
        ev = evaluate_tasks(group, lineup.selectors, config.n, domain or "all")
        ev.notes = {
            "protocol": protocol,
            "orchrm": "each task scored by a reward model trained on the other tasks' pairs",
            "pairs by kind": mined.kept,
        }
        evaluations.append(ev)
    return evaluations

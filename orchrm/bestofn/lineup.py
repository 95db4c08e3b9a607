"""Assemble the best-of-N selectors of an evaluation and run it on logs.

`selectors(...)` builds the paper's line-up: `orchrm` (argmax of the reward model),
`orchrm-weighted`, `majority`, `random`, `logp`, `judge-orch`, `judge-traj`,
`external-rm`, `oracle` and, on world logs, `bayes`. `evaluate_logs` runs it on
`orchrm.run/1` logs and writes the report.
"""

from __future__ import annotations

from pathlib import Path

from orchrm.bestofn.judges import llm_judge
from orchrm.bestofn.metrics import Evaluation, evaluate, tasks_from_logs
from orchrm.bestofn.selectors import (
    RewardModelSelector,
    Selector,
    Task,
    bayes_selector,
    logp_selector,
    majority_selector,
    oracle_selector,
    random_selector,
)
from orchrm.runtime.backend import ChatBackend


def selectors(
    rm=None, external_rm=None, judge: ChatBackend | None = None, world: bool = False, seed: int = 0
) -> dict[str, Selector]:
    """The selectors that can run with what is given (a reward model, another reward model
    used off the shelf, a judge backend, world ground truth)."""
    out: dict[str, Selector] = {}
    if rm is not None:
        out["orchrm"] = RewardModelSelector(rm)
        out["orchrm-weighted"] = RewardModelSelector(
            rm, weighted=True, share_scores_with=out["orchrm"]
        )
    out["majority"] = majority_selector
    out["random"] = random_selector(seed)
    out["logp"] = logp_selector
    if judge is not None:
        out["judge-orch"] = llm_judge(judge, "orchestration")
        out["judge-traj"] = llm_judge(judge, "trajectory")
    if external_rm is not None:
        out["external-rm"] = RewardModelSelector(external_rm)
    out["oracle"] = oracle_selector
    if world:
        out["bayes"] = bayes_selector
    return out


def world_judge(tasks_files: list[str | Path]):
    """The world's simulated judge over the tasks written by `orchrm world generate`."""
    from orchrm.jsonl import read_jsonl
    from orchrm.world.backend import WorldBackend
    from orchrm.world.tasks import WorldTask

    tasks = [WorldTask.from_dict(r) for f in tasks_files for _, r in read_jsonl(f)]
    return WorldBackend(tasks)


def evaluate_logs(
    logs: list[str],
    chosen: dict[str, Selector],
    orchestrator: str | None,
    n: int,
    domain: str = "",
    progress: bool = True,
) -> Evaluation:
    """Best-of-`n` over the logs' tasks (each with at least `n` samples), at N = 1, 2,
    4, ... up to `n`."""
    return evaluate_tasks(tasks_from_logs(logs, orchestrator, n), chosen, n, domain, progress)


def evaluate_tasks(
    tasks: list[Task], chosen: dict[str, Selector], n: int, domain: str = "", progress: bool = True
) -> Evaluation:
    """Best-of-`n` over the tasks that have at least `n` candidates (the first `n` of
    each), at N = 1, 2, 4, ... up to `n`."""
    from orchrm.progress import progress_bar

    tasks = [
        t if len(t.candidates) == n else Task(t.task_id, t.question, t.candidates[:n], t.domain)
        for t in tasks
        if len(t.candidates) >= n
    ]
    ns = sorted({1 << k for k in range(n.bit_length()) if 1 << k <= n} | {n})
    with progress_bar(f"evaluating {domain or 'selectors'}", len(tasks) * len(ns), progress) as (
        bar,
        task,
    ):
        ev = evaluate(tasks, chosen, ns, domain=domain, progress=lambda: bar.advance(task))
    return ev


def by_domain(tasks: list[Task]) -> dict[str, list[Task]]:
    """Tasks grouped by domain, domains sorted (the report has one table per domain)."""
    groups: dict[str, list[Task]] = {}
    for t in tasks:
        groups.setdefault(t.domain or "", []).append(t)
    return dict(sorted(groups.items()))

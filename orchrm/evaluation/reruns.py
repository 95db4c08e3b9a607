"""Re-execute logged candidates on the world, so votes get an expected accuracy too.

A selector that executes one candidate has an exact expected accuracy on world logs: the
candidate's true success probability. A vote (majority, the reward-weighted vote) reads
the answers of all N executions, which have no closed form together; `with_reruns` runs
each candidate's plan K more times on the world (seeds other than the log's) and stores
the (answer, correct) pairs in `Candidate.reruns`. `orchrm.evaluation.metrics` then replays the
vote on each of the K runs. With K = 20 the vote's expected accuracy on a task is known
to within about +-0.1, and the noise of its mean over 100 tasks is dominated by the
choice of tasks, as for the other selectors.

A plan no candidate is (`orchrm-search`'s edit) was never logged: `world_outcome` gives
its true success probability and runs it once, so it is measured as a logged candidate.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

from orchrm.errors import InputError
from orchrm.orchestration import Orchestration, validate
from orchrm.runtime.executor import RunItem, execute_many
from orchrm.selection.selectors import Candidate, CandidateSet
from orchrm.tasks.grading import grade
from orchrm.world.backend import WorldBackend
from orchrm.world.generate import world_config
from orchrm.world.model import success_probability
from orchrm.world.tasks import WorldTask

RERUN_SEED = 1_000_003
"""First backend seed of the re-executions; run k uses RERUN_SEED + k (logs are written
with small seeds, so the re-executions never replay the logged one)."""


PLAN_SEED = RERUN_SEED - 1
"""Backend seed of the one execution `world_outcome` gives a plan no candidate is."""


def world_outcome(
    world_tasks: list[WorldTask],
) -> Callable[[CandidateSet, Orchestration], Candidate]:
    """What the world gives for a plan none of a task's candidates is (a search's edit):
    a `Candidate` with the plan's true success probability (`success_probability`), and
    its answer, correctness and tokens from one execution on the world (seed
    `PLAN_SEED`), as a logged candidate has them. Each (task, plan) is run once. Raises
    InputError naming a task the world does not know."""
    world = {t.id: t for t in world_tasks}
    config = world_config()
    backend = WorldBackend(list(world_tasks), PLAN_SEED, None, config)
    done: dict[tuple[str, Orchestration], Candidate] = {}

    def outcome(task: CandidateSet, plan: Orchestration) -> Candidate:
        key = (task.task_id, plan)
        if key in done:
            return done[key]
        truth = world.get(task.task_id)
        if truth is None:
            raise InputError(
                f"task {task.task_id} is not in the world task files: pass the "
                "PRESET.tasks.jsonl the logs were generated with"
            )
        p = success_probability(truth, plan, config)
        if validate(plan):
            done[key] = replace(Candidate(plan), p_success=p)
            return done[key]
        item = RunItem(plan, task.question, task.task_id, 0)
        (result,) = asyncio.run(execute_many([item], backend, config, progress=False))
        answer = result.answer
        right = answer is not None and bool(grade(answer, truth.answer, truth.domain))
        done[key] = Candidate(
            plan,
            answer=answer,
            correct=right,
            execution_tokens=result.total_tokens,
            p_success=p,
            orch_id="edited",
        )
        return done[key]

    return outcome


def with_reruns(
    tasks: list[CandidateSet], world_tasks: list[WorldTask], k: int = 20
) -> list[CandidateSet]:
    """`tasks` with every candidate's `reruns` filled by K executions on the world. A
    plan that does not parse or breaks a graph rule never runs: (None, False) K times.
    Raises ValueError naming a task the world does not know."""
    if k < 1:
        return tasks
    world = {t.id: t for t in world_tasks}
    unknown = [t.task_id for t in tasks if t.task_id not in world]
    if unknown:
        raise InputError(
            f"{len(unknown)} tasks are not in the world task files (first: {unknown[0]}): "
            "pass the PRESET.tasks.jsonl the logs were generated with"
        )
    items, where = [], []
    for i, task in enumerate(tasks):
        for s, c in enumerate(task.candidates):
            if c.orchestration is not None and not validate(c.orchestration):
                items.append(RunItem(c.orchestration, task.question, task.task_id, s))
                where.append((i, s))
    needed = sorted({item.task_id for item in items})
    runs: dict[tuple[int, int], list[tuple[str | None, bool]]] = {w: [] for w in where}
    for graded in _run_all(items, [world[t] for t in needed], k):
        for w, outcome in zip(where, graded, strict=True):
            runs[w].append(outcome)
    never = ((None, False),) * k
    return [
        CandidateSet(
            task.task_id,
            task.question,
            tuple(
                replace(c, reruns=tuple(runs.get((i, s), never)))
                for s, c in enumerate(task.candidates)
            ),
            task.domain,
        )
        for i, task in enumerate(tasks)
    ]


def _run_all(items: list[RunItem], world: list[WorldTask], k: int) -> list[list]:
    """The graded (answer, correct) of every item in each of the K runs, run k with
    backend seed RERUN_SEED + k: in as many processes as the CPU has cores (at most
    K; Linux), each run whole in one of them, so the outcome is the same on any number."""
    # Forked processes on Linux alone: elsewhere forking a threaded process is unsafe.
    linux = sys.platform.startswith("linux")
    workers = min(k, len(os.sched_getaffinity(0))) if linux else 1
    if workers < 2 or len(items) * k < PARALLEL_FROM:
        return _run_some(items, world, range(k))
    share = [range(w, k, workers) for w in range(workers)]
    # Forked: nothing is imported or pickled again, and the children run plain Python
    # (the world), never the parent's torch or tokenizer threads.
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        done = list(pool.map(_run_some, [items] * workers, [world] * workers, share))
    by_run: dict[int, list] = {}
    for runs, graded in zip(share, done, strict=True):
        by_run.update(zip(runs, graded, strict=True))
    return [by_run[run] for run in range(k)]


PARALLEL_FROM = 4_000
"""Executions (items x runs) from which the re-executions spread over processes: below
it, starting them costs more than it saves."""


def _run_some(items: list[RunItem], world: list[WorldTask], runs) -> list[list]:
    """`_run_all`'s work for the runs in `runs`, in this process."""
    config = world_config()
    truth = {t.id: t for t in world}
    out = []
    for run in runs:
        backend = WorldBackend(list(world), RERUN_SEED + run, None, config)
        results = asyncio.run(execute_many(items, backend, config, progress=False))
        graded = []
        for item, result in zip(items, results, strict=True):
            task, answer = truth[item.task_id], result.answer
            right = answer is not None and bool(grade(answer, task.answer, task.domain))
            graded.append((answer, right))
        out.append(graded)
    return out

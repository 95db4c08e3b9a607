"""The line-up of an evaluation, built once for every command, and running it.

`build_lineup` gives eval, the demo and cross-validation the same thing: the registered
selectors that can run with what is given (`orchrm.selection.registry`) and, on world
logs, the world playing the judges and the candidates re-executed for the votes'
expected accuracy. `evaluate_tasks` and `evaluate_logs` run a line-up at N = 1, 2, 4,
... up to N.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchrm.errors import InputError
from orchrm.evaluation.config import EvalConfig
from orchrm.evaluation.loading import tasks_from_logs
from orchrm.evaluation.metrics import Evaluation, evaluate_selectors
from orchrm.selection.registry import LineupInputs, line_up
from orchrm.selection.selectors import CandidateSet, Selector

CURVE_COSTLY = ("orchrm-search",)
"""Selectors an evaluation runs at the full N alone unless asked for every N
(`EvalConfig.search_curve`): the search scores up to `search_budget` edits for each
subset of N it searches from, mostly edits of other plans than at the full N, so its
points at N = 1, 2, 4 score about eight times the edits the full N does (the demo: 13,137
against 1,577), and no table reads them."""


@dataclass
class LineUp:
    """The candidate sets to evaluate and the selectors that choose among them."""

    tasks: list[CandidateSet]
    """With `Candidate.reruns` filled when the line-up was built on the world."""
    selectors: dict[str, Selector]


def build_lineup(
    tasks: list[CandidateSet],
    *,
    judge=None,
    world_tasks: list | None = None,
    reruns: int = 0,
    **inputs,
) -> LineUp:
    """The selectors that can run with what is given: `inputs` are `LineupInputs` fields,
    the models (`rm`, `external_rm`, `mixed_rm`, `unified_rm`, `rm_selector`), `seed`,
    and how the selectors choose (`options`: an
    `orchrm.selection.options.SelectorOptions`). With `world_tasks` (the `WorldTask`s the
    logs were generated from) the world's simulated judge replaces `judge`, `bayes`
    joins, every candidate is re-executed `reruns` times, and the world runs the plans
    `orchrm-search` makes (`world_outcome`), so it joins too; raises ValueError naming a
    task the world does not know."""
    if world_tasks:
        from orchrm.evaluation.reruns import with_reruns, world_outcome
        from orchrm.world.backend import WorldBackend

        judge = WorldBackend(list(world_tasks))
        tasks = with_reruns(tasks, list(world_tasks), reruns)
        inputs.setdefault("plan_outcome", world_outcome(list(world_tasks)))
    inputs = LineupInputs(judge=judge, world=bool(world_tasks), **inputs)
    return LineUp(tasks, line_up(inputs))


def read_world_tasks(tasks_files: list[str | Path]) -> list:
    """The `WorldTask`s in the task files `orchrm world generate` writes."""
    from orchrm.jsonl import read_jsonl
    from orchrm.world.tasks import WorldTask

    return [WorldTask.from_dict(r) for f in tasks_files for _, r in read_jsonl(f)]


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
    tasks: list[CandidateSet],
    chosen: dict[str, Selector],
    n: int,
    domain: str = "",
    progress: bool = True,
    curve: bool = True,
) -> Evaluation:
    """Best-of-`n` over the tasks that have at least `n` candidates (the first `n` of
    each), at N = 1, 2, 4, ... up to `n`, with the calibration of `orchrm`'s model when
    it has one (`Evaluation.calibration`); with `curve` False the `CURVE_COSTLY`
    selectors run at `n` alone."""
    from orchrm.evaluation.reliability import selector_calibration
    from orchrm.progress import progress_bar

    tasks = first_candidates(tasks, n)
    ns = sorted({1 << k for k in range(n.bit_length()) if 1 << k <= n} | {n})
    with progress_bar(f"evaluating {domain or 'selectors'}", len(tasks) * len(ns), progress) as (
        bar,
        task,
    ):
        ev = evaluate_selectors(
            tasks,
            chosen,
            ns,
            domain=domain,
            progress=lambda: bar.advance(task),
            full_n_only=() if curve else CURVE_COSTLY,
        )
    ev.calibration = selector_calibration(tasks, chosen.get("orchrm"))
    return ev


def first_candidates(tasks: list[CandidateSet], n: int) -> list[CandidateSet]:
    """The tasks with at least `n` candidates, each cut to its first `n`."""
    return [
        t
        if len(t.candidates) == n
        else CandidateSet(t.task_id, t.question, t.candidates[:n], t.domain)
        for t in tasks
        if len(t.candidates) >= n
    ]


def offline_selectors(lineup: LineUp) -> dict[str, Selector]:
    """The line-up without its LLM judges: what a page of every task's picks can run
    again at no cost (the reward models' scores are cached)."""
    return {k: v for k, v in lineup.selectors.items() if not k.startswith("judge")}


def by_domain(tasks: list[CandidateSet]) -> dict[str, list[CandidateSet]]:
    """Tasks grouped by domain, domains sorted (the report has one table per domain)."""
    groups: dict[str, list[CandidateSet]] = {}
    for t in tasks:
        groups.setdefault(t.domain or "", []).append(t)
    return dict(sorted(groups.items()))


def _held_out_tasks(config: EvalConfig) -> list[CandidateSet]:
    """The candidate sets `config` names, each domain's with at least `n` candidates;
    raises InputError saying what there is when none qualifies."""
    from orchrm.evaluation.loading import tasks_from_store

    if config.store:
        from orchrm.store.db import Store

        with Store(config.store, read_only=True) as db:
            every = tasks_from_store(db, config.orchestrator, None, None, config.held_out_of)
        source = f"the store {config.store}"
    else:
        every = tasks_from_logs(list(config.logs), config.orchestrator)
        source = "the logs"
    domains = sorted({t.domain or "" for t in every})
    if config.domain is not None and config.domain not in domains:
        raise InputError(
            f"no task of domain {config.domain!r} in {source}; its domains: "
            + (", ".join(repr(d) for d in domains) or "none")
        )
    kept = [
        t
        for t in every
        if len(t.candidates) >= config.n and config.domain in (None, t.domain or "")
    ]
    if not kept:
        most = max((len(t.candidates) for t in every), default=0)
        whose = f" from {config.orchestrator}" if config.orchestrator else ""
        raise InputError(
            f"no task in {source} has {config.n} samples{whose} (the most any has: {most}); "
            "lower --samples"
        )
    return kept


@dataclass
class HeldOut:
    """What `evaluate_held_out` measured, and what the viewer shows of it."""

    evaluations: list[Evaluation]
    """One per domain."""
    shown: list[CandidateSet]
    """Every task with its first N candidates."""
    selectors: dict[str, Selector]
    """The line-up's selectors that need no re-execution (they pick on the page)."""


def evaluate_held_out(config: EvalConfig, say=print, progress: bool = True) -> HeldOut:
    """`orchrm eval` in one call: the held-out tasks `config` names, the line-up its models
    and judges allow (`say` names what is left out and why), one `Evaluation` per domain,
    and what `orchrm.viewer.page.write_evaluation_view` shows beside the report."""
    tasks = _held_out_tasks(config)  # before torch loads: a missing log is said at once
    from orchrm.scoring.load import load_scorer
    from orchrm.scoring.local import OrchRM

    model = None
    if config.rm or config.rm_url:
        here = "auto" if config.rm_url else config.dtype  # a server scores in its own
        model = load_scorer(config.rm, config.rm_url, config.rm_protocol, dtype=here)
    external = (
        OrchRM.load(config.external_rm, dtype=config.dtype, check_version=False)
        if config.external_rm
        else None
    )
    judge = None
    if config.judge_base_url and not config.world_tasks:
        from orchrm.runtime.openai_backend import OpenAIBackend, OpenAIConfig

        judge = OpenAIBackend(
            OpenAIConfig(base_url=config.judge_base_url, model=config.judge_model)
        )
    if not model:
        say("no --rm or --rm-url: the orchrm selectors are left out")
    if not config.world_tasks and not judge:
        say("no --world-tasks or --judge-base-url: the LLM judges are left out")
    worlds = read_world_tasks(list(config.world_tasks)) if config.world_tasks else None
    lineup = build_lineup(
        tasks,
        rm=model,
        external_rm=external,
        judge=judge,
        world_tasks=worlds,
        reruns=config.reruns,
        options=config.selector_options,
    )
    evaluations = [
        evaluate_tasks(group, lineup.selectors, config.n, name, progress, config.search_curve)
        for name, group in by_domain(lineup.tasks).items()
    ]
    return HeldOut(evaluations, first_candidates(lineup.tasks, config.n), offline_selectors(lineup))

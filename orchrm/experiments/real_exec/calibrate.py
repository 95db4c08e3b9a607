"""The calibration of the real-execution study (`orchrm.experiments.real_exec.run`): each
sub-agent type alone, executed by SmolLM2 on llama.cpp, on tasks of every kind and level,
and its success table (`orchrm.experiments.real_exec.tables.calibration_table`), from
which the study's task mix (`MIX`) was chosen."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from orchrm.experiments.real_exec.cache import throughput
from orchrm.experiments.real_exec.evaluate import run_seed
from orchrm.experiments.real_exec.settings import (
    Clock,
    RealExecSettings,
    _server,
    run_config,
    serve,
)
from orchrm.experiments.real_exec.tables import calibration_table
from orchrm.jsonl import write_jsonl
from orchrm.orchestration.agent_types import AGENT_REGISTRY
from orchrm.runtime.config import RunConfig
from orchrm.runtime.executor import RunItem, execute_many
from orchrm.runtime.openai_backend import OpenAIBackend
from orchrm.runtime.retrieval import Retriever
from orchrm.tasks.benchmarks.generated import (
    EVERY_CELL,
    TASK_KINDS,
    GeneratedTask,
    grade,
    make_tasks,
    world_corpus,
)
from orchrm.world.templates import SINGLE, single_plan


async def _calibrate_runs(
    server: OpenAIBackend, items: list[RunItem], config: RunConfig, retriever: Retriever
):
    async with server:
        await server.preflight(("subagent",))
        return await execute_many(
            items, server, config, retriever=retriever, description="calibrating"
        )


def _calibration_tasks(settings: RealExecSettings) -> list[GeneratedTask]:
    """`calibrate_tasks` tasks of every (kind, level) cell of the kinds asked for."""
    kinds = settings.kinds or tuple(TASK_KINDS)
    cells = tuple(c for c in EVERY_CELL if c[0] in kinds or f"{c[0]}{c[1]}" in kinds)
    return make_tasks(cells, len(cells) * settings.calibrate_tasks, settings.seed, "cal")


def _one_agent_runs(
    settings: RealExecSettings, tasks: list[GeneratedTask]
) -> tuple[list[RunItem], list[tuple[GeneratedTask, str]]]:
    """Each task's one-agent plan of every sub-agent type (web search only where the task
    has passages), with the first execution seed's run 0: the run items and, for each, its
    (task, sub-agent type)."""
    items, rows = [], []
    for t in tasks:
        for agent_type, structure in SINGLE.items():
            if AGENT_REGISTRY[agent_type].searches and not t.documents:
                continue  # nothing to search for an arithmetic task
            seed = run_seed(settings.execution_seeds[0], 0)
            plan = single_plan(structure)
            items.append(RunItem(plan, t.task.question, t.task.id, len(items), seed))
            rows.append((t, agent_type))
    return items, rows


def _calibration_record(t: GeneratedTask, agent_type: str, result) -> dict:
    """One calibration run as a line of OUT/calibrate.jsonl: the task, the sub-agent type,
    the answer, whether it is right and the execution."""
    return {
        "task_id": t.task.id,
        "kind": t.kind,
        "level": t.level,
        "question": t.task.question,
        "ground_truth": t.task.answer,
        "agent_type": agent_type,
        "answer": result.answer,
        "correct": bool(grade(result.answer, t.task.answer)),
        "error": result.error,
        "execution": result.to_dict(),
    }


def calibrate(settings: RealExecSettings, say: Callable[[str], None] = print) -> dict:
    """Each sub-agent type alone (a one-agent plan) once on `calibrate_tasks` tasks of
    every kind and level; says the success per cell and per type, writes OUT/calibrate.json
    and OUT/calibrate.jsonl, and returns the table (`calibration_table`)."""
    out = Path(settings.out)
    out.mkdir(parents=True, exist_ok=True)
    tasks = _calibration_tasks(settings)
    items, rows = _one_agent_runs(settings, tasks)
    config = run_config(settings)
    clock = Clock()
    say(f"calibrating: {len(tasks)} tasks x their sub-agent types = {len(items)} runs")
    with serve(settings) as llm:
        clock.lap("serve start")
        results = asyncio.run(_calibrate_runs(_server(llm), items, config, world_corpus()))
        clock.lap("execute")
    records = [
        _calibration_record(t, agent_type, result)
        for (t, agent_type), result in zip(rows, results, strict=True)
    ]
    write_jsonl(records, out / "calibrate.jsonl")
    table = calibration_table(records)
    say(table["text"])
    say(throughput(records, clock.seconds["execute"]))
    say("seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in clock.seconds.items()))
    (out / "calibrate.json").write_text(json.dumps(table, indent=2))
    return table

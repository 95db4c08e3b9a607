"""Orch-RM against majority vote with every plan executed by a real LLM: `orchrm demo`'s
pipeline (logs -> store -> pairs -> reward model -> best-of-N), with the simulated world
replaced by real executions. SmolLM2-135M-Instruct served by llama.cpp on loopback
(`orchrm.runtime.local_llm.LocalLLM`, `slots` parallel slots, `threads` 0: every core)
answers every sub-agent call, through orchrm's own run path
(`orchrm.tasks.run.run_tasks`: parse, validate, execute, grade, one `orchrm.run/1` record
per plan). Token counts are the server's `usage`.

What is real and what is not:
- Tasks: exact-answer questions generated from the seed
  (`orchrm.tasks.benchmarks.generated`: sums, differences, products, "has x, gets y
  more" word problems, two-step sums, comparisons, letter counts), each kind at graded
  levels, graded by orchrm's math grader. `calibrate` measures the model's success per
  kind and level and per sub-agent type; `MIX` is the kinds and levels whose success it
  measured between 20% and 80%.
- Plans: SmolLM2-135M cannot write a usable plan, so no LLM writes them. Two template
  orchestrators (`orchrm.world.templates.TemplateOrchestrator`) draw a plan structure and
  its wording and write it as harmony XML with a thinking channel, which `run_tasks`
  parses like any orchestrator's text. `base` draws every structure alike; `specialized`
  is told the task's kind and prefers the structures `PREFERRED` names for it (`follow`
  of the time). Each plan's log-probability is the log-probability of the template's
  draws plus a charge per written token, as the world's orchestrators report theirs (the
  `logp` selector reads it). No LLM wrote them, so the plans cost 0 orchestrator tokens.
- Execution: real. `RunConfig` with small budgets (`max_tokens` 96 a call, SC 3 samples,
  debate 1 round of 2 roles, reflexion 1 round), temperature 0.5.
- Reward model: the store, pair mining (specialized-over-base and correct-over-incorrect,
  1:3) and training of `orchrm.experiments.world_models.world_reward_models`, which
  `orchrm demo` runs on world logs and which reads any `orchrm.run/1` logs: MiniLM
  default backbone, fp32, `steps` steps of 16 pairs, Platt-calibrated on its validation
  tasks.
- Evaluation: best-of-N on held-out tasks (other seed) over the specialized
  orchestrator's N executed plans, with the demo's line-up and metrics
  (`orchrm.evaluation.lineup.build_lineup`, `evaluate_tasks`): Orch-RM's argmax against
  majority vote, random, logp and the oracle (any correct), paired 95% bootstrap
  intervals against majority, and tokens (execution from the server's usage, the reward
  model's input tokens as its verification). One execution per plan: accuracies are
  sampled, with no expected accuracy (the world's re-executions have no equivalent here).

OUT gets logs/train.jsonl and logs/test.jsonl (the records), logs/train.tasks.jsonl and
logs/test.tasks.jsonl (the tasks, as `orchrm.tasks.benchmarks.generated.save_tasks`
writes them), the store, pairs and model, report.md, report.json and the plots;
`calibrate` writes calibrate.json and calibrate.jsonl.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from orchrm.evaluation.lineup import build_lineup, evaluate_tasks, first_candidates
from orchrm.evaluation.loading import tasks_from_logs
from orchrm.evaluation.report import points, terminal_table, write_report
from orchrm.jsonl import read_jsonl, write_jsonl
from orchrm.runtime.config import RunConfig
from orchrm.runtime.executor import RunItem, execute_many
from orchrm.runtime.local_llm import LocalLLM, LocalLLMConfig
from orchrm.runtime.openai_backend import OpenAIBackend, OpenAIConfig
from orchrm.runtime.routing import RoutingBackend
from orchrm.tasks.benchmarks.generated import (
    DOMAIN,
    EVERY_CELL,
    TASK_KINDS,
    GeneratedTask,
    grade,
    make_tasks,
    save_tasks,
)
from orchrm.tasks.run import run_tasks
from orchrm.world.templates import (
    SINGLE,
    STRUCTURES,
    TemplateOrchestrator,
    single_plan,
    structure_of,
)

MIX: tuple[tuple[str, int], ...] = (
    ("add", 1),
    ("mul", 1),
    ("mul", 2),
    ("compare", 1),
    ("compare", 2),
    ("compare", 3),
)
"""(kind, level) cells the train and test tasks cycle through: those whose success
`calibrate` measured between 20% and 80% (seed 0, 4 tasks a cell)."""


@dataclass(frozen=True)
class Sizes:
    """How many tasks, plans a task (N) and training steps a run has."""

    train_tasks: int
    test_tasks: int
    samples: int
    steps: int


QUICK = Sizes(train_tasks=12, test_tasks=12, samples=4, steps=30)
FULL = Sizes(train_tasks=48, test_tasks=72, samples=8, steps=150)


@dataclass(frozen=True)
class RealExecSettings:
    """One run's settings: the sizes, the server's and the executor's."""

    out: str = "runs/real-exec"
    sizes: Sizes = FULL
    from_logs: bool = False
    """Skip execution: train and evaluate on the records OUT/logs already holds."""
    max_tokens: int = 96
    """Completion tokens a sub-agent call."""
    slots: int = 4
    """llama.cpp's parallel slots."""
    threads: int = 0
    """llama.cpp's threads (0: every core)."""
    concurrency: int = 8
    """Plans executed at once."""
    seed: int = 0
    calibrate_tasks: int = 4
    """`calibrate`: tasks a (kind, level) cell."""
    kinds: tuple[str, ...] = ()
    """`calibrate`: these task kinds only (empty: every kind)."""


def run_config(settings: RealExecSettings) -> RunConfig:
    """Small budgets for a 135M model on two CPU cores."""
    return RunConfig(
        max_tokens=settings.max_tokens,
        sc_samples=3,
        debate_rounds=1,
        reflexion_rounds=1,
        concurrency=settings.concurrency,
        call_timeout_s=180.0,
    )


@dataclass
class Clock:
    """Seconds per stage, in order."""

    seconds: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    mark: float = field(default_factory=time.perf_counter)

    def lap(self, stage: str) -> None:
        """Add the seconds since the last lap to `stage`."""
        now = time.perf_counter()
        self.seconds[stage] = round(self.seconds.get(stage, 0.0) + now - self.mark, 1)
        self.mark = now

    def total(self) -> float:
        return time.perf_counter() - self.started


def serve(settings: RealExecSettings) -> LocalLLM:
    """The llama.cpp server of SmolLM2-135M-Instruct, started by `with`."""
    return LocalLLM(LocalLLMConfig(slots=settings.slots, ctx_size=2048, threads=settings.threads))


def _server(llm: LocalLLM) -> OpenAIBackend:
    return OpenAIBackend(OpenAIConfig(base_url=llm.base_url, model=llm.model))


def throughput(records: list[dict], seconds: float) -> str:
    """Plans, calls, calls a second, completion tokens a call and failed runs."""
    calls = [c for r in records for c in ((r.get("execution") or {}).get("calls") or [])]
    tokens = sum(c["completion_tokens"] for c in calls)
    failed = sum(1 for r in records if r.get("execution") and r["execution"].get("error"))
    return (
        f"{len(records)} plans, {len(calls)} calls in {seconds:.0f} s "
        f"({len(calls) / max(seconds, 1e-9):.2f} calls/s, "
        f"{tokens / max(len(calls), 1):.0f} completion tokens a call; "
        f"{failed} runs failed)"
    )


# --------------------------------------------------------------------------- calibrate


async def _calibrate_runs(server: OpenAIBackend, items: list[RunItem], config: RunConfig):
    async with server:
        await server.preflight(("subagent",))
        return await execute_many(items, server, config, description="calibrating")


def calibrate(settings: RealExecSettings, say: Callable[[str], None] = print) -> dict:
    """Each sub-agent type alone (a one-agent plan) once on `calibrate_tasks` tasks of
    every kind and level; says the success per cell and per type, writes OUT/calibrate.json
    and OUT/calibrate.jsonl, and returns the table (`calibration_table`)."""
    out = Path(settings.out)
    out.mkdir(parents=True, exist_ok=True)
    kinds = settings.kinds or tuple(TASK_KINDS)
    cells = tuple(c for c in EVERY_CELL if c[0] in kinds)
    tasks = make_tasks(cells, len(cells) * settings.calibrate_tasks, settings.seed, "cal")
    items, rows = [], []
    for t in tasks:
        for agent_type, structure in SINGLE.items():
            items.append(RunItem(single_plan(structure), t.task.question, t.task.id, len(items)))
            rows.append((t, agent_type))
    config = run_config(settings)
    clock = Clock()
    say(f"calibrating: {len(tasks)} tasks x {len(SINGLE)} sub-agent types = {len(items)} runs")
    with serve(settings) as llm:
        clock.lap("serve start")
        results = asyncio.run(_calibrate_runs(_server(llm), items, config))
        clock.lap("execute")
    records = [
        {
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
        for (t, agent_type), result in zip(rows, results, strict=True)
    ]
    write_jsonl(records, out / "calibrate.jsonl")
    table = calibration_table(records)
    say(table["text"])
    say(throughput(records, clock.seconds["execute"]))
    say("seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in clock.seconds.items()))
    (out / "calibrate.json").write_text(json.dumps(table, indent=2))
    return table


def calibration_table(records: list[dict]) -> dict:
    """Success % per (kind, level) and sub-agent type, with row and column means, as
    text and as numbers; a cell in [20, 80] on its mean is marked `*`."""
    types = list(SINGLE)
    by: dict[tuple, list[bool]] = defaultdict(list)
    tokens: dict[str, list[int]] = defaultdict(list)
    for r in records:
        by[(r["kind"], r["level"], r["agent_type"])].append(r["correct"])
        by[(r["kind"], r["level"], "all")].append(r["correct"])
        by[("all", 0, r["agent_type"])].append(r["correct"])
        tokens[r["agent_type"]].append(r["execution"]["total_tokens"])
    cells = sorted(
        {(r["kind"], r["level"]) for r in records},
        key=lambda c: (list(TASK_KINDS).index(c[0]), c[1]),
    )

    def pct(xs: list[bool]) -> float:
        return 100 * statistics.fmean(xs) if xs else float("nan")

    head = f"{'kind':<10}{'level':>6}{'tasks':>6}" + "".join(f"{t[:-5]:>10}" for t in types)
    lines = [
        "success % by task kind and level (one run per task and sub-agent type)",
        head + f"{'mean':>8}",
    ]
    numbers = {}
    for kind, level in cells:
        row = [pct(by[(kind, level, t)]) for t in types]
        mean = pct(by[(kind, level, "all")])
        mark = " *" if 20 <= mean <= 80 else ""
        n = len(by[(kind, level, types[0])])
        lines.append(
            f"{kind:<10}{level:>6}{n:>6}"
            + "".join(f"{x:>10.0f}" for x in row)
            + f"{mean:>8.0f}{mark}"
        )
        numbers[f"{kind}{level}"] = {**dict(zip(types, row, strict=True)), "mean": mean, "tasks": n}
    overall = [pct(by[("all", 0, t)]) for t in types]
    lines.append(f"{'all':<10}{'':>6}{'':>6}" + "".join(f"{x:>10.0f}" for x in overall))
    lines.append(
        f"{'tokens':<10}{'':>6}{'':>6}"
        + "".join(f"{statistics.fmean(tokens[t]):>10.0f}" for t in types)
        + "   (mean execution tokens a run)"
    )
    lines.append("*: mean success between 20% and 80%")
    return {
        "text": "\n".join(lines),
        "cells": numbers,
        "types": dict(zip(types, overall, strict=True)),
    }


# --------------------------------------------------------------------------- benchmark

Job = tuple[str, TemplateOrchestrator, list[GeneratedTask]]
"""(part: train or test, the orchestrator writing the plans, the tasks)."""


async def execute(
    server, jobs: list[Job], samples: int, config: RunConfig, clock: Clock, say
) -> dict[str, list[dict]]:
    """Every job's `samples` plans a task executed through `run_tasks` on `server` (a
    `ChatBackend` that `async with` opens and that answers `preflight`); the records by
    part, each with its task's kind and level and its plan's structure."""
    out: dict[str, list[dict]] = defaultdict(list)
    async with server:
        await server.preflight(("subagent",))
        clock.lap("serve start")
        for part, writer, tasks in jobs:
            started = time.perf_counter()
            records = await run_tasks(
                [t.task for t in tasks],
                RoutingBackend(server, writer, {t.task.id: t for t in tasks}),
                samples=samples,
                orchestrator=writer.name,
                config=config,
            )
            kinds = {t.task.id: (t.kind, t.level) for t in tasks}
            for r in records:
                r["kind"], r["level"] = kinds[r["task_id"]]
                r["structure"] = structure_of(r)
            out[part] += records
            seconds = time.perf_counter() - started
            say(f"executed {part} ({writer.name}): {throughput(records, seconds)}")
            clock.lap(f"execute {part}")
    return out


def structure_table(records: list[dict]) -> tuple[str, dict]:
    """Success % of each structure and orchestrator on the training tasks."""
    by: dict[str, list[bool]] = defaultdict(list)
    for r in records:
        by[r["structure"]].append(bool(r["correct"]))
        by[f"orchestrator {r['orchestrator']}"].append(bool(r["correct"]))
    lines = [f"{'plan':<26}{'plans':>7}{'success %':>11}"]
    numbers = {}
    for name in [*STRUCTURES, *sorted(k for k in by if k.startswith("orchestrator"))]:
        if by.get(name):
            numbers[name] = 100 * statistics.fmean(by[name])
            lines.append(f"{name:<26}{len(by[name]):>7}{numbers[name]:>11.1f}")
    return "\n".join(lines), numbers


def verdict(at: dict) -> str:
    """Whether Orch-RM beats majority at the full N, by how much, and at what token cost."""
    rm, maj = at["orchrm"], at["majority"]
    lo, hi = rm.vs_baseline_ci
    diff = points(rm.vs_baseline, rm.vs_baseline_ci)
    if lo > 0:
        word = "beats majority vote"
    elif hi < 0:
        word = "falls short of majority vote"
    else:
        word = "is not distinguishable from majority vote"
    tokens = maj.total_tokens / max(rm.total_tokens, 1.0)
    return (
        f"Orch-RM {word}: {100 * rm.accuracy:.1f}% vs {100 * maj.accuracy:.1f}%, "
        f"{diff} points (paired 95% CI), at {rm.total_tokens:,.0f} vs {maj.total_tokens:,.0f} "
        f"total tokens a task ({tokens:.1f}x fewer)"
    )


def run(settings: RealExecSettings, say: Callable[[str], None] = print) -> dict:
    """Execute, train, evaluate; says the tables, writes OUT (module docstring) and
    returns the verdict and the seconds of each stage."""
    from orchrm.experiments.world_models import PairDataset, WorldRMConfig, world_reward_models
    from orchrm.scoring.local import OrchRM
    from orchrm.training.config import SMALL_DATA_LR, TrainConfig

    sizes, out = settings.sizes, Path(settings.out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    say(
        f"real-exec: {sizes.train_tasks} train tasks x 2 orchestrators x {sizes.samples} plans, "
        f"{sizes.test_tasks} held-out tasks x {sizes.samples} specialized plans, every plan "
        f"executed by SmolLM2-135M-Instruct (llama.cpp, {settings.slots} slots); plans from "
        "templates (no LLM writes them); mix " + ", ".join(f"{k}{level}" for k, level in MIX)
    )
    tasks = {
        "train": make_tasks(MIX, sizes.train_tasks, settings.seed, "train"),
        "test": make_tasks(MIX, sizes.test_tasks, settings.seed + 1, "test"),
    }
    base = TemplateOrchestrator("base", specialized=False, seed=settings.seed)
    special = TemplateOrchestrator("specialized", specialized=True, seed=settings.seed)
    jobs = [
        ("train", special, tasks["train"]),
        ("train", base, tasks["train"]),
        ("test", special, tasks["test"]),
    ]
    clock = Clock()
    logs = {part: out / "logs" / f"{part}.jsonl" for part in ("train", "test")}
    if settings.from_logs:
        records = {part: [r for _, r in read_jsonl(path)] for part, path in logs.items()}
        say(f"records read back from {logs['train']} and {logs['test']} (--from-logs)")
    else:
        for part, generated in tasks.items():
            save_tasks(generated, out / "logs" / f"{part}.tasks.jsonl")
        with serve(settings) as llm:
            config = run_config(settings)
            records = asyncio.run(execute(_server(llm), jobs, sizes.samples, config, clock, say))
        for part, path in logs.items():
            write_jsonl(records[part], path)
    text, by_structure = structure_table(records["train"])
    say("training tasks, success by plan structure and orchestrator:\n" + text)

    trained = world_reward_models(
        WorldRMConfig(
            out=str(out),
            logs=[str(logs["train"])],
            datasets=(
                PairDataset("real", DOMAIN, steps=sizes.steps, eval_every=max(1, sizes.steps // 3)),
            ),
            seed=settings.seed,
            # `steps` decide the length (epochs only bound it): a few hundred pairs are
            # read several times over, and the best of three validations is kept.
            train=TrainConfig(
                max_length=128, lr=SMALL_DATA_LR, dtype="fp32", seed=settings.seed, epochs=1000.0
            ),
        ),
        stage_done=clock.lap,
    )
    t = trained.datasets["real"]
    mined = ", ".join(f"{n} {k}" for k, n in sorted(t.mined.kept.items()))
    splits = ", ".join(f"{n} {k}" for k, n in sorted(t.mined.by_split.items()))
    say(f"pairs: {mined} ({splits})")
    summary = t.summary
    say(
        f"reward model: validation pairwise accuracy {summary.best_validation_accuracy:.3f} "
        f"({summary.dtype}, {summary.steps} steps, {summary.pairs_per_second:.1f} pairs/s)"
    )
    model = OrchRM.load(t.model, dtype="fp32")

    held_out = tasks_from_logs([str(logs["test"])], "specialized", sizes.samples)
    lineup = build_lineup(held_out, rm=model, seed=settings.seed)
    ev = evaluate_tasks(lineup.tasks, lineup.selectors, sizes.samples, domain=DOMAIN)
    at = ev.at(ev.n)
    ev.notes = {
        "orchrm - majority, task by task": points(
            at["orchrm"].vs_baseline, at["orchrm"].vs_baseline_ci
        ),
        "plans": "template orchestrators (no LLM writes plans; 0 orchestrator tokens)",
        "execution": "SmolLM2-135M-Instruct on llama.cpp; tokens from the server's usage",
    }
    clock.lap("evaluate")
    say(terminal_table(ev, width=120))
    verdict_text = verdict(at)
    say(verdict_text)
    shown = first_candidates(lineup.tasks, sizes.samples)
    oracle = statistics.fmean(any(c.correct for c in t.candidates) for t in shown)
    mean_right = statistics.fmean(c.correct for t in shown for c in t.candidates)
    say(
        f"held-out: {len(shown)} tasks, {100 * mean_right:.1f}% of plans right, "
        f"{100 * oracle:.1f}% with a right plan among {sizes.samples}"
    )
    exec_s = sum(v for k, v in clock.seconds.items() if k.startswith(("execute", "serve")))
    total = clock.total()
    clock.seconds["total"] = round(total, 1)
    say(
        "seconds: "
        + ", ".join(f"{k} {v:.0f}" for k, v in clock.seconds.items())
        + f" (serving and executing {100 * exec_s / total:.0f}%)"
    )
    every = records["train"] + records["test"]
    report = write_report(
        [ev],
        out,
        {
            "benchmark": "real_exec",
            "sizes": sizes.__dict__,
            "mix": [f"{k}{level}" for k, level in MIX],
            "seconds": clock.seconds,
            "throughput": throughput(every, exec_s),
            "train_success_by_structure": by_structure,
            "pairs": t.mined.kept,
            "validation_accuracy": summary.best_validation_accuracy,
            "verdict": verdict_text,
            "design": __doc__.split("OUT gets")[0],
        },
    )
    say(f"report: {report}; records: {logs['train']}, {logs['test']}")
    return {"verdict": verdict_text, "seconds": clock.seconds}

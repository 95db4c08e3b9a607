"""Orch-RM against majority vote with every plan executed by a real LLM.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/real_exec.py --calibrate   # success table
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/real_exec.py --quick       # a few minutes
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/real_exec.py               # the full run

`orchrm demo`'s pipeline (logs -> store -> pairs -> reward model -> best-of-N), with the
simulated world replaced by real executions: SmolLM2-135M-Instruct served by llama.cpp on
loopback (`orchrm.runtime.local_llm.LocalLLM`, `--slots` 4, `--threads` every core)
answers every sub-agent call, through orchrm's own run path (`orchrm.tasks.run.run_tasks`:
parse, validate, execute, grade, one `orchrm.run/1` record per plan). Token counts are the
server's `usage`.

What is real and what is not:
- Tasks: exact-answer questions generated from the seed (`TASK_KINDS`: sums, differences,
  products, "has x, gets y more" word problems, two-step sums, comparisons, letter
  counts), each kind at graded levels, graded by orchrm's math grader
  (`orchrm.tasks.grading.grade` with domain `math`). `--calibrate` measures the model's
  success per kind and level and per sub-agent type; `MIX` is the kinds and levels whose
  success it measured between 20% and 80%.
- Plans: SmolLM2-135M cannot write a usable plan, so no LLM writes them. Two template
  orchestrators (`TemplateOrchestrator`) draw a structure (`STRUCTURES`: one CoT, SC,
  Debate or Reflexion agent; CoT then a Reflexion check; setup then solve; two solvers
  reconciled; SC then a CoT check) and its wording, and write it as harmony XML with a
  thinking channel, which `run_tasks` parses with `orchrm.parse.parse_harmony` like any
  orchestrator's text. `base` draws every structure alike; `specialized` is told the
  task's kind and prefers the structures `PREFERRED` names for it (`follow` of the time).
  Each plan's log-probability is the log-probability of the template's draws plus a
  charge per written token, as the world's orchestrators report theirs (the `logp`
  selector reads it). No LLM wrote them, so the plans cost 0 orchestrator tokens.
- Execution: real. `RunConfig` with small budgets (`--max-tokens` 96 per call, SC 3
  samples, debate 1 round of 2 roles, reflexion 1 round), temperature 0.5.
- Reward model: the store, pair mining (specialized-over-base and correct-over-incorrect,
  1:3) and training of `orchrm.experiments.world_models.world_reward_models`, which
  `orchrm demo` runs on world logs and which reads any `orchrm.run/1` logs: MiniLM
  default backbone, fp32, `--steps` steps of 16 pairs, Platt-calibrated on its
  validation tasks.
- Evaluation: best-of-N on held-out tasks (other seed) over the specialized
  orchestrator's N executed plans, with the demo's line-up and metrics
  (`orchrm.evaluation.lineup.build_lineup`, `evaluate_tasks`): Orch-RM's argmax against
  majority vote, random, logp and the oracle (any correct), paired 95% bootstrap
  intervals against majority, and tokens (execution from the server's usage, the reward
  model's input tokens as its verification). One execution per plan: accuracies are
  sampled, with no expected accuracy (the world's re-executions have no equivalent here).

OUT (`--out`, default runs/real-exec) gets logs/train.jsonl and logs/test.jsonl (the
records), the store, pairs and model, report.md, report.json and the plots; with
`--calibrate`, calibrate.json and calibrate.jsonl.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import signal
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from orchrm.evaluation.lineup import build_lineup, evaluate_tasks, first_candidates
from orchrm.evaluation.metrics import tasks_from_logs
from orchrm.evaluation.report import points, terminal_table, write_report
from orchrm.jsonl import read_jsonl, write_jsonl
from orchrm.orchestration import Agent, DoM, Edge, Orchestration, approx_token_count, to_harmony
from orchrm.runtime.backend import DEFAULT_SAMPLING, CallInfo, Completion, Sampling
from orchrm.runtime.config import RunConfig
from orchrm.runtime.executor import RunItem, execute_many
from orchrm.runtime.local_llm import LocalLLM, LocalLLMConfig
from orchrm.runtime.openai_backend import OpenAIBackend, OpenAIConfig
from orchrm.tasks.grading import grade
from orchrm.tasks.run import run_tasks
from orchrm.tasks.task import Task

DOMAIN = "math"
"""Every task's domain: `orchrm.tasks.grading.grade` grades it with `math_correct`."""

# --------------------------------------------------------------------------- tasks

NAMES = ("Tom", "Ana", "Sam", "Lea", "Ben", "Mia", "Raj", "Zoe")
THINGS = ("apples", "pens", "books", "coins", "cards", "shells", "stamps", "marbles")
SHORT_WORDS = ("cat", "sun", "tree", "book", "lamp", "fish", "door", "milk")
LONG_WORDS = ("garden", "window", "planet", "bottle", "pencil", "kitchen", "rabbit", "orange")


def _add(rng: random.Random, level: int) -> tuple[str, int]:
    (lo, hi), (lo2, hi2) = (((2, 9), (2, 9)), ((10, 49), (10, 49)), ((100, 499), (10, 99)))[
        level - 1
    ]
    a, b = rng.randint(lo, hi), rng.randint(lo2, hi2)
    return f"What is {a} + {b}?", a + b


def _sub(rng: random.Random, level: int) -> tuple[str, int]:
    a = rng.randint(*((5, 9), (20, 99), (100, 999))[level - 1])
    b = rng.randint(1 if level == 1 else 10, a - 1)
    return f"What is {a} - {b}?", a - b


def _mul(rng: random.Random, level: int) -> tuple[str, int]:
    (lo, hi), (lo2, hi2) = (((2, 5), (2, 5)), ((3, 9), (3, 9)), ((11, 19), (3, 9)))[level - 1]
    a, b = rng.randint(lo, hi), rng.randint(lo2, hi2)
    return f"What is {a} * {b}?", a * b


def _word(rng: random.Random, level: int) -> tuple[str, int]:
    name, thing = rng.choice(NAMES), rng.choice(THINGS)
    x, y = (
        (rng.randint(2, 9), rng.randint(2, 9))
        if level == 1
        else (
            rng.randint(10, 40),
            rng.randint(2, 20),
        )
    )
    if level < 3:
        question = f"{name} has {x} {thing} and gets {y} more. How many {thing} does {name} have?"
        return question, x + y
    z = rng.randint(1, x + y - 1)
    question = (
        f"{name} has {x} {thing}, gets {y} more, then gives away {z}. "
        f"How many {thing} does {name} have now?"
    )
    return question, x + y - z


def _two_step(rng: random.Random, level: int) -> tuple[str, int]:
    if level == 1:
        a, b, c = (rng.randint(1, 9) for _ in range(3))
        return f"What is {a} + {b} + {c}?", a + b + c
    a, b, c = rng.randint(2, 9), rng.randint(2, 9), rng.randint(1, 20)
    if level == 2:
        return f"What is {a} * {b} + {c}?", a * b + c
    return f"What is ({a} + {c}) * {b}?", (a + c) * b


def _compare(rng: random.Random, level: int) -> tuple[str, int]:
    if level == 1:
        a, b = rng.sample(range(10, 99), 2)
        return f"Which number is larger, {a} or {b}?", max(a, b)
    numbers = rng.sample(range(10, 99), 3)
    if level == 2:
        return f"Which number is the largest: {', '.join(map(str, numbers))}?", max(numbers)
    return f"Which number is the smallest: {', '.join(map(str, numbers))}?", min(numbers)


def _count(rng: random.Random, level: int) -> tuple[str, int]:
    word = rng.choice(SHORT_WORDS if level == 1 else LONG_WORDS)
    if level < 3:
        return f"How many letters are in the word '{word}'?", len(word)
    letter = rng.choice(sorted(set(word)))
    return f"How many times does the letter '{letter}' appear in '{word}'?", word.count(letter)


TASK_KINDS: dict[str, Callable[[random.Random, int], tuple[str, int]]] = {
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "word": _word,
    "two_step": _two_step,
    "compare": _compare,
    "count": _count,
}
"""Task kind -> (rng, level 1-3) -> (question, exact answer)."""
LEVELS = (1, 2, 3)

MIX: tuple[tuple[str, int], ...] = (
    ("add", 1),
    ("mul", 1),
    ("mul", 2),
    ("compare", 1),
    ("compare", 2),
    ("compare", 3),
)
"""(kind, level) cells the train and test tasks cycle through: those whose success
`--calibrate` measured between 20% and 80% (seed 0, 4 tasks a cell; see the module
docstring's command)."""


@dataclass(frozen=True)
class RealTask:
    """A generated task and its kind and level (which the specialized orchestrator reads)."""

    task: Task
    kind: str
    level: int


def make_tasks(
    cells: tuple[tuple[str, int], ...], n: int, seed: int, prefix: str
) -> list[RealTask]:
    """`n` tasks cycling through `cells` in a seeded order, ids `PREFIX-<i>-<kind><level>`;
    a question drawn twice is drawn again."""
    rng = random.Random(f"real-exec:{prefix}:{seed}")
    seen: set[str] = set()
    out = []
    for i in range(n):
        kind, level = cells[i % len(cells)]
        for _ in range(100):
            question, answer = TASK_KINDS[kind](rng, level)
            if question not in seen:
                break
        seen.add(question)
        task = Task(f"{prefix}-{i:03d}-{kind}{level}", question, str(answer), DOMAIN)
        out.append(RealTask(task, kind, level))
    return out


# --------------------------------------------------------------------------- plans

ROLES = (("Solver", "Checker"), ("Proposer", "Skeptic"), ("Mathematician", "Reviewer"))
DESCRIPTIONS = {
    "CoTAgent": ("Reason step by step to the answer.", "Solve it with one careful pass."),
    "SCAgent": ("Sample several solutions and vote.", "Self-consistency over three tries."),
    "DebateAgent": ("Two experts argue, then decide.", "A short debate between two roles."),
    "ReflexionAgent": ("Answer, critique, refine.", "Check the answer and fix it if wrong."),
}
CHECK_INPUTS = ("Check ${Solve} and give the final answer.", "Verify ${Solve}; fix it if wrong.")
SETUP_INPUTS = (
    "List the numbers in the task and the operation it asks for.",
    "Restate the task as one calculation.",
)


@dataclass
class Draws:
    """Seeded choices whose log-probabilities add up (a template's `logprob`)."""

    rng: random.Random
    logprob: float = 0.0

    def pick(self, options, weights=None):
        weights = list(weights) if weights is not None else [1.0] * len(options)
        index = self.rng.choices(range(len(options)), weights)[0]
        self.logprob += math.log(weights[index] / sum(weights))
        return options[index]


def _one(kind: str) -> Callable[[Draws], tuple[list[Agent], list[Edge]]]:
    def build(d: Draws) -> tuple[list[Agent], list[Edge]]:
        roles = d.pick(ROLES) if kind == "DebateAgent" else None
        agent_id = d.pick(("Solver", "Main", "Answer"))
        return [Agent(agent_id, kind, d.pick(DESCRIPTIONS[kind]), "", roles)], []

    return build


def _cot_reflexion(d: Draws):
    solve = Agent("Solve", "CoTAgent", d.pick(DESCRIPTIONS["CoTAgent"]))
    check = Agent(
        "Check", "ReflexionAgent", d.pick(DESCRIPTIONS["ReflexionAgent"]), d.pick(CHECK_INPUTS)
    )
    return [solve, check], [Edge("Solve", "Check")]


def _setup_solve(d: Draws):
    setup = Agent("Setup", "CoTAgent", "Set the task up.", d.pick(SETUP_INPUTS))
    solve = Agent(
        "Solve", "CoTAgent", d.pick(DESCRIPTIONS["CoTAgent"]), "Using ${Setup}, solve the task."
    )
    return [setup, solve], [Edge("Setup", "Solve")]


def _fan_in(d: Draws):
    a = Agent("Path_A", "CoTAgent", d.pick(DESCRIPTIONS["CoTAgent"]))
    b = Agent("Path_B", "SCAgent", d.pick(DESCRIPTIONS["SCAgent"]))
    settle = Agent(
        "Reconcile",
        "CoTAgent",
        "Compare both answers and settle.",
        "Compare ${Path_A} with ${Path_B} and give the final answer.",
    )
    return [a, b, settle], [Edge("Path_A", "Reconcile"), Edge("Path_B", "Reconcile")]


def _sc_check(d: Draws):
    solve = Agent("Solve", "SCAgent", d.pick(DESCRIPTIONS["SCAgent"]))
    check = Agent("Check", "CoTAgent", "Check the voted answer.", d.pick(CHECK_INPUTS))
    return [solve, check], [Edge("Solve", "Check")]


STRUCTURES: dict[str, Callable[[Draws], tuple[list[Agent], list[Edge]]]] = {
    "cot": _one("CoTAgent"),
    "sc": _one("SCAgent"),
    "debate": _one("DebateAgent"),
    "reflexion": _one("ReflexionAgent"),
    "cot_reflexion": _cot_reflexion,
    "setup_solve": _setup_solve,
    "fan_in": _fan_in,
    "sc_check": _sc_check,
}
"""Plan structure -> its template (agents and edges, wording drawn)."""
SINGLE = {
    "CoTAgent": "cot",
    "SCAgent": "sc",
    "DebateAgent": "debate",
    "ReflexionAgent": "reflexion",
}
"""The one-agent structure of each sub-agent type (what `--calibrate` runs)."""

THINKING = {
    "cot": "One careful chain of thought is enough for this.",
    "sc": "Small slips are likely here; three independent tries that vote catch them.",
    "debate": "Two views that argue should expose a wrong step.",
    "reflexion": "Answer first, then let a critic check it and refine.",
    "cot_reflexion": "Solve it, then have a critic check the result and fix it if wrong.",
    "setup_solve": "Set the calculation up first, then solve it.",
    "fan_in": "Two independent solvers, then reconcile their answers.",
    "sc_check": "Vote over several tries, then check the voted answer.",
}
WHY = {
    "add": "It is an addition of {size} numbers.",
    "sub": "It is a subtraction of {size} numbers.",
    "mul": "It is a multiplication of {size} numbers.",
    "word": "It is a short word problem.",
    "two_step": "It takes more than one operation.",
    "compare": "It asks which number is larger or smaller.",
    "count": "It asks to count letters.",
}
SIZES = {1: "small", 2: "two-digit", 3: "three-digit"}

PREFERRED: dict[str, tuple[str, ...]] = {
    "add": ("cot", "cot_reflexion", "sc"),
    "sub": ("cot", "sc", "sc_check"),
    "mul": ("cot", "debate", "sc"),
    "word": ("sc", "debate", "sc_check"),
    "two_step": ("sc", "sc_check", "fan_in"),
    "compare": ("sc", "sc_check", "cot"),
    "count": ("sc", "debate", "cot"),
}
"""The structures the specialized orchestrator prefers for each kind of task, first the
one-agent types that `--calibrate` measured best on that kind (seed 0: CoT on additions
and products, SC on comparisons), then structures built on them."""
TOKEN_LOGPROB = -0.02
"""Log-probability charged per written token, on top of the template's draws."""


@dataclass(frozen=True)
class TemplateOrchestrator:
    """Writes a plan from `STRUCTURES` as harmony XML. `specialized`: with probability
    `follow`, one of `PREFERRED[kind]` (in falling preference), else any structure alike;
    otherwise every structure alike."""

    name: str
    specialized: bool
    seed: int = 0
    follow: float = 0.7

    def write(self, task: RealTask, sample: int) -> tuple[str, float]:
        """(harmony text, its log-probability) of one plan for `task`."""
        d = Draws(random.Random(f"{self.name}|{self.seed}|{task.task.id}|{sample}"))
        names = list(STRUCTURES)
        if self.specialized:
            preferred = PREFERRED[task.kind]
            weights = [
                self.follow * (3, 2, 1)[preferred.index(s)] / 6 if s in preferred else 0.0
                for s in names
            ]
            weights = [w + (1 - self.follow) / len(names) for w in weights]
        else:
            weights = [1.0] * len(names)
        structure = d.pick(names, weights)
        agents, edges = STRUCTURES[structure](d)
        why = WHY[task.kind].format(size=SIZES[task.level]) if self.specialized else ""
        thinking = " ".join(x for x in (why, THINKING[structure]) if x)
        text = to_harmony(Orchestration(tuple(agents), tuple(edges), DoM.HIGH, thinking))
        return text, d.logprob + TOKEN_LOGPROB * approx_token_count(text)


def structure_of(record: dict) -> str:
    """The template structure a record's plan was drawn from (by its agents and inputs)."""
    o = record.get("orchestration") or {}
    types = tuple(a["type"] for a in o.get("agents", []))
    ids = tuple(a["id"] for a in o.get("agents", []))
    if len(types) == 1:
        return SINGLE.get(types[0], "?")
    known = {
        ("CoTAgent", "ReflexionAgent"): "cot_reflexion",
        ("SCAgent", "CoTAgent"): "sc_check",
        ("CoTAgent", "SCAgent", "CoTAgent"): "fan_in",
    }
    if ids and ids[0] == "Setup":
        return "setup_solve"
    return known.get(types, "?")


class RoutingBackend:
    """A `ChatBackend`: orchestrator calls get the template orchestrator's plan (0 tokens:
    no LLM wrote it); every other call goes to the real server."""

    def __init__(self, server: OpenAIBackend, writer: TemplateOrchestrator, tasks: list):
        self.server = server
        self.writer = writer
        self.tasks = {t.task.id: t for t in tasks}

    async def complete(
        self, messages: list[dict], call: CallInfo, sampling: Sampling = DEFAULT_SAMPLING
    ) -> Completion:
        if call.role == "orchestrator":
            text, logprob = self.writer.write(self.tasks[call.task_id], call.sample)
            return Completion(text, 0, 0, logprob, self.writer.name, "stop")
        return await self.server.complete(messages, call, sampling)


# --------------------------------------------------------------------------- running


def run_config(args: argparse.Namespace) -> RunConfig:
    """Small budgets for a 135M model on two CPU cores."""
    return RunConfig(
        max_tokens=args.max_tokens,
        sc_samples=3,
        debate_rounds=1,
        reflexion_rounds=1,
        concurrency=args.concurrency,
        call_timeout_s=180.0,
    )


@dataclass
class Clock:
    """Seconds per stage, in order."""

    seconds: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    mark: float = field(default_factory=time.perf_counter)

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.seconds[stage] = round(self.seconds.get(stage, 0.0) + now - self.mark, 1)
        self.mark = now

    def total(self) -> float:
        return time.perf_counter() - self.started


def serve(args: argparse.Namespace) -> LocalLLM:
    return LocalLLM(LocalLLMConfig(slots=args.slots, ctx_size=2048, threads=args.threads))


def calls_of(records: list[dict]) -> list[dict]:
    return [c for r in records for c in ((r.get("execution") or {}).get("calls") or [])]


def throughput(records: list[dict], seconds: float) -> str:
    calls = calls_of(records)
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


def calibrate(args: argparse.Namespace) -> None:
    """Each sub-agent type alone (a one-agent plan) once on `--calibrate-tasks` tasks of
    every kind and level; prints success per cell and per type."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cells = tuple((k, level) for k in TASK_KINDS for level in LEVELS)
    kinds = [k.strip() for k in args.kinds.split(",")] if args.kinds else list(TASK_KINDS)
    cells = tuple(c for c in cells if c[0] in kinds)
    tasks = make_tasks(cells, len(cells) * args.calibrate_tasks, args.seed, "cal")
    items, rows = [], []
    for t in tasks:
        for agent_type, structure in SINGLE.items():
            agents, edges = STRUCTURES[structure](Draws(random.Random(0)))
            plan = Orchestration(tuple(agents), tuple(edges), DoM.HIGH, THINKING[structure])
            items.append(RunItem(plan, t.task.question, t.task.id, len(items)))
            rows.append((t, agent_type))
    config = run_config(args)
    clock = Clock()
    print(f"calibrating: {len(tasks)} tasks x {len(SINGLE)} sub-agent types = {len(items)} runs")
    with serve(args) as llm:
        clock.lap("serve start")
        server = OpenAIBackend(OpenAIConfig(base_url=llm.base_url, model=llm.model))
        results = asyncio.run(_calibrate_runs(server, items, config))
        clock.lap("execute")
    records = []
    for (t, agent_type), result in zip(rows, results, strict=True):
        records.append(
            {
                "task_id": t.task.id,
                "kind": t.kind,
                "level": t.level,
                "question": t.task.question,
                "ground_truth": t.task.answer,
                "agent_type": agent_type,
                "answer": result.answer,
                "correct": bool(grade(result.answer, t.task.answer, DOMAIN)),
                "error": result.error,
                "execution": result.to_dict(),
            }
        )
    write_jsonl(records, out / "calibrate.jsonl")
    table = calibration_table(records)
    print(table["text"])
    print(throughput(records, clock.seconds["execute"]))
    print("seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in clock.seconds.items()))
    (out / "calibrate.json").write_text(json.dumps({k: v for k, v in table.items()}, indent=2))


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
    pct = lambda xs: 100 * statistics.fmean(xs) if xs else float("nan")  # noqa: E731
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


@dataclass(frozen=True)
class Sizes:
    train_tasks: int
    test_tasks: int
    samples: int
    steps: int


QUICK = Sizes(train_tasks=12, test_tasks=12, samples=4, steps=30)
FULL = Sizes(train_tasks=48, test_tasks=72, samples=8, steps=150)


async def _execute(
    server: OpenAIBackend,
    jobs: list[tuple[str, TemplateOrchestrator, list[RealTask]]],
    samples: int,
    config: RunConfig,
    clock: Clock,
    say,
) -> dict[str, list[dict]]:
    """Every (part, orchestrator, tasks) job through `run_tasks`; records by part."""
    out: dict[str, list[dict]] = defaultdict(list)
    async with server:
        await server.preflight(("subagent",))
        clock.lap("serve start")
        for part, writer, tasks in jobs:
            await _job(server, part, writer, tasks, samples, config, out, say)
            clock.lap(f"execute {part}")
    return out


async def _job(
    server: OpenAIBackend,
    part: str,
    writer: TemplateOrchestrator,
    tasks: list[RealTask],
    samples: int,
    config: RunConfig,
    out: dict[str, list[dict]],
    say,
) -> None:
    """One orchestrator's plans for `tasks`, executed through `run_tasks`, into out[part],
    each record with the task's kind and level and the plan's structure."""
    started = time.perf_counter()
    records = await run_tasks(
        [t.task for t in tasks],
        RoutingBackend(server, writer, tasks),
        samples=samples,
        orchestrator=writer.name,
        config=config,
    )
    kinds = {t.task.id: (t.kind, t.level) for t in tasks}
    for r in records:
        r["kind"], r["level"] = kinds[r["task_id"]]
        r["structure"] = structure_of(r)
    out[part] += records
    say(f"executed {part} ({writer.name}): {throughput(records, time.perf_counter() - started)}")


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


def benchmark(args: argparse.Namespace) -> dict:
    """Execute, train, evaluate; prints the tables and writes OUT."""
    from orchrm.experiments.world_models import PairDataset, WorldRMConfig, world_reward_models
    from orchrm.scoring.local import OrchRM
    from orchrm.training.config import SMALL_DATA_LR, TrainConfig

    sizes = QUICK if args.quick else FULL
    sizes = Sizes(
        args.train_tasks or sizes.train_tasks,
        args.test_tasks or sizes.test_tasks,
        args.samples or sizes.samples,
        args.steps or sizes.steps,
    )
    out = Path(args.out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    say = print
    say(
        f"real-exec: {sizes.train_tasks} train tasks x 2 orchestrators x {sizes.samples} plans, "
        f"{sizes.test_tasks} held-out tasks x {sizes.samples} specialized plans, every plan "
        f"executed by SmolLM2-135M-Instruct (llama.cpp, {args.slots} slots); plans from "
        "templates (no LLM writes them); mix " + ", ".join(f"{k}{level}" for k, level in MIX)
    )
    train_tasks = make_tasks(MIX, sizes.train_tasks, args.seed, "train")
    test_tasks = make_tasks(MIX, sizes.test_tasks, args.seed + 1, "test")
    base = TemplateOrchestrator("base", specialized=False, seed=args.seed)
    special = TemplateOrchestrator("specialized", specialized=True, seed=args.seed)
    jobs = [
        ("train", special, train_tasks),
        ("train", base, train_tasks),
        ("test", special, test_tasks),
    ]
    config = run_config(args)
    clock = Clock()
    logs = {part: out / "logs" / f"{part}.jsonl" for part in ("train", "test")}
    if args.from_logs:
        records = {part: [r for _, r in read_jsonl(path)] for part, path in logs.items()}
        say(f"records read back from {logs['train']} and {logs['test']} (--from-logs)")
    else:
        with serve(args) as llm:
            server = OpenAIBackend(OpenAIConfig(base_url=llm.base_url, model=llm.model))
            records = asyncio.run(_execute(server, jobs, sizes.samples, config, clock, say))
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
            seed=args.seed,
            # `steps` decide the length (epochs only bound it): a few hundred pairs are
            # read several times over, and the best of three validations is kept.
            train=TrainConfig(
                max_length=128, lr=SMALL_DATA_LR, dtype="fp32", seed=args.seed, epochs=1000.0
            ),
        ),
        stage_done=lambda stage: clock.lap(stage),
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
    lineup = build_lineup(held_out, rm=model, seed=args.seed)
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
            "design": __doc__.split("OUT (")[0],
        },
    )
    say(f"report: {report}; records: {logs['train']}, {logs['test']}")
    return {"verdict": verdict_text, "seconds": clock.seconds}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/real-exec")
    parser.add_argument("--calibrate", action="store_true", help="Only the success table.")
    parser.add_argument("--calibrate-tasks", type=int, default=4, help="Tasks a cell.")
    parser.add_argument("--kinds", default="", help="Calibrate these kinds only (a,b).")
    parser.add_argument("--quick", action="store_true", help="A few-minute run.")
    parser.add_argument(
        "--from-logs",
        action="store_true",
        help="Skip execution: train and evaluate on the records OUT/logs already holds.",
    )
    parser.add_argument("--train-tasks", type=int, default=0, help="0: the size's own.")
    parser.add_argument("--test-tasks", type=int, default=0, help="0: the size's own.")
    parser.add_argument("--samples", type=int, default=0, help="Plans a task (N); 0: own.")
    parser.add_argument("--steps", type=int, default=0, help="Training steps; 0: own.")
    parser.add_argument("--max-tokens", type=int, default=96, help="Per sub-agent call.")
    parser.add_argument("--slots", type=int, default=4, help="llama.cpp parallel slots.")
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="llama.cpp threads (0: every core). On a CPU shared with other work, 1 keeps "
        "going where threads that wait for each other at every step would stall.",
    )
    parser.add_argument("--concurrency", type=int, default=8, help="Plans executed at once.")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    # SIGTERM leaves through the `with` blocks, so the llama.cpp child is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.calibrate:
        calibrate(args)
    else:
        benchmark(args)


if __name__ == "__main__":
    main()

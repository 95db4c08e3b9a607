"""Seeded executions of written plans, cached in a JSONL file, so a run that is repeated,
resumed after an interruption, or evaluated with more selectors never executes the same
plan of the same task with the same seed twice.

An `Execution` is one plan (its text as written) of one task and sample, to execute with
one execution seed (`orchrm.runtime.executor`: every call's seed derives from it). The
`ExecutionCache` keeps every finished run in its file, one line a run appended as the
run ends (`orchrm.jsonl.append_jsonl`) and read back when the cache opens:

    {"schema": "orchrm.exec-cache/2", "task_id", "question", "sample", "seed",
     "plan_sha256", "execution": <the RunResult, as `execution` of an orchrm.run/1 record>}

A run is known by everything of its own that decides its answers: (task id, question
text, sha256 of the plan text, seed, sample). The question is what the sub-agents read;
the task id and the sample are there because each call's seed derives from them, so two
samples of a task that wrote the same plan are executed independently, as they would be
unseeded. A run asked for another question under the same task id (tasks drawn with
another seed) is therefore executed, never answered by a run of the question that id
had before. A run that ended with an error (a call that failed for good, a timeout) is
not kept: the next run executes it again. A torn last line (a crash mid-append) is
skipped, and so is an entry of another schema (`stale`).

The key leaves out what every run of a cache shares: the model, the sub-agents' budgets
and sampling, the corpus. `bind_setup` ties a cache to them (CACHE.setup.json beside
it) and refuses a run under another setup.

A `Plan` is what a template orchestrator (`orchrm.world.templates`) wrote for one task's
sample; `Plan.at(seed)` is its `Execution` with that seed, and `record` and `outcome`
read what the cache holds of it as an `orchrm.run/1` record and as (answer, correct).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path

from orchrm.errors import ConfigError
from orchrm.jsonl import BLANK, BadLine, append_jsonl, read_values
from orchrm.orchestration import Orchestration, validate
from orchrm.parse import ParseError, parse_harmony
from orchrm.runtime.backend import ChatBackend, Completion
from orchrm.runtime.config import RunConfig
from orchrm.runtime.executor import RunItem, execute_many
from orchrm.runtime.retrieval import Retriever
from orchrm.runtime.trace import CallRecord, RunResult
from orchrm.tasks.benchmarks.generated import GeneratedTask
from orchrm.tasks.grading import grade
from orchrm.tasks.run import make_record
from orchrm.tasks.task import Task
from orchrm.world.templates import TemplateOrchestrator, structure_of

CACHE_SCHEMA = "orchrm.exec-cache/2"
Outcome = tuple[str | None, bool]
"""(answer, correct) of one run of a plan; (None, False) for a plan that never runs."""
Key = tuple[str, str, str, int, int]
"""(task id, question text, sha256 of the plan text, execution seed, sample index)."""


def parsed_plan(raw: str) -> Orchestration | ParseError:
    """The plan `raw` parses to, or its parse error."""
    try:
        return parse_harmony(raw)
    except ParseError as err:
        return err


@dataclass(frozen=True)
class Execution:
    """One written plan of one task's sample, to execute with execution seed `seed`."""

    task: Task
    sample: int
    raw: str
    seed: int
    parsed: Orchestration | ParseError = field(compare=False, hash=False)
    """What `raw` parses to (`parsed_plan`)."""

    @property
    def key(self) -> Key:
        sha = hashlib.sha256(self.raw.encode()).hexdigest()
        return (self.task.id, self.task.question, sha, self.seed, self.sample)

    @property
    def runnable(self) -> bool:
        """The plan parses and breaks no graph rule: it is executed (else never)."""
        return isinstance(self.parsed, Orchestration) and not validate(self.parsed)


def run_from_dict(d: dict) -> RunResult:
    """The `RunResult` of its `to_dict()` form."""
    names = {f.name for f in fields(CallRecord)}
    return RunResult(
        answer=d.get("answer"),
        error=d.get("error"),
        calls=[CallRecord(**{k: v for k, v in c.items() if k in names}) for c in d["calls"]],
        outputs=dict(d.get("outputs") or {}),
        wall_s=float(d.get("wall_s") or 0.0),
    )


class ExecutionCache:
    """The finished runs of `path` (read back when it opens), and the runs that failed
    in this process (kept in memory only). `hits` counts the runs asked for that were
    already there; `runs` the runs executed since it opened."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.done: dict[Key, dict] = {}
        self.failed: dict[Key, RunResult] = {}
        self.torn = 0
        """Lines of the file that could not be read (a crash mid-append)."""
        self.stale = 0
        """Entries of another schema (one whose key says less), never served."""
        self.hits = 0
        self.runs = 0
        if self.path.exists():
            for _, line in read_values(self.path):
                if line is BLANK:
                    continue
                if isinstance(line, dict) and line.get("schema") != CACHE_SCHEMA:
                    self.stale += 1
                    continue
                if isinstance(line, BadLine) or not _is_entry(line):
                    self.torn += 1
                    continue
                key = (
                    line["task_id"],
                    line["question"],
                    line["plan_sha256"],
                    line["seed"],
                    line["sample"],
                )
                self.done[key] = line["execution"]

    def result(self, e: Execution) -> RunResult | None:
        """The run of `e`: cached, or failed in this process; None when it never ran."""
        if e.key in self.done:
            return run_from_dict(self.done[e.key])
        return self.failed.get(e.key)

    def missing(self, executions: Iterable[Execution]) -> list[Execution]:
        """The runnable executions without a cached run, each key once; counts the rest
        that are cached as `hits`."""
        out: dict[Key, Execution] = {}
        for e in executions:
            if not e.runnable:
                continue
            if e.key in self.done:
                self.hits += 1
            else:
                out.setdefault(e.key, e)
        return list(out.values())

    def keep(self, e: Execution, result: RunResult) -> None:
        """Record the run of `e`: appended to the file when it ended without error."""
        self.runs += 1
        if result.error is not None:
            self.failed[e.key] = result
            return
        task_id, question, sha, seed, sample = e.key
        entry = {
            "task_id": task_id,
            "question": question,
            "sample": sample,
            "seed": seed,
            "plan_sha256": sha,
        }
        execution = result.to_dict()
        append_jsonl([{"schema": CACHE_SCHEMA, **entry, "execution": execution}], self.path)
        self.done[e.key] = execution
        self.failed.pop(e.key, None)

    async def execute(
        self,
        backend: ChatBackend,
        executions: list[Execution],
        config: RunConfig,
        *,
        retriever: Retriever | None = None,
        progress: bool = True,
        description: str = "executing",
    ) -> list[RunResult]:
        """Execute `executions` (runnable, as `missing` returns them) on `backend`, each
        with its seed, at most `config.concurrency` at once, keeping each run as it
        ends; returns their results in order."""
        items = [
            RunItem(e.parsed, e.task.question, e.task.id, e.sample, e.seed) for e in executions
        ]
        return await execute_many(
            items,
            backend,
            config,
            retriever=retriever,
            progress=progress,
            description=description,
            done=lambda n, result: self.keep(executions[n], result),
        )


def bind_setup(cache_path: str | Path, setup: dict) -> Path:
    """Tie the cache at `cache_path` to `setup`: what decides a run's answers besides the
    task, the plan text, the seed and the sample (the model, the sub-agents' budgets, the
    corpus), which the cache's key leaves out. Written as CACHE.setup.json beside it on
    first use; a different setup raises ConfigError naming what differs, so no run made
    under one setup answers for another. Returns the setup file's path."""
    cache_path = Path(cache_path)
    path = cache_path.with_name(cache_path.stem + ".setup.json")
    wanted = json.loads(json.dumps(setup, sort_keys=True))
    if path.exists():
        try:
            held = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            held = err
        if not isinstance(held, dict):
            raise ConfigError(f"{path}: not a setup file ({held!r}); remove it with {cache_path}")
        differs = sorted(k for k in {*held, *wanted} if held.get(k) != wanted.get(k))
        if differs:
            shown = ", ".join(f"{k} {held.get(k)!r} there, {wanted.get(k)!r} here" for k in differs)
            raise ConfigError(
                f"{cache_path} holds runs made with another setup ({shown}): give another "
                "--out, or remove it and its .setup.json to run everything again"
            )
        return path
    cache_path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(wanted, indent=2, sort_keys=True) + "\n")
    return path


def _is_entry(line: object) -> bool:
    return (
        isinstance(line, dict)
        and line.get("schema") == CACHE_SCHEMA
        and isinstance(line.get("task_id"), str)
        and isinstance(line.get("question"), str)
        and isinstance(line.get("plan_sha256"), str)
        and isinstance(line.get("seed"), int)
        and isinstance(line.get("sample"), int)
        and isinstance(line.get("execution"), dict)
        and isinstance(line["execution"].get("calls"), list)
    )


# --------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class Plan:
    """One plan a template orchestrator wrote for one task's sample."""

    writer: str
    task: GeneratedTask
    sample: int
    raw: str
    logprob: float
    parsed: Orchestration | ParseError

    def at(self, seed: int) -> Execution:
        """Its execution with execution seed `seed`."""
        return Execution(self.task.task, self.sample, self.raw, seed, self.parsed)


def write_plans(
    writer: TemplateOrchestrator, tasks: list[GeneratedTask], samples: int
) -> list[Plan]:
    """`samples` plans a task written by `writer`, in task and sample order."""
    out = []
    for t in tasks:
        for s in range(samples):
            raw, logprob = writer.write(t, s)
            out.append(Plan(writer.name, t, s, raw, logprob, parsed_plan(raw)))
    return out


def record(plan: Plan, seed: int, cache: ExecutionCache) -> dict:
    """The `orchrm.run/1` record of `plan` executed with `seed`, as `run_tasks` writes
    it (0 orchestrator tokens: no LLM wrote it), with `execution_seed` (null for a plan
    that never ran), the task's kind and level and the plan's structure."""
    result = cache.result(plan.at(seed))
    completion = Completion(plan.raw, 0, 0, plan.logprob, plan.writer, "stop")
    extra = {
        "execution_seed": seed if result else None,
        "kind": plan.task.kind,
        "level": plan.task.level,
    }
    written = (plan.task.task, plan.writer, plan.sample, plan.raw, completion, plan.parsed)
    r = make_record(*written, result, "high", extra)
    r["structure"] = structure_of(r)
    return r


def outcome(plan: Plan, seed: int, cache: ExecutionCache) -> Outcome:
    """(answer, correct) of `plan` executed with `seed`; (None, False) when it never ran."""
    result = cache.result(plan.at(seed))
    task = plan.task.task
    answer = result.answer if result else None
    return answer, answer is not None and bool(grade(answer, task.answer, task.domain))


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

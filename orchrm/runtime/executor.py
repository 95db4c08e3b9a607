"""Execute a parsed orchestration: the graph executor and batched runs.

`execute` starts every agent as an asyncio task that waits only for its own inputs, so
independent branches run concurrently and wall time follows the critical path, not the
sum of the agents. It substitutes `${id}` with that agent's output, composes "original
task + current sub-task" (docs/formats.md#sub-agent-input), and turns any failure into a failed
`RunResult` with the error and the calls made so far: one bad run never takes down a
batch. The model's output is interpreted as a graph, never executed as code.

An execution seed makes a run repeatable: every call gets its own seed, derived from the
execution seed and the call's place (`orchrm.runtime.backend.call_seed`: task, sample,
agent, step, round), so the same seed sends every call the same seed again whatever the
timing, and a server that samples deterministically answers the same.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from orchrm.orchestration import Orchestration, replace_references, validate
from orchrm.progress import progress_bar
from orchrm.runtime import prompts
from orchrm.runtime.agents import SUB_AGENTS, AgentContext, AgentOutput
from orchrm.runtime.backend import ChatBackend, SeededBackend
from orchrm.runtime.calls import CallFailed
from orchrm.runtime.config import RunConfig
from orchrm.runtime.retrieval import Retriever
from orchrm.runtime.trace import CallRecord, RunResult


class _UpstreamFailed(Exception):
    """An agent could not start because one of its inputs failed (reported there)."""


async def execute(
    o: Orchestration,
    question: str,
    backend: ChatBackend,
    config: RunConfig | None = None,
    *,
    retriever: Retriever | None = None,
    task_id: str = "",
    sample: int = 0,
    seed: int | None = None,
) -> RunResult:
    """Run `o` on `question` and return its answer, every call made, and the wall time.
    With `seed`, every call is sent the seed `call_seed(seed, call)`.

    An invalid orchestration is not run: the result carries the broken rules as its
    error. A direct answer costs no call.
    """
    config = config or RunConfig()
    if seed is not None:
        backend = SeededBackend(backend, seed)
    start = time.perf_counter()
    violations = validate(o)
    if violations:
        error = "invalid orchestration: " + "; ".join(v.message for v in violations)
        return RunResult(answer=None, error=error)
    if not o.agents:
        return RunResult(answer=o.direct_answer, wall_s=time.perf_counter() - start)

    trace: list[CallRecord] = []
    inputs = {a.id: [e.source for e in o.edges if e.target == a.id] for a in o.agents}
    tasks: dict[str, asyncio.Task[AgentOutput]] = {}

    async def run_agent(agent) -> AgentOutput:
        for source in inputs[agent.id]:
            try:
                await asyncio.shield(tasks[source])
            except Exception as err:
                raise _UpstreamFailed(source) from err
        sub_task = _substitute(agent.input, {s: tasks[s].result().text for s in inputs[agent.id]})
        ctx = AgentContext(backend, config, agent, trace, retriever, task_id, sample)
        return await SUB_AGENTS[agent.type](ctx, prompts.compose_task(question, sub_task))

    for agent_id in o.topological_order() or []:
        tasks[agent_id] = asyncio.create_task(run_agent(o.agent(agent_id)))
    try:
        await asyncio.wait(tasks.values(), return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for t in tasks.values():
            t.cancel()  # a no-op on finished tasks; stops the rest after a failure
        await asyncio.gather(*tasks.values(), return_exceptions=True)

    outputs = {i: t.result().answer for i, t in tasks.items() if _succeeded(t)}
    result = RunResult(answer=None, calls=trace, outputs=outputs)
    failed = [(i, t.exception()) for i, t in tasks.items() if _failed(t)]
    root = [(i, e) for i, e in failed if not isinstance(e, _UpstreamFailed)]
    if root:
        agent_id, err = root[0]
        kind = "call failed" if isinstance(err, CallFailed) else type(err).__name__
        result.error = f"agent {agent_id!r} ({o.agent(agent_id).type}): {kind}: {err}"
    elif o.sink in outputs:
        result.answer = outputs[o.sink]
    else:
        result.error = "the sink agent did not finish"
    result.wall_s = time.perf_counter() - start
    return result


def _succeeded(task: asyncio.Task) -> bool:
    return task.done() and not task.cancelled() and task.exception() is None


def _failed(task: asyncio.Task) -> bool:
    return task.done() and not task.cancelled() and task.exception() is not None


def _substitute(template: str, outputs: dict[str, str]) -> str:
    """`${id}` -> the output of agent `id` (whitespace inside the braces allowed)."""
    return replace_references(template, outputs.get)


@dataclass(frozen=True)
class RunItem:
    """One (task, orchestration) to execute in a batch, with its execution seed (None:
    unseeded calls)."""

    orchestration: Orchestration
    question: str
    task_id: str = ""
    sample: int = 0
    seed: int | None = None


async def execute_many(
    items: Sequence[RunItem],
    backend: ChatBackend,
    config: RunConfig | None = None,
    *,
    retriever: Retriever | None = None,
    progress: bool = True,
    description: str = "executing",
    done: Callable[[int, RunResult], None] | None = None,
) -> list[RunResult]:
    """Execute many items with at most `config.concurrency` in flight, in input order.
    `done(index, result)` is called as each run ends, so a caller can keep every
    finished run of a batch that is interrupted.

    An unexpected exception in one run becomes that run's error; the batch goes on.
    """
    config = config or RunConfig()
    limit = asyncio.Semaphore(max(1, config.concurrency))
    results: list[RunResult | None] = [None] * len(items)
    with progress_bar(description, len(items), progress) as (bar, tracker):

        async def one(n: int, item: RunItem) -> None:
            async with limit:
                try:
                    results[n] = await execute(
                        item.orchestration,
                        item.question,
                        backend,
                        config,
                        retriever=retriever,
                        task_id=item.task_id,
                        sample=item.sample,
                        seed=item.seed,
                    )
                except Exception as err:  # a bug in one run must not end the batch
                    results[n] = RunResult(answer=None, error=f"{type(err).__name__}: {err}")
            if done is not None:
                done(n, results[n])
            bar.advance(tracker)

        await asyncio.gather(*(one(n, item) for n, item in enumerate(items)))
    return [r for r in results if r is not None]

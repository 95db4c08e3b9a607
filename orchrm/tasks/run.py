"""Sample orchestrations from an orchestrator, execute them, grade them, write the log.

`orchrm run` is this module: for each task, N orchestrations are sampled from the
orchestrator model, each is parsed, validated, executed (when valid) and graded, and one
log record per sample is written (schema `RUN_SCHEMA`, documented on `make_record`).
The simulated world writes records through the same `make_record`, so every later stage
reads one format.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from orchrm.orchestration import Orchestration, validate
from orchrm.parse import ParseError, parse_harmony
from orchrm.progress import progress_bar
from orchrm.runtime import prompts
from orchrm.runtime.backend import CallInfo, ChatBackend, Completion
from orchrm.runtime.calls import CallFailed, call
from orchrm.runtime.config import RunConfig
from orchrm.runtime.executor import RunItem, execute_many
from orchrm.runtime.retrieval import Retriever
from orchrm.runtime.trace import RunResult
from orchrm.tasks.grading import grade
from orchrm.tasks.task import Task

RUN_SCHEMA = "orchrm.run/1"


def make_record(
    task: Task,
    orchestrator: str,
    sample_index: int,
    raw: str,
    orchestrator_completion: Completion | None,
    parsed: Orchestration | ParseError,
    result: RunResult | None,
    dom: str = "",
    extra: dict | None = None,
) -> dict:
    """One log record (schema `RUN_SCHEMA`) for one orchestration sample.

    Fields: `schema`; the task (`task_id`, `question`, `ground_truth`, `domain`); who
    wrote it (`orchestrator`, `dom` asked for, `sample_index`); what was written (`raw`,
    `orchestrator_tokens` {prompt, completion}, `orchestrator_logprob`); what it is
    (`orchestration` in orchrm JSON or None, `parse_error` {reason, message, offset} or
    None, `violations`); what it did (`execution`: the run's calls, answer, error and
    tokens, None when not run); `answer`, `correct` (by the task domain's grader in
    `orchrm.tasks.grading.GRADERS`; None without ground truth) and
    `tokens` {orchestrator, execution, total}. `extra` adds fields (the world's ground
    truth, for instance).
    """
    is_parsed = isinstance(parsed, Orchestration)
    violations = validate(parsed) if is_parsed else []
    answer = result.answer if result else None
    orch_tokens = (
        {
            "prompt": orchestrator_completion.prompt_tokens,
            "completion": orchestrator_completion.completion_tokens,
        }
        if orchestrator_completion
        else {"prompt": 0, "completion": 0}
    )
    execution_tokens = result.total_tokens if result else 0
    record = {
        "schema": RUN_SCHEMA,
        "task_id": task.id,
        "question": task.question,
        "ground_truth": task.answer,
        "domain": task.domain,
        "orchestrator": orchestrator,
        "dom": dom,
        "sample_index": sample_index,
        "raw": raw,
        "orchestrator_tokens": orch_tokens,
        "orchestrator_logprob": orchestrator_completion.logprob
        if orchestrator_completion
        else None,
        "orchestration": parsed.to_dict() if is_parsed else None,
        "parse_error": None
        if is_parsed
        else {"reason": parsed.reason, "message": parsed.message, "offset": parsed.offset},
        "violations": [
            {"rule": v.rule.value, "agents": list(v.agents), "message": v.message}
            for v in violations
        ],
        "execution": result.to_dict() if result else None,
        "answer": answer,
        "correct": grade(answer, task.answer, task.domain) if task.answer is not None else None,
        "tokens": {
            "orchestrator": sum(orch_tokens.values()),
            "execution": execution_tokens,
            "total": sum(orch_tokens.values()) + execution_tokens,
        },
    }
    record.update(extra or {})
    return record


async def sample_orchestrations(
    backend: ChatBackend,
    task: Task,
    samples: int,
    dom: str,
    config: RunConfig,
    example: bool = False,
) -> list[Completion | CallFailed]:
    """`samples` orchestrator completions for `task` (concurrently, with logprobs; each
    its own request, so each is counted by the server); a sample whose call failed for
    good is returned as its `CallFailed`. `example`: show one worked plan first."""
    messages = prompts.orchestrator(task.question, dom, example)
    config = replace(config, max_tokens=config.orchestrator_max_tokens)

    async def one(i: int) -> Completion | CallFailed:
        info = CallInfo(
            role="orchestrator", step="orchestrate", task_id=task.id, sample=i, extra={"dom": dom}
        )
        try:
            return await call(backend, messages, info, config, logprobs=True)
        except CallFailed as err:
            return err

    return list(await asyncio.gather(*(one(i) for i in range(samples))))


async def run_tasks(
    tasks: list[Task],
    backend: ChatBackend,
    *,
    samples: int = 4,
    dom: str = "high",
    orchestrator: str = "orchestrator",
    config: RunConfig | None = None,
    retriever: Retriever | None = None,
    progress: bool = True,
    example: bool = False,
) -> list[dict]:
    """Sample, parse, execute and grade: one record per (task, sample), in task order.
    `example` shows the orchestrator one worked plan before each task.

    Unparseable or invalid orchestrations are recorded (with their reason) and not run;
    a sample whose orchestrator call failed is recorded with reason `orchestrator_failed`.
    """
    config = config or RunConfig()
    limit = asyncio.Semaphore(max(1, config.concurrency))

    with progress_bar("sampling orchestrations", len(tasks), progress) as (bar, tracker):

        async def sample(task: Task):
            async with limit:
                result = await sample_orchestrations(backend, task, samples, dom, config, example)
            bar.advance(tracker)
            return result

        sampled = await asyncio.gather(*(sample(t) for t in tasks))
    rows = []  # (task, index, raw, completion, parsed)
    for task, completions in zip(tasks, sampled, strict=True):
        for i, completion in enumerate(completions):
            if isinstance(completion, CallFailed):
                error = ParseError("orchestrator_failed", str(completion), None, "orchestrator")
                rows.append((task, i, "", None, error))
                continue
            try:
                parsed: Orchestration | ParseError = parse_harmony(completion.text)
            except ParseError as err:
                parsed = err
            rows.append((task, i, completion.text, completion, parsed))

    runnable = [
        n
        for n, row in enumerate(rows)
        if isinstance(row[4], Orchestration) and not validate(row[4])
    ]
    items = [RunItem(rows[n][4], rows[n][0].question, rows[n][0].id, rows[n][1]) for n in runnable]
    results = await execute_many(items, backend, config, retriever=retriever, progress=progress)
    by_row = dict(zip(runnable, results, strict=True))
    return [
        make_record(task, orchestrator, i, raw, completion, parsed, by_row.get(n), dom)
        for n, (task, i, raw, completion, parsed) in enumerate(rows)
    ]

"""LLM-as-a-judge selectors: one reads the N orchestrations (before anything runs), the
other reads the N executed trajectories.

Both call a judge model through the backend interface (role `judge`), so any real judge
model works; in the offline world the simulated backend plays the judge. Their
verification tokens are the judge call's prompt plus completion tokens, as the backend
counted them.
"""

from __future__ import annotations

import asyncio
import json
import re

from orchrm.errors import ConfigError
from orchrm.orchestration import to_harmony
from orchrm.runtime.backend import CallInfo, ChatBackend
from orchrm.runtime.calls import CallFailed, call
from orchrm.runtime.config import RunConfig
from orchrm.selection.selectors import CandidateSet, Selection, Selector

CHOICE_RE = re.compile(r"Choice:\s*(\d+)", re.IGNORECASE)

ORCHESTRATION_JUDGE = (
    "You judge multi-agent plans before they run. Read the task and the candidate plans, "
    "decide which plan is most likely to produce the correct answer, and end with one line "
    "'Choice: <candidate number>'."
)
TRAJECTORY_JUDGE = (
    "You judge finished multi-agent runs. Read the task and each candidate's trajectory and "
    "final answer, decide which final answer is correct, and end with one line "
    "'Choice: <candidate number>'."
)


def orchestration_prompt(task: CandidateSet) -> list[dict]:
    """The task and each candidate plan as harmony text."""
    blocks = []
    for i, c in enumerate(task.candidates):
        plan = _harmony(c.orchestration) if c.orchestration is not None else "(unparseable)"
        blocks.append(f"Candidate {i}:\n{plan}")
    body = f"Task:\n{task.question}\n\n" + "\n\n".join(blocks)
    return [{"role": "system", "content": ORCHESTRATION_JUDGE}, {"role": "user", "content": body}]


def trajectory_prompt(task: CandidateSet) -> list[dict]:
    """The task and each candidate's trajectory (its calls' outputs) and final answer."""
    blocks = [
        f"Candidate {i}:\n{c.trajectory or '(not executed)'}\nFinal answer: {c.answer}"
        for i, c in enumerate(task.candidates)
    ]
    body = f"Task:\n{task.question}\n\n" + "\n\n".join(blocks)
    return [{"role": "system", "content": TRAJECTORY_JUDGE}, {"role": "user", "content": body}]


def _harmony(o) -> str:
    try:
        return to_harmony(o)
    except ValueError:  # a field that harmony cannot carry: fall back to orchrm JSON
        return json.dumps(o.to_dict())


def llm_judge(backend: ChatBackend, level: str, config: RunConfig | None = None) -> Selector:
    """A judge selector at `orchestration` or `trajectory` level. An unreadable reply or a
    failed call falls back to candidate 0 (and still counts the tokens spent)."""
    if level not in ("orchestration", "trajectory"):
        raise ConfigError(f"level must be orchestration or trajectory, got {level!r}")
    prompt = orchestration_prompt if level == "orchestration" else trajectory_prompt
    config = config or RunConfig()

    def select(task: CandidateSet) -> Selection:
        messages = prompt(task)
        info = CallInfo(role="judge", step=f"judge-{level}", task_id=task.task_id)
        try:
            reply = asyncio.run(call(backend, messages, info, config))
        except CallFailed:
            return Selection(0, executed=_executed(level, task, 0))
        found = CHOICE_RE.findall(reply.text)
        index = int(found[-1]) if found and int(found[-1]) < len(task.candidates) else 0
        tokens = reply.prompt_tokens + reply.completion_tokens
        return Selection(
            index,
            verification_tokens=tokens + _extra(level, task, index),
            executed=_executed(level, task, index),
        )

    return select


def _executed(level: str, task: CandidateSet, index: int) -> tuple[int, ...]:
    return tuple(range(len(task.candidates))) if level == "trajectory" else (index,)


def _extra(level: str, task: CandidateSet, index: int) -> int:
    """A trajectory judge needs every candidate executed: N - 1 extra executions."""
    if level != "trajectory":
        return 0
    return sum(c.execution_tokens for i, c in enumerate(task.candidates) if i != index)

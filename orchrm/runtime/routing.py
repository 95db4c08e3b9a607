"""A backend that splits calls by role: a plan writer answers the orchestrator's calls, a
real server every other call. With it, `orchrm.tasks.run.run_tasks` executes plans that no
LLM wrote (a template orchestrator's) through a real model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from orchrm.runtime.backend import DEFAULT_SAMPLING, CallInfo, ChatBackend, Completion, Sampling


class PlanWriter(Protocol):
    """Writes one plan for a task: (harmony text, its log-probability)."""

    name: str

    def write(self, task: Any, sample: int) -> tuple[str, float]: ...


class RoutingBackend:
    """A `ChatBackend`: an orchestrator call gets `writer`'s plan for the task of its
    `task_id` in `tasks` and its `sample` (0 tokens: no LLM wrote it, model `writer.name`);
    every other call goes to `server`."""

    def __init__(self, server: ChatBackend, writer: PlanWriter, tasks: Mapping[str, Any]):
        self.server = server
        self.writer = writer
        self.tasks = tasks

    async def complete(
        self, messages: list[dict], call: CallInfo, sampling: Sampling = DEFAULT_SAMPLING
    ) -> Completion:
        if call.role == "orchestrator":
            text, logprob = self.writer.write(self.tasks[call.task_id], call.sample)
            return Completion(text, 0, 0, logprob, self.writer.name, "stop")
        return await self.server.complete(messages, call, sampling)

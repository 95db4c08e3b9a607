"""An in-process ChatBackend for tests: scripted replies, simulated latency, faults.

It stands in for an LLM (none runs here) behind the same interface the real backends
implement, and records every call so tests can check call patterns and concurrency.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from orchrm.runtime.backend import DEFAULT_SAMPLING, BackendError, CallInfo, Completion


def words(messages: list[dict]) -> int:
    return sum(len(m["content"].split()) for m in messages)


class ScriptedBackend:
    """`reply(messages, info) -> str` decides each completion (default: 'Answer: 42').

    `latency_s` is slept per call; `fail(info, attempt) -> BackendError | None` injects
    errors. Token counts are whitespace words of the prompt and the reply.
    """

    def __init__(
        self,
        reply: Callable[[list[dict], CallInfo], str] | None = None,
        latency_s: float = 0.0,
        fail: Callable[[CallInfo, int], BackendError | None] | None = None,
    ):
        self.reply = reply or (lambda messages, info: "Reasoning.\nAnswer: 42")
        self.latency_s = latency_s
        self.fail = fail
        self.calls: list[tuple[list[dict], CallInfo]] = []
        self.attempts: dict[tuple, int] = {}
        self.in_flight = 0
        self.max_in_flight = 0

    async def complete(self, messages, call, sampling=DEFAULT_SAMPLING):
        key = (call.agent_id, call.step, call.debate_role, call.round, call.task_id)
        self.attempts[key] = self.attempts.get(key, 0) + 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.latency_s)
            if self.fail and (err := self.fail(call, self.attempts[key])):
                raise err
            text = self.reply(messages, call)
        finally:
            self.in_flight -= 1
        self.calls.append((messages, call))
        return Completion(
            text, words(messages), len(text.split()), logprob=-1.0 if sampling.logprobs else None
        )

    def steps(self, agent_id: str | None = None) -> list[str]:
        return [c.step for _, c in self.calls if agent_id is None or c.agent_id == agent_id]

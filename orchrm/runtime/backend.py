"""The LLM backend interface every caller uses, and its OpenAI-compatible implementation.

A backend turns chat messages into a `Completion` with the token counts the server
reported. The executor, the sub-agents, the orchestrator sampler and the judges all call
`ChatBackend.complete`; they never know whether a vLLM server, a hosted API or the
simulated world answers. `CallInfo` says who is calling (role, agent, step): a real
backend uses it to pick the model for the role; a simulated one may use all of it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Protocol

from orchrm.errors import OrchrmError

ROLES = ("orchestrator", "subagent", "judge")
"""Who is calling: the orchestrator writing a plan, a sub-agent, or a judge."""


@dataclass(frozen=True)
class CallInfo:
    """Who makes a call and why. Backends may ignore everything but `role`.

    `step` names the call within its sub-agent: `answer` (CoT, SC samples, Reflexion's
    first answer), `debate`, `decide` (Debate's final decision), `critic`, `refine`,
    `search` (WebSearch deciding what to look up), `summary`, `orchestrate`, `judge`.
    `task_id` and `sample` say which task and which of its orchestration samples the call
    serves; `extra` carries anything else a caller wants a backend to know (the DoM
    asked of an orchestrator, for one).
    """

    role: str = "subagent"
    agent_id: str = ""
    agent_type: str = ""
    step: str = "answer"
    debate_role: str = ""
    round: int = 0
    task_id: str = ""
    sample: int = 0
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def place(self) -> tuple:
        """Where the call stands: its task and sample, then its agent, step, debate role
        and round. Two calls of one run never share it; what seeds a call's sampling
        (`call_seed`, the world's backend) derives from it."""
        return (self.task_id, self.sample, self.agent_id, self.step, self.debate_role, self.round)


@dataclass(frozen=True)
class Completion:
    """One completion and what it cost, as the backend counted it.

    `logprob` is the sum of the sampled tokens' log-probabilities when requested and
    available, else None. `finish_reason` is the server's (`stop`, `length`, ...; empty
    when it gave none).
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    logprob: float | None = None
    model: str = ""
    finish_reason: str = ""


@dataclass(frozen=True)
class Sampling:
    """How one call samples its completion. `RunConfig.sampling` makes the one every
    sub-agent call uses."""

    temperature: float = 0.5
    max_tokens: int | None = None
    """Completion-length cap; None leaves it to the server."""
    logprobs: bool = False
    """Ask for the summed log-probability of the sampled tokens (`Completion.logprob`)."""
    seed: int | None = None
    """The sampler's seed, sent as the request's `seed` (llama.cpp and vLLM sample the
    same tokens again for the same seed and prompt); None leaves it to the server.
    `SeededBackend` sets one per call."""


DEFAULT_SAMPLING = Sampling()
SEED_RANGE = 2**31
"""Call seeds lie in [0, SEED_RANGE): every server's seed type holds them, and none
reads one of them as "random" (llama.cpp's is 0xFFFFFFFF)."""


class BackendError(OrchrmError):
    """A backend call failed. `transient` errors (timeouts, 5xx, 429, lost connections)
    are worth retrying; others (bad request, auth, malformed reply) are not.

    `completion` is what the server returned when it answered but the answer is unusable
    (cut short by its context), so the tokens it spent are still counted."""

    def __init__(
        self,
        message: str,
        transient: bool,
        status: int | None = None,
        completion: Completion | None = None,
    ):
        super().__init__(message)
        self.transient = transient
        self.status = status
        self.completion = completion


class ChatBackend(Protocol):
    """Anything that completes chat messages: a real server or the simulated world.

    A backend that never waits (the world, computing its reply in this process) may set
    `in_process = True`: its calls are then not given a timeout, which only ever fires
    on a wait and costs each call a task of its own."""

    async def complete(
        self, messages: list[dict], call: CallInfo, sampling: Sampling = DEFAULT_SAMPLING
    ) -> Completion:
        """Complete `messages` (`{"role", "content"}` dicts) for `call` as `sampling`
        says; raise `BackendError` on failure."""
        ...


def call_seed(execution_seed: int, call: CallInfo) -> int:
    """The seed of one call of an execution: a hash of `execution_seed` and the call's
    place, its task and sample (`task_id`, `sample`: which plan of which task) and its
    place in the plan (`agent_id`, `step`, `debate_role`, `round`: which call of which
    agent). It depends on nothing else, neither timing nor the order calls are made, so
    the same execution seed gives every call of a plan the same seed again; the sub-agent
    types never make two calls at the same place of one agent."""
    place = "|".join(map(str, (execution_seed, *call.place)))
    return int.from_bytes(hashlib.sha256(place.encode()).digest()[:8], "big") % SEED_RANGE


class SeededBackend:
    """A `ChatBackend` that completes every call on `backend` with the call's own seed
    (`call_seed` of `execution_seed` and the call): one execution seed repeats a whole
    execution where the server samples deterministically."""

    def __init__(self, backend: ChatBackend, execution_seed: int):
        self.backend = backend
        self.execution_seed = execution_seed

    async def complete(
        self, messages: list[dict], call: CallInfo, sampling: Sampling = DEFAULT_SAMPLING
    ) -> Completion:
        seeded = replace(sampling, seed=call_seed(self.execution_seed, call))
        return await self.backend.complete(messages, call, seeded)

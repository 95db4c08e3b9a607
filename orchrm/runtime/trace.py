"""What a run leaves behind: one record per LLM call, and the run's result."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class CallRecord:
    """One backend call: who made it, what it sent and got, what it cost.

    Token counts are the backend's own (`usage`), never estimates. `attempts` counts
    tries including retries; `error` is set when every try failed. `finish_reason` is the
    server's (`stop`, `length`: cut at the completion cap).
    """

    agent_id: str
    agent_type: str
    step: str
    debate_role: str
    messages: list[dict]
    completion: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    attempts: int = 1
    error: str | None = None
    finish_reason: str = ""


@dataclass
class RunResult:
    """The outcome of executing one orchestration on one task.

    `answer` is the sink agent's final answer (or the direct answer); `error` says why
    the run failed, with `answer` None. `outputs` maps each finished agent to its answer.
    """

    answer: str | None
    error: str | None = None
    calls: list[CallRecord] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.calls)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict:
        """JSON-ready form, with token totals."""
        out = asdict(self)
        out.update(
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            total_tokens=self.total_tokens,
            n_calls=len(self.calls),
        )
        return out

"""`RunConfig`: everything that decides how an orchestration is executed."""

from __future__ import annotations

from orchrm.configs import config
from orchrm.runtime.backend import Sampling
from orchrm.runtime.retry import RetryPolicy


@config
class RunConfig:
    """How the executor and the sub-agents run. Defaults follow MAS-Orchestra where it
    states a value (docs/formats.md#sub-agent-types)."""

    temperature: float = Sampling.temperature
    """Sampling temperature of every sub-agent call."""
    max_tokens: int | None = None
    """Completion-length cap per sub-agent call; None leaves it to the server."""
    orchestrator_max_tokens: int | None = None
    """Completion-length cap of each plan the orchestrator writes; None leaves it to the
    server."""
    call_timeout_s: float = 300.0
    """Wall-clock limit of one backend call; a call past it counts as a transient error."""
    max_retries: int = 3
    """Retries of a call after a transient error (timeout, 5xx, 429, lost connection)."""
    backoff_s: float = 1.0
    """Wait before the first retry; doubled on each further retry."""
    backoff_max_s: float = 30.0
    """Longest wait between retries."""
    sc_samples: int = 5
    """SCAgent: chain-of-thought samples voted on."""
    debate_rounds: int = 5
    """DebateAgent: rounds in which every role answers (then one final-decision call)."""
    reflexion_rounds: int = 5
    """ReflexionAgent: most critic-and-refine rounds after the first answer."""
    search_iterations: int = 5
    """WebSearchAgent: most search turns before the summary."""
    search_k: int = 5
    """WebSearchAgent: results kept per search."""
    concurrency: int = 8
    """`execute_many`: runs in flight at once."""

    def sampling(self, logprobs: bool = False) -> Sampling:
        """How every sub-agent call samples (`logprobs`: also ask for log-probabilities)."""
        return Sampling(self.temperature, self.max_tokens, logprobs)

    @property
    def retry(self) -> RetryPolicy:
        """The timeout, retries and backoff of one backend call, as a `RetryPolicy`."""
        return RetryPolicy(
            timeout_s=self.call_timeout_s,
            retries=self.max_retries,
            backoff_s=self.backoff_s,
            max_backoff_s=self.backoff_max_s,
        )

"""`RetryPolicy`: how long one try may take, how often a failure worth trying again is
retried, and the exponential backoff between tries.

One policy serves every client that retries: the executor's backend calls
(`orchrm.runtime.calls`, from `RunConfig`) and the reward-server client
(`orchrm.scoring.remote_http`, from `RemoteConfig`, which is a `RetryPolicy`). Standard
library only, so a scoring client stays light.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchrm.errors import ConfigError


@dataclass(kw_only=True)
class RetryPolicy:
    """A timeout per try and exponential backoff between tries. Its fields are keyword-only,
    so a config that extends it keeps its own fields first."""

    timeout_s: float = 60.0
    """How long one try (a request, a call) may wait for its answer before it fails."""
    retries: int = 4
    """Tries after the first for a failure worth trying again (a reward server's: a
    connection lost or HTTP 429, 502, 503, 504)."""
    backoff_s: float = 0.5
    """The first wait between tries; it doubles at each try."""
    max_backoff_s: float = 10.0
    """The longest wait between tries (a server's Retry-After included)."""

    def check(self) -> None:
        """Raise ConfigError for a timeout, retry count or backoff that cannot work."""
        if self.retries < 0 or not self.timeout_s > 0 or self.backoff_s < 0:
            raise ConfigError("retries and backoff_s must be 0 or more, timeout_s more than 0")

    def wait(self, attempt: int, asked: float | None = None) -> float:
        """Seconds to wait after try `attempt` (0: the first) failed: `asked` (what the
        other side asked for, such as HTTP's Retry-After) when given, else `backoff_s`
        doubled per try; at most `max_backoff_s` and never below 0."""
        wait = asked if asked is not None else self.backoff_s * 2**attempt
        return max(0.0, min(wait, self.max_backoff_s))

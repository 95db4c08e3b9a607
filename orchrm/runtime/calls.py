"""One backend call under the run's policy: a timeout, retries with backoff, a trace.

Every sub-agent call goes through `call`, so timeouts, retries and token accounting
behave the same for every agent type and every backend.
"""

from __future__ import annotations

import asyncio
import time

from orchrm.runtime.backend import BackendError, CallInfo, ChatBackend, Completion
from orchrm.runtime.config import RunConfig
from orchrm.runtime.trace import CallRecord


class CallFailed(Exception):
    """A call failed for good: a permanent error, or a transient one past the retries."""


async def call(
    backend: ChatBackend,
    messages: list[dict],
    info: CallInfo,
    config: RunConfig,
    trace: list[CallRecord] | None = None,
    *,
    logprobs: bool = False,
) -> Completion:
    """Complete `messages` on `backend`, retrying transient errors with exponential
    backoff (`config.retry`), each try limited to `config.call_timeout_s`. Appends a
    `CallRecord` to `trace` (also for a call that failed, with the tokens of a reply the
    server sent but that could not be used) and raises `CallFailed` when it gives up."""
    start, policy, sampling = time.perf_counter(), config.retry, config.sampling(logprobs)
    attempt, last_error, spent = 0, "", None
    timeout = None if getattr(backend, "in_process", False) else policy.timeout_s
    while True:
        attempt += 1
        try:
            completion = await asyncio.wait_for(
                backend.complete(messages, info, sampling),
                timeout=timeout,
            )
        except TimeoutError:
            transient, last_error = True, f"timed out after {policy.timeout_s:g} s"
        except BackendError as err:
            transient, last_error, spent = err.transient, str(err), err.completion or spent
        else:
            _record(trace, info, messages, completion, start, attempt, None)
            return completion
        if not transient or attempt > policy.retries:
            # A reply the server sent but that cannot be used still cost its tokens.
            _record(trace, info, messages, spent, start, attempt, last_error)
            raise CallFailed(f"{info.step} call failed after {attempt} attempt(s): {last_error}")
        await asyncio.sleep(policy.wait(attempt - 1))


def _record(trace, info, messages, completion, start, attempts, error) -> None:
    if trace is None:
        return
    trace.append(
        CallRecord(
            agent_id=info.agent_id,
            agent_type=info.agent_type,
            step=info.step,
            debate_role=info.debate_role,
            messages=messages,
            completion=completion.text if completion else "",
            prompt_tokens=completion.prompt_tokens if completion else 0,
            completion_tokens=completion.completion_tokens if completion else 0,
            latency_s=time.perf_counter() - start,
            attempts=attempts,
            error=error,
            finish_reason=completion.finish_reason if completion else "",
        )
    )

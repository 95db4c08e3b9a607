"""orchrm.runtime.openai_backend against a loopback chat-completions server over real HTTP."""

from __future__ import annotations

import asyncio
import time

import pytest

from orchrm.orchestration import Agent, DoM, Orchestration
from orchrm.runtime.backend import BackendError, CallInfo, Completion, Sampling
from orchrm.runtime.calls import call
from orchrm.runtime.config import RunConfig
from orchrm.runtime.executor import execute
from orchrm.runtime.openai_backend import OpenAIBackend, OpenAIConfig
from tests.loopback_llm import LoopbackLLM, count_words

MESSAGES = [
    {"role": "system", "content": "You are a careful solver."},
    {"role": "user", "content": "What is six times seven?"},
]


def complete(base_url: str, call: CallInfo | None = None, *, config: dict | None = None, **kw):
    """One `OpenAIBackend.complete` call of MESSAGES against `base_url`, run to completion."""

    async def run() -> Completion:
        async with OpenAIBackend(OpenAIConfig(base_url=base_url, **(config or {}))) as backend:
            return await backend.complete(MESSAGES, call or CallInfo(), Sampling(**kw))

    return asyncio.run(run())


def failure(base_url: str, **config) -> BackendError:
    """The `BackendError` one call against `base_url` raises."""
    with pytest.raises(BackendError) as info:
        complete(base_url, config=config)
    return info.value


def test_complete_returns_text_and_the_servers_token_counts():
    with LoopbackLLM(reply=lambda request: "The answer is 42") as server:
        completion = complete(server.base_url)

    assert completion.text == "The answer is 42"
    prompt_words = sum(count_words(m["content"]) for m in MESSAGES)
    assert (completion.prompt_tokens, completion.completion_tokens) == (prompt_words, 4)
    assert completion.model == "default"
    assert completion.logprob is None
    (request,) = server.requests
    assert request["messages"] == MESSAGES
    assert request["temperature"] == 0.5
    assert "logprobs" not in request


def test_each_role_is_sent_to_its_own_model():
    models = {"orchestrator": "orch-m", "judge": "judge-m"}

    async def run(base_url: str) -> list[Completion]:
        config = OpenAIConfig(base_url=base_url, model="sub-m", models=models)
        async with OpenAIBackend(config) as backend:
            return [
                await backend.complete(MESSAGES, CallInfo(role=role))
                for role in ("orchestrator", "subagent", "judge")
            ]

    with LoopbackLLM() as server:
        completions = asyncio.run(run(server.base_url))

    assert [r["model"] for r in server.requests] == ["orch-m", "sub-m", "judge-m"]
    assert [c.model for c in completions] == ["orch-m", "sub-m", "judge-m"]


def test_sampling_options_and_extra_body_reach_the_server():
    with LoopbackLLM() as server:
        complete(
            server.base_url,
            temperature=0.0,
            max_tokens=16,
            config={"extra_body": {"top_k": 20}},
        )

    (request,) = server.requests
    assert (request["temperature"], request["max_tokens"], request["top_k"]) == (0.0, 16, 20)


def test_logprobs_are_requested_and_summed_over_tokens():
    with LoopbackLLM(reply=lambda request: "six times seven", token_logprob=-0.25) as server:
        completion = complete(server.base_url, logprobs=True)

    assert server.requests[0]["logprobs"] is True
    assert completion.logprob == pytest.approx(-0.75)


def test_the_run_config_sampling_reaches_the_server_on_every_call():
    """The executor's calls carry `RunConfig`'s temperature and length cap; a call that
    asks for log-probabilities (the orchestrator's samples) gets them too."""
    plan = Orchestration([Agent("a", "CoTAgent", input="Solve the task.")], [], DoM.HIGH)
    config = RunConfig(temperature=0.2, max_tokens=32)

    async def run(base_url: str):
        async with OpenAIBackend(OpenAIConfig(base_url=base_url)) as backend:
            result = await execute(plan, "What is six times seven?", backend, config)
            orchestrator = CallInfo(role="orchestrator")
            sampled = await call(backend, MESSAGES, orchestrator, config, logprobs=True)
            return result, sampled

    with LoopbackLLM(reply=lambda request: "Six sevens.\nAnswer: 42") as server:
        result, sampled = asyncio.run(run(server.base_url))

    assert result.answer == "42" and sampled.logprob is not None
    *executed, orchestrator = server.requests
    assert executed and all(
        (r["temperature"], r["max_tokens"], "logprobs" in r) == (0.2, 32, False) for r in executed
    )
    assert (orchestrator["temperature"], orchestrator["max_tokens"]) == (0.2, 32)
    assert orchestrator["logprobs"] is True


@pytest.mark.parametrize(
    ("status", "transient"),
    [(503, True), (500, True), (429, True), (400, False), (401, False), (404, False)],
)
def test_http_errors_say_whether_a_retry_can_help(status, transient):
    with LoopbackLLM(fail_first=1, fail_status=status) as server:
        error = failure(server.base_url, model="m-7b")

    assert (error.transient, error.status) == (transient, status)
    assert server.base_url in str(error)
    assert "m-7b" in str(error)
    assert f"HTTP {status}" in str(error)


def test_the_backend_never_retries_on_its_own():
    # The executor retries with backoff; a client retrying too would multiply the attempts.
    with LoopbackLLM(fail_first=2) as server:
        assert failure(server.base_url).transient
        assert len(server.requests) == 1
        assert failure(server.base_url).transient
        assert complete(server.base_url).text.startswith("echo:")
        assert len(server.requests) == 3


def test_a_slow_server_times_out_as_transient_within_the_timeout():
    with LoopbackLLM(delay_s=5.0) as server:
        start = time.monotonic()
        error = failure(server.base_url, timeout_s=0.5)
        elapsed = time.monotonic() - start

    assert error.transient
    assert error.status is None
    assert "0.5s" in str(error)
    assert elapsed < 2.5


@pytest.mark.parametrize(
    ("fault", "message"),
    [("malformed", "malformed"), ("omit_choices", "no choices"), ("omit_usage", "token usage")],
)
def test_a_malformed_reply_is_a_permanent_error(fault, message):
    with LoopbackLLM(**{fault: True}) as server:
        error = failure(server.base_url)

    assert not error.transient
    assert message in str(error)
    assert server.base_url in str(error)


def test_a_closed_port_is_a_transient_connection_error():
    with LoopbackLLM() as server:
        base_url = server.base_url
    # The server is shut down: its port now refuses connections.

    error = failure(base_url)

    assert error.transient
    assert error.status is None
    assert "cannot connect" in str(error)

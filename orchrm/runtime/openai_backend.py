"""`ChatBackend` over any OpenAI-compatible chat-completions server (vLLM, SGLang, a hosted API).

`OpenAIBackend` picks the model for each call's role, sends the messages with
`openai.AsyncOpenAI`, and returns a `Completion` with the token counts the server reported.
Every failure leaves as a `BackendError` that names the server and the model and says
whether retrying can help; the client itself never retries, because the executor does,
with backoff, and two layers of retries multiply.

What real servers do that the protocol's documentation does not say, and how it is met
here (tests/test_real_llm.py runs them against llama.cpp):
- A request longer than the context per request is refused with HTTP 400 (llama.cpp's
  `exceed_context_size_error`, vLLM's "maximum context length"): a permanent error that
  names both sizes.
- A prompt that fits but leaves too little room stops at the context's end with
  `finish_reason: length` before `max_tokens`: that reply is cut, so it is an error too
  (its tokens still counted), never an answer read from a truncated text.
- `logprobs` alone makes llama.cpp return 20 alternatives per token and `top_logprobs: 0`
  makes it return none, so one alternative is asked for.
- With `n > 1`, llama.cpp counts one choice in `usage`, so each sample is its own request.
- `seed` (`Sampling.seed`) makes llama.cpp sample the same tokens again only from the
  same logits to the last bit: a prompt prefix it reuses from its cache (`cache_prompt`,
  on by default) gives slightly different ones, so a seeded run repeats only with
  `extra_body={"cache_prompt": False}` (SmolLM2-135M, tests/test_real_exec.py).

    async with OpenAIBackend(OpenAIConfig(models={"judge": "Qwen/Qwen3-32B"})) as backend:
        completion = await backend.complete(messages, CallInfo(role="judge"))
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import openai
from openai.types.chat import ChatCompletion

from orchrm.runtime.backend import DEFAULT_SAMPLING, BackendError, CallInfo, Completion, Sampling

TRANSIENT_STATUSES = frozenset({408, 429})
"""HTTP statuses below 500 that are worth retrying: request timeout and rate limiting."""


@dataclass
class OpenAIConfig:
    """Where the chat-completions server is and which model answers each role."""

    base_url: str = field(
        default_factory=lambda: os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    )
    """Server URL up to and including `/v1`; defaults to `$OPENAI_BASE_URL`, else a local
    vLLM on port 8000."""

    api_key: str = field(default_factory=lambda: os.environ.get("OPENAI_API_KEY", "EMPTY"))
    """Bearer token; defaults to `$OPENAI_API_KEY`, else `EMPTY`, which vLLM accepts."""

    model: str = "default"
    """Model for every role not listed in `models` (vLLM: its `--served-model-name`)."""

    models: dict[str, str] = field(default_factory=dict)
    """Model per role (`orchestrator`, `subagent`, `judge`), overriding `model`."""

    timeout_s: float = 120.0
    """Seconds one request may take, connecting included, before it fails as transient."""

    extra_body: dict = field(default_factory=dict)
    """Extra JSON fields sent with every request, for server options such as vLLM's
    `{"top_k": 20}` or `{"chat_template_kwargs": {"enable_thinking": False}}`."""

    def model_for(self, role: str) -> str:
        """The model that answers calls made by `role`."""
        return self.models.get(role, self.model)


class OpenAIBackend:
    """A `ChatBackend` that sends each call to an OpenAI-compatible server.

    It holds one `openai.AsyncOpenAI` client (and its connection pool) for its lifetime;
    close it with `close()` or use it as an async context manager.
    """

    context_size: int | None = None
    """Context tokens per request that the server listed for the model (`preflight`
    reads llama.cpp's `meta.n_ctx` or vLLM's `max_model_len`); None when unknown."""

    def __init__(self, config: OpenAIConfig | None = None):
        self.config = config or OpenAIConfig()
        self.client = openai.AsyncOpenAI(
            base_url=self.config.base_url,
            api_key=self.config.api_key,
            timeout=self.config.timeout_s,
            max_retries=0,
        )

    async def complete(
        self, messages: list[dict], call: CallInfo, sampling: Sampling = DEFAULT_SAMPLING
    ) -> Completion:
        """Complete `messages` with the model for `call.role` (with `sampling.seed` as the
        request's `seed` when set) and return the text, the server's token counts, the
        model that answered, and, when `sampling.logprobs` is set and the server returns
        them, the summed log-probability of the sampled tokens.
        Raises `BackendError` on any failure, `transient` when retrying may succeed."""
        model = self.config.model_for(call.role)
        where = f"{self.config.base_url} (model {model!r})"
        options: dict = {"temperature": sampling.temperature}
        if sampling.max_tokens is not None:
            options["max_tokens"] = sampling.max_tokens
        if sampling.logprobs:
            options["logprobs"] = True
            options["top_logprobs"] = 1
        if sampling.seed is not None:
            options["seed"] = sampling.seed
        try:
            reply = await self.client.chat.completions.create(
                model=model,
                messages=messages,
                extra_body=self.config.extra_body or None,
                **options,
            )
        # The client parses a JSON content type without catching a broken body.
        except (openai.OpenAIError, json.JSONDecodeError) as e:
            raise backend_error(e, where, self.config.timeout_s) from e
        completion = parse_reply(reply, where, sampling.logprobs)
        check_not_cut(completion, sampling.max_tokens, where, self.context_size)
        return completion

    async def preflight(self, roles: tuple[str, ...] = ("orchestrator", "subagent")) -> list[str]:
        """The models the server lists (`GET /models`), after checking that it answers and
        serves the model of every role in `roles`; raises a non-transient `BackendError` that
        says which, before any task is spent on a server that is not there."""
        where = self.config.base_url
        try:
            cards = [m async for m in self.client.models.list()]
        except openai.APIConnectionError as e:
            raise BackendError(
                f"cannot reach the LLM server at {where}: {e.__cause__ or e}; start it, or "
                "point --base-url (or $OPENAI_BASE_URL) at one",
                transient=False,
            ) from e
        except openai.APIStatusError as e:
            if e.status_code in (401, 403):
                raise BackendError(
                    f"{where} refused the API key (HTTP {e.status_code}): set --api-key "
                    "or $OPENAI_API_KEY",
                    transient=False,
                    status=e.status_code,
                ) from e
            return []  # a server without the listing route can still complete
        except openai.OpenAIError:
            return []
        listed = [m.id for m in cards]
        wanted = {self.config.model_for(role) for role in roles}
        missing = sorted(m for m in wanted if listed and m not in listed)
        if missing:
            raise BackendError(
                f"{where} does not serve {', '.join(map(repr, missing))}; it serves "
                f"{', '.join(listed[:10])}{' ...' if len(listed) > 10 else ''} (--model)",
                transient=False,
            )
        sizes = [context_of(m) for m in cards if m.id in wanted]
        self.context_size = min((n for n in sizes if n), default=None)
        return listed

    async def close(self) -> None:
        """Close the client and its connections."""
        await self.client.close()

    async def __aenter__(self) -> OpenAIBackend:
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()


def context_of(card: object) -> int | None:
    """The context tokens per request a `/models` entry states: vLLM's `max_model_len`,
    llama.cpp's `meta.n_ctx` (each slot's share); None when it states none."""
    extra = getattr(card, "model_extra", None) or {}
    meta = extra.get("meta")
    n_ctx = meta.get("n_ctx") if isinstance(meta, dict) else None
    for value in (extra.get("max_model_len"), n_ctx):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


CONTEXT_ADVICE = (
    "shorten the input, lower --max-tokens, or serve the model with a longer context "
    "(vLLM: --max-model-len; llama.cpp: --ctx-size, which its --parallel slots share)"
)


def context_exceeded(status: int, body: object, text: str) -> str | None:
    """The message for a request the server refused as longer than its context (llama.cpp's
    `exceed_context_size_error` with `n_prompt_tokens` and `n_ctx`, vLLM's "maximum
    context length" 400), or None for any other refusal."""
    error = body.get("error", body) if isinstance(body, dict) else None
    kind = error.get("type") if isinstance(error, dict) else None
    if status == 400 and kind == "exceed_context_size_error":
        asked, limit = error.get("n_prompt_tokens"), error.get("n_ctx")
        return (
            f"the request ({asked} tokens) is longer than the server's context per request "
            f"({limit} tokens): {CONTEXT_ADVICE}"
        )
    if status == 400 and "maximum context length" in text:
        return f"the request is longer than the server's context: {text[:300]}: {CONTEXT_ADVICE}"
    return None


def check_not_cut(
    completion: Completion, max_tokens: int | None, where: str, context: int | None
) -> None:
    """Raise a permanent `BackendError` carrying `completion` when the server stopped it
    for want of context (`finish_reason` `length` short of `max_tokens`): a cut reply is
    not an answer. A reply that reached `max_tokens` was cut as asked and stands."""
    if completion.finish_reason != "length":
        return
    if max_tokens is not None and completion.completion_tokens >= max_tokens:
        return
    used = completion.prompt_tokens + completion.completion_tokens
    limit = (
        f"the server's context per request ({context} tokens)"
        if context
        else ("the server's context")
    )
    cap = f"before max_tokens {max_tokens}" if max_tokens is not None else "with no max_tokens set"
    raise BackendError(
        f"{where}: the reply was cut at {completion.completion_tokens} tokens {cap}: the "
        f"prompt ({completion.prompt_tokens} tokens) and the reply filled {limit} at {used} "
        f"tokens; {CONTEXT_ADVICE}",
        transient=False,
        completion=completion,
    )


def backend_error(e: Exception, where: str, timeout_s: float) -> BackendError:
    """The `BackendError` for what the OpenAI client raised: transient for a timeout, a
    lost connection, 5xx, 408 and 429; not for a refused request or a malformed reply."""
    if isinstance(e, openai.APITimeoutError):
        return BackendError(f"{where}: no reply within {timeout_s}s", transient=True)
    if isinstance(e, openai.APIConnectionError):
        return BackendError(f"{where}: cannot connect: {e.__cause__ or e}", transient=True)
    if isinstance(e, openai.APIStatusError):
        status = e.status_code
        detail = e.body.get("message") if isinstance(e.body, dict) else None
        too_long = context_exceeded(status, e.body, e.response.text)
        if too_long:
            return BackendError(f"{where}: HTTP {status}: {too_long}", False, status)
        return BackendError(
            f"{where}: HTTP {status}: {detail or e.response.text[:200]}",
            transient=status >= 500 or status in TRANSIENT_STATUSES,
            status=status,
        )
    if isinstance(e, json.JSONDecodeError):
        return BackendError(f"{where}: malformed reply, body is not JSON: {e}", transient=False)
    if isinstance(e, openai.APIResponseValidationError):
        return BackendError(f"{where}: malformed reply: {e}", transient=False)
    return BackendError(f"{where}: {type(e).__name__}: {e}", transient=False)


def parse_reply(reply: object, where: str, logprobs: bool) -> Completion:
    """Turn a chat-completions reply into a `Completion`, or raise a non-transient
    `BackendError` saying which part is missing. Without strict validation the client
    hands back whatever the server sent (a plain string for a non-JSON content type, a
    `ChatCompletion` with `None` fields for missing ones), so every part is checked here."""
    if not isinstance(reply, ChatCompletion):
        raise BackendError(
            f"{where}: malformed reply, not a chat completion: {reply!r:.200}",
            transient=False,
        )
    if not reply.choices:
        raise BackendError(f"{where}: malformed reply, no choices", transient=False)
    choice = reply.choices[0]
    text = choice.message.content if choice.message is not None else None
    if not isinstance(text, str):
        raise BackendError(
            f"{where}: malformed reply, choice 0 has no message content", transient=False
        )
    usage = reply.usage
    if usage is None or usage.prompt_tokens is None or usage.completion_tokens is None:
        raise BackendError(
            f"{where}: reply has no token usage; token counts come from the server, "
            "never from an estimate",
            transient=False,
        )
    logprob = None
    if logprobs and choice.logprobs is not None and choice.logprobs.content:
        logprob = sum(token.logprob for token in choice.logprobs.content)
    return Completion(
        text=text,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        logprob=logprob,
        model=reply.model or "",
        finish_reason=choice.finish_reason or "",
    )

"""A stand-in for an OpenAI-compatible LLM server, for tests that need real HTTP.

No LLM can run in the test environment, so `LoopbackLLM` serves the chat-completions
protocol on 127.0.0.1 with scripted replies and injectable faults (HTTP errors, delays,
malformed bodies, missing usage). It uses only the standard library:

    with LoopbackLLM(reply=lambda request: "42") as server:
        backend = OpenAIBackend(OpenAIConfig(base_url=server.base_url))
        ...
        assert server.requests[0]["model"] == "default"

Token counts are the stand-in's own: the number of whitespace-separated words of all
message contents (prompt) and of the reply (completion). A real server counts tokens with
its tokenizer; callers must only ever read them from `usage`, which is what tests check.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.loopback import LoopbackServer


def echo_reply(request: dict) -> str:
    """The default reply: a deterministic echo of the last user message."""
    users = [m.get("content") or "" for m in request.get("messages", []) if m.get("role") == "user"]
    return f"echo: {users[-1] if users else ''}"


def count_words(text: str) -> int:
    """The stand-in's token count: whitespace-separated words."""
    return len(text.split())


class LoopbackLLM(LoopbackServer):
    """A scriptable chat-completions server on a free loopback port.

    `reply(request_json) -> str` decides each answer's content. Faults: the first
    `fail_first` chat requests get HTTP `fail_status`; every chat request waits `delay_s`
    before answering; `malformed` answers HTTP 200 with a body that is not JSON;
    `omit_choices` and `omit_usage` drop those fields from an otherwise valid reply. When
    the request asks for `logprobs`, each completion word is a token with log-probability
    `token_logprob`. Every chat request body received, failed ones included, is appended to
    `requests`, in order of arrival. `GET /v1/models` lists `listed_models` (default: the
    one `served_model`).
    """

    def __init__(
        self,
        reply: Callable[[dict], str] = echo_reply,
        *,
        fail_first: int = 0,
        fail_status: int = 503,
        delay_s: float = 0.0,
        malformed: bool = False,
        omit_choices: bool = False,
        omit_usage: bool = False,
        token_logprob: float = -0.25,
        served_model: str = "default",
        listed_models: tuple[str, ...] = (),
    ):
        self.reply = reply
        self.fail_first = fail_first
        self.fail_status = fail_status
        self.delay_s = delay_s
        self.malformed = malformed
        self.omit_choices = omit_choices
        self.omit_usage = omit_usage
        self.token_logprob = token_logprob
        self.served_model = served_model
        self.listed_models = listed_models or (served_model,)
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        # Set on exit so handlers sleeping through `delay_s` wake up instead of lingering.
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, e.g. `http://127.0.0.1:PORT/v1`."""
        if self._server is None:
            raise RuntimeError("LoopbackLLM is not running; use it as a context manager")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def handler(self) -> type:
        return type("Handler", (_Handler,), {"llm": self})

    def _record(self, request: dict) -> int:
        """Append `request` to `requests` and return its 0-based arrival index."""
        with self._lock:
            self.requests.append(request)
            return len(self.requests) - 1

    def _answer(self, request: dict) -> tuple[int, bytes]:
        """The HTTP status and body for one chat-completions request."""
        index = self._record(request)
        if self.delay_s:
            self._stopping.wait(self.delay_s)
        if index < self.fail_first:
            error = {"message": "injected failure", "type": "server_error", "code": None}
            return self.fail_status, json.dumps({"error": error}).encode()
        if self.malformed:
            return 200, b"<html>this is not JSON"
        content = self.reply(request)
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop",
            "logprobs": None,
        }
        if request.get("logprobs"):
            tokens = content.split()
            choice["logprobs"] = {
                "content": [
                    {"token": t, "logprob": self.token_logprob, "bytes": None, "top_logprobs": []}
                    for t in tokens
                ]
            }
        prompt_tokens = sum(count_words(m.get("content") or "") for m in request["messages"])
        completion_tokens = count_words(content)
        body = {
            "id": f"chatcmpl-loopback-{index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", self.served_model),
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        if self.omit_choices:
            del body["choices"]
        if self.omit_usage:
            del body["usage"]
        return 200, json.dumps(body).encode()


class _Handler(BaseHTTPRequestHandler):
    """Routes `POST /v1/chat/completions` and `GET /v1/models` to its `LoopbackLLM`."""

    llm: LoopbackLLM

    def do_GET(self) -> None:
        if self.path.rstrip("/") != "/v1/models":
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        models = [
            {"id": name, "object": "model", "created": 0, "owned_by": "test"}
            for name in self.llm.listed_models
        ]
        self._send(200, {"object": "list", "data": models})

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        length = int(self.headers.get("Content-Length", 0))
        try:
            request = json.loads(self.rfile.read(length))
        except json.JSONDecodeError as e:
            self._send(400, {"error": {"message": f"request body is not JSON: {e}"}})
            return
        status, body = self.llm._answer(request)
        self._send(status, body)

    def _send(self, status: int, body: dict | bytes) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test); nobody is left to answer

    def log_message(self, format: str, *args) -> None:
        pass  # keep test output quiet

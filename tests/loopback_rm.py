"""Stand-ins for the reward servers orchrm scores through, for tests that need real HTTP.

No vLLM, SGLang or OpenRLHF can run in the test environment, so `LoopbackRM` speaks
their protocols on 127.0.0.1, as their public documentation describes them, and scores
with a real reward model (`OrchRM.score_texts`, one lock around it):

- `vllm`: `POST /classify` `{"model", "input", "use_activation"}` -> `{"data": [{"index",
  "label", "probs", "num_classes"}], "usage": {"prompt_tokens", ...}}`; the sigmoid is
  applied (in float32, as a GPU server computes it) unless `use_activation` is false, and
  always when `legacy` (a vLLM without the per-request field, which it ignores as vLLM
  before 0.11.1 does) unless `pooler_activation` is false (a server started with the
  activation off for every request); `GET /version` answers `{"version": version}` when
  one is given;
- `sglang`: SGLang's native `POST /classify` `{"text": [...]}` -> `[{"text", "embedding":
  [score], "meta_info": {"prompt_tokens", "id"}}, ...]`;
- `openrlhf`: `POST /get_reward` `{"query": [...]}` -> `{"rewards": [...]}`.

Faults: the first `fail_first` requests get `fail_status` (with `Retry-After:
retry_after` when set); every request waits `delay_s`; `labels` > 1 answers that many
classes; `extra_tokens` more tokens per text in vLLM's usage (a server that reads a
token more, such as a BOS). Request bodies are appended to `requests` in order of arrival.
"""

from __future__ import annotations

import json
import math
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler

from tests.loopback import LoopbackServer

ROUTES = {"vllm": "/classify", "sglang": "/classify", "openrlhf": "/get_reward"}


def float32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


def sigmoid32(x: float) -> float:
    """A float32 sigmoid, rounded as a server computing in float32 returns it."""
    x = float32(x)
    return float32(1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x)))


class LoopbackRM(LoopbackServer):
    """A reward server of kind `vllm`, `sglang` or `openrlhf` on a free loopback port."""

    def __init__(
        self,
        rm,
        kind: str,
        *,
        legacy: bool = False,
        fail_first: int = 0,
        fail_status: int = 503,
        retry_after: str | None = None,
        delay_s: float = 0.0,
        labels: int = 1,
        extra_tokens: int = 0,
        version: str | None = None,
        pooler_activation: bool = True,
    ):
        self.rm, self.kind, self.legacy, self.labels = rm, kind, legacy, labels
        self.version, self.pooler_activation = version, pooler_activation
        self.extra_tokens = extra_tokens
        self.fail_first, self.fail_status, self.retry_after = fail_first, fail_status, retry_after
        self.delay_s = delay_s
        self.requests: list[dict] = []
        self.connections: set[tuple] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{ROUTES[self.kind]}"

    def handler(self) -> type:
        return type("Handler", (_Handler,), {"server_rm": self})

    def answer(self, request: dict) -> tuple[int, dict, dict]:
        """(status, headers, body) for one request."""
        with self._lock:
            self.requests.append(request)
            index = len(self.requests) - 1
        if self.delay_s:
            self._stopping.wait(self.delay_s)
        if index < self.fail_first:
            headers = {"Retry-After": self.retry_after} if self.retry_after else {}
            return self.fail_status, headers, {"message": "injected failure"}
        texts = request.get({"vllm": "input", "sglang": "text"}.get(self.kind, "query"))
        with self._lock:
            scored = self.rm.score_texts(texts)
        scores, tokens = [r.score for r in scored], [r.tokens for r in scored]
        return 200, {}, getattr(self, f"_{self.kind}")(request, texts, scores, tokens)

    def _vllm(self, request, texts, scores, tokens) -> dict:
        asked = None if self.legacy else request.get("use_activation")
        raw = not (self.pooler_activation if asked is None else asked)
        data = [
            {
                "index": i,
                "label": "LABEL_0",
                "probs": [float32(s) if raw else sigmoid32(s)] * self.labels,
                "num_classes": self.labels,
            }
            for i, s in enumerate(scores)
        ]
        total = sum(tokens) + self.extra_tokens * len(tokens)
        usage = {"prompt_tokens": total, "total_tokens": total, "completion_tokens": 0}
        return {
            "id": "classify-1",
            "object": "list",
            "created": int(time.time()),
            "model": request.get("model", "rm"),
            "data": data,
            "usage": usage,
        }

    def _sglang(self, request, texts, scores, tokens) -> list:
        return [
            {"text": t, "embedding": [float32(s)], "meta_info": {"prompt_tokens": n, "id": str(i)}}
            for i, (t, s, n) in enumerate(zip(texts, scores, tokens, strict=True))
        ]

    def _openrlhf(self, request, texts, scores, tokens) -> dict:
        return {"rewards": [float32(s) for s in scores]}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers answer
    server_rm: LoopbackRM

    def do_GET(self) -> None:
        version = self.server_rm.version
        if self.path == "/version" and version is not None:
            self._send(200, {}, {"version": version})
        else:
            self._send(404, {}, {"detail": "Not Found"})

    def do_POST(self) -> None:
        self.server_rm.connections.add(self.client_address)
        if self.path != ROUTES[self.server_rm.kind]:
            self._send(404, {}, {"detail": "Not Found"})
            return
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._send(*self.server_rm.answer(json.loads(body)))

    def _send(self, status: int, headers: dict, body: object) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", **headers}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)

    def log_message(self, format: str, *args) -> None:
        pass

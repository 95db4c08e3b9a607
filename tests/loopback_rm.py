"""Stand-ins for the reward servers orchrm scores through, for tests that need real HTTP.

No vLLM, SGLang or OpenRLHF can run in the test environment, so `LoopbackRM` speaks
their protocols on 127.0.0.1 and scores with a real reward model (`OrchRM.score_texts`,
one lock around it). vLLM's side follows vLLM 0.34.0's source
(`vllm/entrypoints/pooling/{base,classify,pooling}/protocol.py`, `vllm/pooling_params.py`,
`vllm/model_executor/layers/pooler/seqwise/heads.py`); the others, their documentation.

- `vllm` and `vllm-pooling`: one vLLM server answering both routes, `url` ending with
  `/classify` or `/pooling`. `POST /classify` `{"model", "input": text or [...],
  "use_activation"}` -> `{"data": [{"index", "label", "probs", "num_classes"}], "usage":
  {"prompt_tokens", ...}}`; `POST /pooling`, the same body and `task` (absent or
  `classify`; another gets 400) -> `{"data": [{"index", "object": "pooling", "data":
  [...]}], "usage"}`. Each output is (score - `logit_mean`) / `logit_sigma` (the
  server's `--pooler-config`), through a float32 sigmoid when `use_activation` is true,
  or null and `pooler_activation` (the server's default) is. Fields it does not know
  (`activation`, `softmax`) are ignored; `normalize` gets 400, as in vLLM. With `legacy`
  it ignores `use_activation` too, as vLLM before 0.11.1 does. `GET /version` answers
  `{"version": version}` when one is given;
- `sglang`: SGLang's native `POST /classify` `{"text": [...]}` -> `[{"text", "embedding":
  [score], "meta_info": {"prompt_tokens", "id"}}, ...]`;
- `openrlhf`: `POST /get_reward` `{"query": [...]}` -> `{"rewards": [...]}`.

Faults: the first `fail_first` requests get `fail_status` (with `Retry-After:
retry_after` when set); every request waits `delay_s`; `labels` > 1 answers that many
classes; `extra_tokens` more tokens per text in vLLM's usage (a server that reads a
token more, such as a BOS). Request bodies are appended to `requests` in order of
arrival, and their routes to `routes`.
"""

from __future__ import annotations

import json
import math
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler

from tests.loopback import LoopbackServer

URLS = {
    "vllm": "/classify",
    "vllm-pooling": "/pooling",
    "sglang": "/classify",
    "openrlhf": "/get_reward",
}
"""The route each kind's `url` ends with."""
ROUTES = {
    "vllm": ("/classify", "/pooling"),
    "vllm-pooling": ("/classify", "/pooling"),
    "sglang": ("/classify",),
    "openrlhf": ("/get_reward",),
}
"""The routes each kind answers (a vLLM server answers both of its routes)."""
TEXTS = {"vllm": "input", "vllm-pooling": "input", "sglang": "text", "openrlhf": "query"}


def float32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


def sigmoid32(x: float) -> float:
    """A float32 sigmoid, rounded as a server computing in float32 returns it."""
    x = float32(x)
    return float32(1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x)))


def vllm_refusal(route: str, request: dict) -> tuple[str, str] | None:
    """(message, param) of vLLM's 400 for a body it refuses, None for one it reads."""
    if "normalize" in request:
        return "Parameter `normalize` was removed; use `use_activation` instead.", "normalize"
    task = request.get("task")
    if route == "/pooling" and task not in (None, "classify"):
        return f"Unsupported task: {task!r} Supported tasks: ('classify',)", "task"
    return None


class LoopbackRM(LoopbackServer):
    """A reward server of kind `vllm`, `vllm-pooling`, `sglang` or `openrlhf` on a free
    loopback port."""

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
        logit_mean: float = 0.0,
        logit_sigma: float = 1.0,
    ):
        self.rm, self.kind, self.legacy, self.labels = rm, kind, legacy, labels
        self.version, self.pooler_activation = version, pooler_activation
        self.logit_mean, self.logit_sigma = logit_mean, logit_sigma
        self.extra_tokens = extra_tokens
        self.fail_first, self.fail_status, self.retry_after = fail_first, fail_status, retry_after
        self.delay_s = delay_s
        self.requests: list[dict] = []
        self.routes: list[str] = []
        self.connections: set[tuple] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    @property
    def base(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def url(self) -> str:
        return self.base + URLS[self.kind]

    def handler(self) -> type:
        return type("Handler", (_Handler,), {"server_rm": self})

    def answer(self, route: str, request: dict) -> tuple[int, dict, dict]:
        """(status, headers, body) for one request."""
        with self._lock:
            self.requests.append(request)
            self.routes.append(route)
            index = len(self.requests) - 1
        if self.delay_s:
            self._stopping.wait(self.delay_s)
        if index < self.fail_first:
            headers = {"Retry-After": self.retry_after} if self.retry_after else {}
            return self.fail_status, headers, {"message": "injected failure"}
        vllm = self.kind.startswith("vllm")
        if vllm and (refusal := vllm_refusal(route, request)):
            error = {"message": refusal[0], "type": "BadRequestError", "param": refusal[1]}
            return 400, {}, {"error": {**error, "code": 400}}
        texts = request.get(TEXTS[self.kind])
        texts = [texts] if isinstance(texts, str) else texts
        with self._lock:
            scored = self.rm.score_texts(texts)
        scores, tokens = [r.score for r in scored], [r.tokens for r in scored]
        if vllm:
            return 200, {}, self._vllm(route, request, scores, tokens)
        return 200, {}, getattr(self, f"_{self.kind}")(texts, scores, tokens)

    def head(self, score: float, request: dict) -> float:
        """What vLLM's classifier head returns for a score, as the request and the
        server's pooler settings ask."""
        asked = None if self.legacy else request.get("use_activation")
        activation = self.pooler_activation if asked is None else asked
        shifted = float32((score - self.logit_mean) / self.logit_sigma)
        return sigmoid32(shifted) if activation else shifted

    def _vllm(self, route: str, request: dict, scores: list, tokens: list) -> dict:
        outputs = [[self.head(s, request)] * self.labels for s in scores]
        if route == "/pooling":
            data = [{"index": i, "object": "pooling", "data": o} for i, o in enumerate(outputs)]
        else:
            data = [
                {"index": i, "label": "LABEL_0", "probs": o, "num_classes": self.labels}
                for i, o in enumerate(outputs)
            ]
        total = sum(tokens) + self.extra_tokens * len(tokens)
        usage = {"prompt_tokens": total, "total_tokens": total, "completion_tokens": 0}
        return {
            "id": {"/pooling": "pool-1"}.get(route, "classify-1"),
            "object": "list",
            "created": int(time.time()),
            "model": request.get("model", "rm"),
            "data": data,
            "usage": usage,
        }

    def _sglang(self, texts, scores, tokens) -> list:
        return [
            {"text": t, "embedding": [float32(s)], "meta_info": {"prompt_tokens": n, "id": str(i)}}
            for i, (t, s, n) in enumerate(zip(texts, scores, tokens, strict=True))
        ]

    def _openrlhf(self, texts, scores, tokens) -> dict:
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
        if self.path not in ROUTES[self.server_rm.kind]:
            self._send(404, {}, {"detail": "Not Found"})
            return
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._send(*self.server_rm.answer(self.path, json.loads(body)))

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

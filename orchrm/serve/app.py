"""The HTTP scoring service: routes, request limits, auth, and the uvicorn runner.

Routes (JSON in and out; errors are `{"error": CODE, "message": ..., "field": ...}`):
- `POST /score` `{"question", "orchestrations": [text, ...]}` -> `{"results": [{"score",
  "status", "reason", "message", "tokens"}, ...], "tokens"}`: status `ok` (valid graph),
  `invalid` (parsed, breaks graph rules, listed in `reason`; still scored by the model) or
  `unparseable` (`reason` is the ParseError code; score = the configured penalty);
  `tokens` are the model's input tokens (the verification cost).
- `POST /select` (same body): best-of-N, `{"chosen", "scores", "results", "tokens"}`:
  the highest-scoring parseable orchestration (first on ties), null when none parses.
- `POST /get_reward`: OpenRLHF's remote reward model (`orchrm.serve.openrlhf`).
- `GET /healthz` (never needs the key), `GET /metrics` (Prometheus text).

Checks run in this order: bearer token (401), body size (413, from Content-Length before
reading, and while reading), JSON (400), shape and limits (422, naming the field and
index). An orchestration that does not parse is never an error.
"""

from __future__ import annotations

import hmac
import json
import time
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException

from orchrm.orchestration import validate
from orchrm.parse import ParseError, parse_harmony
from orchrm.serve.batcher import BatcherClosed, MicroBatcher
from orchrm.serve.config import ServeConfig
from orchrm.serve.metrics import Metrics
from orchrm.serve.openrlhf import read_query

ROUTES = ("/score", "/select", "/get_reward", "/healthz", "/metrics")
OPEN_ROUTES = ("/healthz",)


@dataclass(frozen=True)
class Scored:
    """One orchestration's score and what parsing it found."""

    score: float
    status: str  # ok | invalid | unparseable
    reason: str | None  # ParseError code, or the broken rules joined by ","
    message: str | None
    tokens: int  # reward-model input tokens (0 when unparseable)


def score_items(rm, items: list[tuple[str, str]], penalty: float) -> list[Scored]:
    """Parse, validate, render and score (question, harmony text) items with one forward
    pass (`rm.batch_size` permitting), in input order. Runs in the batcher's thread, the
    only one that touches the model and its tokenizer."""
    parsed: list[Scored | tuple[str, list[str]]] = []
    for question, text in items:
        try:
            o = parse_harmony(text)
        except ParseError as err:
            parsed.append(Scored(penalty, "unparseable", err.reason, err.message, 0))
            continue
        broken = sorted({str(v.rule) for v in validate(o)})
        parsed.append((rm.render(question, o), broken))
    texts = [p[0] for p in parsed if isinstance(p, tuple)]
    ids = (
        rm.tokenizer(texts, truncation=True, max_length=rm.max_length)["input_ids"] if texts else []
    )
    scores = iter(zip(rm.score_texts(texts), ids, strict=True))
    out = []
    for p in parsed:
        if isinstance(p, Scored):
            out.append(p)
            continue
        score, tokens = next(scores)
        _, broken = p
        reason = ",".join(broken) or None
        message = f"breaks graph rules: {reason}" if broken else None
        out.append(Scored(score, "invalid" if broken else "ok", reason, message, len(tokens)))
    return out


class ApiError(Exception):
    """A request the service refuses: HTTP status, stable code, sentence, field."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field

    def response(self) -> JSONResponse:
        body = {"error": self.code, "message": self.message, "field": self.field}
        headers = {"WWW-Authenticate": "Bearer"} if self.status == 401 else None
        return JSONResponse(body, self.status, headers=headers)


def create_app(rm, config: ServeConfig, metrics: Metrics | None = None) -> FastAPI:
    """The FastAPI app serving `rm` (an `OrchRM`) under `config`'s limits and key."""
    metrics = metrics or Metrics()
    batcher = MicroBatcher(
        lambda items: score_items(rm, items, config.invalid_penalty),
        config.max_batch_size,
        config.max_wait_ms / 1000,
        metrics.batch,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        batcher.start()
        yield
        await batcher.close()  # uvicorn has let in-flight requests finish by now

    app = FastAPI(title="orchrm", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.metrics, app.state.batcher = metrics, batcher
    app.add_middleware(_Gate, metrics=metrics, api_key=config.api_key)

    @app.exception_handler(ApiError)
    async def api_error(request: Request, err: ApiError) -> JSONResponse:
        return err.response()

    @app.exception_handler(HTTPException)  # unknown route, wrong method: same error shape
    async def http_error(request: Request, err: HTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(err.status_code, "http_error")
        return ApiError(err.status_code, code, str(err.detail)).response()

    @app.exception_handler(Exception)
    async def internal_error(request: Request, err: Exception) -> JSONResponse:
        return ApiError(500, "internal", f"{type(err).__name__}: {err}").response()

    async def scored(items: list[tuple[str, str]]) -> list[Scored]:
        try:
            results = await batcher.submit(items)
        except BatcherClosed as err:
            raise ApiError(503, "shutting_down", str(err)) from None
        for r in results:
            metrics.items[r.status] += 1
        return results

    async def orchestrations_of(request: Request) -> tuple[str, list[str]]:
        body = await _json_object(request, config.max_body_bytes)
        question = body.get("question")
        if not isinstance(question, str):
            raise ApiError(
                422, "wrong_type", f"question must be a string, got {_kind(question)}", "question"
            )
        _check_length("question", question, config.max_text_chars)
        texts = _strings(body, "orchestrations", config)
        return question, texts

    @app.post("/score")
    async def score(request: Request) -> JSONResponse:
        question, texts = await orchestrations_of(request)
        results = await scored([(question, t) for t in texts])
        tokens = sum(r.tokens for r in results)
        return JSONResponse({"results": [asdict(r) for r in results], "tokens": tokens})

    @app.post("/select")
    async def select(request: Request) -> JSONResponse:
        question, texts = await orchestrations_of(request)
        if not texts:
            raise ApiError(422, "empty", "orchestrations needs at least one item", "orchestrations")
        results = await scored([(question, t) for t in texts])
        parseable = [i for i, r in enumerate(results) if r.status != "unparseable"]
        chosen = max(parseable, key=lambda i: (results[i].score, -i)) if parseable else None
        return JSONResponse(
            {
                "chosen": chosen,
                "scores": [r.score for r in results],
                "results": [asdict(r) for r in results],
                "tokens": sum(r.tokens for r in results),
            }
        )

    @app.post("/get_reward")
    async def get_reward(request: Request) -> JSONResponse:
        body = await _json_object(request, config.max_body_bytes)
        queries = _strings(body, "query", config)
        prompts = _strings(body, "prompts", config, required=False)
        if prompts is not None and len(prompts) != len(queries):
            raise ApiError(
                422,
                "length_mismatch",
                f"prompts has {len(prompts)} items and query {len(queries)}: one prompt per "
                "query, or no prompts",
                "prompts",
            )
        read = [read_query(q, prompts[i] if prompts else None) for i, q in enumerate(queries)]
        results = await scored([(r.question, r.orchestration) for r in read])
        rewards = [r.score for r in results]
        extra_logs = {
            "orchrm_parsed": [float(r.status != "unparseable") for r in results],
            "orchrm_valid": [float(r.status == "ok") for r in results],
            "orchrm_tokens": [float(r.tokens) for r in results],
        }
        return JSONResponse({"rewards": rewards, "scores": rewards, "extra_logs": extra_logs})

    @app.get("/healthz")
    async def healthz() -> dict:
        return {
            "status": "ok",
            "model": Path(config.rm).name,
            "render_version": rm.metadata.get("render_version"),
            "max_length": rm.max_length,
            "max_batch_size": config.max_batch_size,
            "max_wait_ms": config.max_wait_ms,
        }

    @app.get("/metrics")
    async def metrics_route() -> PlainTextResponse:
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4")

    return app


class _Gate:
    """ASGI middleware in front of every route: the bearer-token check (before the body
    is read), request counts and latency by route and status, requests in flight."""

    def __init__(self, app, metrics: Metrics, api_key: str | None):
        self.app, self.metrics = app, metrics
        self.key = f"Bearer {api_key}".encode() if api_key else None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        route = path if path in ROUTES else "other"
        status, start = 500, time.perf_counter()

        async def send_status(message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        self.metrics.in_flight += 1
        try:
            if self.key and path not in OPEN_ROUTES and not self._authorized(scope):
                missing = not any(k == b"authorization" for k, _ in scope["headers"])
                error = ApiError(
                    401,
                    "unauthorized",
                    "missing bearer token" if missing else "wrong bearer token",
                    "Authorization",
                )
                await error.response()(scope, receive, send_status)
            else:
                await self.app(scope, receive, send_status)
        finally:
            self.metrics.in_flight -= 1
            self.metrics.request(route, status, time.perf_counter() - start)

    def _authorized(self, scope) -> bool:
        given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
        return hmac.compare_digest(given, self.key)


async def _json_object(request: Request, limit: int) -> dict:
    """The request body parsed as a JSON object, refused (413) past `limit` bytes
    before it is parsed."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ApiError(
            413, "body_too_large", f"the body has {declared} bytes; the limit is {limit}"
        )
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise ApiError(413, "body_too_large", f"the body exceeds the limit of {limit} bytes")
    try:
        value = json.loads(body)
    except ValueError as err:  # JSONDecodeError and UnicodeDecodeError
        raise ApiError(400, "malformed_json", f"the body is not valid JSON: {err}") from None
    if not isinstance(value, dict):
        raise ApiError(422, "wrong_type", f"the body must be a JSON object, got {_kind(value)}")
    return value


def _strings(body: dict, name: str, config: ServeConfig, required: bool = True) -> Any:
    """`body[name]` as a list of strings within the item and length limits (422 naming
    the field and index otherwise); None when absent and not required."""
    value = body.get(name)
    if value is None:
        if required:
            raise ApiError(422, "missing_field", f"{name} is required", name)
        return None
    if not isinstance(value, list):
        raise ApiError(422, "wrong_type", f"{name} must be a list of strings", name)
    if len(value) > config.max_items:
        raise ApiError(
            422,
            "too_many_items",
            f"{name} has {len(value)} items; the limit is {config.max_items}",
            name,
        )
    for i, text in enumerate(value):
        if not isinstance(text, str):
            raise ApiError(
                422,
                "wrong_type",
                f"{name}[{i}] must be a string, got {_kind(text)}",
                f"{name}[{i}]",
            )
        _check_length(f"{name}[{i}]", text, config.max_text_chars)
    return value


def _check_length(field: str, text: str, limit: int) -> None:
    if len(text) > limit:
        raise ApiError(
            422, "text_too_long", f"{field} has {len(text)} characters; the limit is {limit}", field
        )


def _kind(value: Any) -> str:
    """The JSON name of a value's type."""
    names = {bool: "boolean", int: "number", float: "number", str: "string"}
    names |= {list: "array", dict: "object", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def serve(config: ServeConfig) -> None:
    """Load the reward model and serve it until SIGINT/SIGTERM; then stop accepting,
    let in-flight requests finish (up to `shutdown_timeout_s`), drain the batcher."""
    import torch
    import uvicorn

    from orchrm.rm.model import OrchRM

    config.check()
    if config.num_threads:
        torch.set_num_threads(config.num_threads)
    rm = OrchRM.load(config.rm, device=config.device, batch_size=config.max_batch_size)
    rm.batch_size = forward_batch_size(config, rm.device)
    rm.score_texts(["warm-up"])  # the first forward pass pays one-off costs
    uvicorn.Server(uvicorn_config(create_app(rm, config), config)).run()


def forward_batch_size(config: ServeConfig, device) -> int:
    """Orchestrations per forward pass (see `ServeConfig.forward_batch_size`)."""
    if config.forward_batch_size is not None:
        return min(config.forward_batch_size, config.max_batch_size)
    return (
        config.max_batch_size if str(device).startswith("cuda") else min(8, config.max_batch_size)
    )


def uvicorn_config(app: FastAPI, config: ServeConfig):
    """The uvicorn settings the service runs with (tests start servers with them too)."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=config.host,
        port=config.port,
        access_log=False,
        timeout_graceful_shutdown=config.shutdown_timeout_s,
        backlog=2048,
    )

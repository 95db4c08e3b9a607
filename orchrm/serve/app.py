"""The HTTP scoring service: routes, request limits, auth, and the uvicorn runner.

Routes (JSON in and out):
- `POST /score` `{"question", "orchestrations": [text, ...]}` -> `{"results": [{"score",
  "status", "reason", "message", "tokens", "p_correct"}, ...], "tokens"}`: status `ok`
  (valid graph), `invalid` (parsed, breaks graph rules, listed in `reason`; still scored
  by the model) or `unparseable` (`reason` is the ParseError code; score = the configured
  penalty); `tokens` are the model's input tokens (the verification cost); `p_correct`
  the model's calibrated P(correct) (`orchrm calibrate`; null without a calibration).
  From an ensemble (`orchrm train --ensemble K`), `score` is the aggregate it serves
  (`ServeConfig.aggregate`) and `mean` and `spread` (absent from one model's answer)
  are its members' mean and standard deviation.
- `POST /select` (the same body, with `selector`, `answers`, `selector_options`):
  best-of-N by a selector of the registry (`orchrm.serve.select`), `{"selector",
  "chosen", "scores", "selection_scores", "executed", "drawn", "results", "tokens",
  "plan", "edits"}`; `chosen` is null when no orchestration parses; `plan` is the edit
  `orchrm-search` found, to execute in place of `chosen` (null for the others).
- `POST /get_reward`: OpenRLHF's remote reward model (`orchrm.serve.openrlhf`).
- `POST /classify`, `POST /pooling`: vLLM's classification and pooling routes for
  rendered texts, in vLLM's shape (`orchrm.serve.classify`), under the same limits and
  budget as `/score`.
- `GET /healthz` (never needs the key), `GET /metrics` (Prometheus text).
- `/openapi.json`, `/docs`, `/redoc` only with `ServeConfig.openapi`.

Errors are `{"error": CODE, "message", "field", "request_id"}`. Every response carries an
`X-Request-ID` header; a 500 says only that id, and the server log holds the details
under it, as it holds one line per refused request (its id and reason). Checks run in
this order: framing (411 without a length, 400 and a closed connection with both
Content-Length and Transfer-Encoding), client allow-list (403), bearer token (401), body
size (413, from Content-Length before reading, and while reading), body deadline (408),
then in a prepare worker (`orchrm.serve.prepare`) JSON (400), shape, unknown fields,
limits and valid Unicode (422, naming the field and index). A request gets 503 `overloaded` when
every prepare worker is busy and `max_queued_requests` wait already, and 503
`over_budget` past `max_request_seconds`. An orchestration that does not parse is never
an error. The event loop itself only moves bytes: decoding, parsing and rendering run
in the prepare workers, forward passes in the scoring thread (`orchrm.serve.batcher`).
"""

from __future__ import annotations

import asyncio
import copy
import errno
import logging
import socket
import time
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException

from orchrm.calibration.methods import calibration_from_metadata
from orchrm.errors import Busy, ConfigError
from orchrm.serve.batcher import BatcherClosed, MicroBatcher
from orchrm.serve.classify import (
    classify_answer,
    pooling_answer,
    prepare_classify,
    prepare_pooling,
)
from orchrm.serve.config import ServeConfig
from orchrm.serve.gate import Gate, error_response, read_body, refused, request_id
from orchrm.serve.metrics import Metrics
from orchrm.serve.openrlhf import reward_answer
from orchrm.serve.prepare import (
    ApiError,
    Limits,
    Rendered,
    Scored,
    answer_of,
    install_tokenizer,
    over_budget,
    prepare_request,
    render_plans,
    tokenizer_spec,
)
from orchrm.serve.select import (
    SEARCHES,
    SelectBody,
    candidate_scores,
    choose,
    nothing_parses,
    prepare_select,
    search_choice,
    search_of,
    select_answer,
    select_job,
)
from orchrm.serve.workers import WorkerBusy, WorkerPool, WorkerTimeout

if TYPE_CHECKING:
    from orchrm.serve.guard import Drain

MAX_HEADER_BYTES = 64 * 1024
"""Largest request head (request line and headers); h11 answers 400 beyond."""

log = logging.getLogger("orchrm.serve")


class _Scoring:
    """A request's way to its scores: prepared in a worker process, scored in the
    micro-batcher, both by the request's deadline."""

    def __init__(self, rm, config: ServeConfig, metrics: Metrics):
        self.config, self.metrics = config, metrics
        info = rm.info
        self.metadata = dict(info.metadata)
        self.calibration = calibration_from_metadata(self.metadata)
        # the texts are rendered in the prepare workers: the batcher scores them as they are
        self.batcher = MicroBatcher(
            rm.score_texts, config.max_batch_size, config.max_wait_ms / 1000, metrics.batch
        )
        self.limits = Limits(
            max_items=config.max_items,
            max_text_chars=config.max_text_chars,
            invalid_penalty=config.invalid_penalty,
            max_tokens=info.budget[0],
            max_request_seconds=config.max_request_seconds,
            reads_domain=info.reads_domain,
        )
        self.pool = WorkerPool(
            config.prepare_workers,
            config.max_queued_requests,
            initializer=(install_tokenizer, (tokenizer_spec(rm.tokenizer),)),
            on_restart=self._restarted,
        )

    def _restarted(self) -> None:
        self.metrics.worker_restarts += 1

    async def results(self, request: Request, route: str) -> list[Scored]:
        """The scored items of `request`'s body for `route`, in input order."""
        items, deadline = await self._prepared(request, route)
        return await self._scored(items, deadline)

    async def selected(self, request: Request) -> tuple[SelectBody, list[Scored], float]:
        """A `/select` body, its scored items in input order, and its deadline."""
        body, deadline = await self._prepared(request, "select")
        return body, await self._scored(body.items, deadline), deadline

    async def choose(self, body: SelectBody, results: list[Scored], deadline: float):
        """The `/select` choice, made in a prepare worker by the request's deadline (a
        search's rounds: edits rendered in a worker, scored in the batcher)."""
        if all(r.status == "unparseable" for r in results):
            return nothing_parses(body)
        job = select_job(body, results, self.metadata)
        if body.selector in SEARCHES:
            return await self._search(body, job, deadline)
        return await self._in_worker(deadline, "to choose", choose, job)

    async def _search(self, body: SelectBody, job, deadline: float):
        """`orchrm-search` on a request: each round's edits rendered in a prepare worker
        and scored by the batcher, until the search returns."""
        steps = search_of(job).steps(job.task)
        next(steps)  # the orchestrations themselves: scored already
        scores = candidate_scores(job)
        try:
            while True:
                plans = steps.send(scores)
                texts = await self._in_worker(
                    deadline,
                    "to be searched",
                    render_plans,
                    body.question,
                    plans,
                    self.limits,
                    deadline,
                    body.domain,
                )
                scores = [[(r.tokens, r.score) for r in await self._score_texts(texts, deadline)]]
        except StopIteration as done:
            return search_choice(job, done.value)

    async def _score_texts(self, texts: list[str], deadline: float) -> list:
        """The batcher's results for `texts`, by `deadline`."""
        try:
            async with asyncio.timeout_at(deadline):
                return await self.batcher.submit(texts)
        except TimeoutError:
            raise over_budget(self.config.max_request_seconds, "with its forward passes") from None
        except BatcherClosed as err:
            raise ApiError(503, "shutting_down", str(err)) from None

    async def classified(self, request: Request, route: str) -> tuple[list[Scored], bool]:
        """The scored texts of a `/classify` or `/pooling` body and whether it asks for
        the sigmoid."""
        body, deadline = await self._prepared(request, route)
        return await self._scored(body.items, deadline), body.activation

    async def _scored(self, items: list, deadline: float) -> list[Scored]:
        """Each prepared item scored by the batcher (by `deadline`), in input order."""
        texts = [item.text for item in items if isinstance(item, Rendered)]
        scores = iter(await self._score_texts(texts, deadline))
        results = []
        for item in items:
            if isinstance(item, Rendered):
                result = next(scores)
                item = item.scored(result)
                if self.calibration is not None:
                    p = self.calibration.probability([item.score])[0]
                    item = replace(item, p_correct=p)
            results.append(item)
        for r in results:
            self.metrics.items[r.status] += 1
        return results

    async def _prepared(self, request: Request, route: str) -> tuple:
        """The request's items (a `ClassifyBody` for `/classify` and `/pooling`, a
        `SelectBody` for `/select`), prepared by a worker, and the request's deadline."""
        body = await read_body(request, self.config)
        deadline = time.monotonic() + self.config.max_request_seconds  # the loop's clock
        jobs = {
            "classify": (prepare_classify,),
            "pooling": (prepare_pooling,),
            "select": (prepare_select,),
        }
        job = jobs.get(route, (prepare_request, route))
        items = await self._in_worker(deadline, "to be prepared", *job, body, self.limits, deadline)
        return items, deadline

    async def _in_worker(self, deadline: float, what: str, fn, *args):
        """`fn(*args)` in a prepare worker by `deadline` (503 when none is free, or past it)."""
        try:
            return await self.pool.run(deadline, fn, *args)
        except WorkerBusy as err:
            raise ApiError(503, "overloaded", f"the service is busy ({err}); retry later") from None
        except WorkerTimeout:
            raise over_budget(self.config.max_request_seconds, what) from None


def create_app(rm, config: ServeConfig, metrics: Metrics | None = None) -> FastAPI:
    """The FastAPI app serving `rm` (an `OrchRM`) under `config`'s limits and key."""
    metrics = metrics or Metrics()
    scoring = _Scoring(rm, config, metrics)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await scoring.pool.start()
        scoring.batcher.start()
        yield
        await scoring.batcher.close()  # uvicorn has let in-flight requests finish by now
        await scoring.pool.close()

    docs = config.openapi
    app = FastAPI(
        title="orchrm",
        lifespan=lifespan,
        openapi_url="/openapi.json" if docs else None,
        docs_url="/docs" if docs else None,
        redoc_url="/redoc" if docs else None,
    )
    app.state.metrics, app.state.batcher = metrics, scoring.batcher
    app.add_middleware(
        Gate, metrics=metrics, api_key=config.api_key, allow_clients=config.allow_clients
    )

    @app.exception_handler(ApiError)
    async def api_error(request: Request, err: ApiError) -> JSONResponse:
        refused(request.scope, err)
        return error_response(err, request_id(request))

    @app.exception_handler(HTTPException)  # unknown route, wrong method: same error shape
    async def http_error(request: Request, err: HTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(err.status_code, "http_error")
        err = ApiError(err.status_code, code, str(err.detail))
        refused(request.scope, err)
        return error_response(err, request_id(request))

    _add_routes(app, scoring, rm, config)
    return app


def _add_routes(app: FastAPI, scoring: _Scoring, rm, config: ServeConfig) -> None:
    @app.post("/score")
    async def score(request: Request) -> JSONResponse:
        results = await scoring.results(request, "score")
        tokens = sum(r.tokens for r in results)
        return JSONResponse({"results": [answer_of(r) for r in results], "tokens": tokens})

    @app.post("/select")
    async def select(request: Request) -> JSONResponse:
        body, results, deadline = await scoring.selected(request)
        choice = await scoring.choose(body, results, deadline)
        return JSONResponse(select_answer(body, results, choice))

    @app.post("/get_reward")
    async def get_reward(request: Request) -> JSONResponse:
        results = await scoring.results(request, "get_reward")
        return JSONResponse(reward_answer(results))

    label = _first_label(rm)

    @app.post("/classify")
    async def classify(request: Request) -> JSONResponse:
        results, activation = await scoring.classified(request, "classify")
        model = Path(config.rm).name
        return JSONResponse(classify_answer(results, activation, model=model, label=label))

    @app.post("/pooling")
    async def pooling(request: Request) -> JSONResponse:
        results, activation = await scoring.classified(request, "pooling")
        return JSONResponse(pooling_answer(results, activation, model=Path(config.rm).name))

    @app.get("/healthz")
    async def healthz() -> dict:
        return {
            "status": "ok",
            "model": Path(config.rm).name,
            "render_version": scoring.metadata.get("render_version"),
            "max_length": rm.max_length,
            "dtype": getattr(rm, "dtype", None),
            "forward_batch_size": getattr(rm, "batch_size", None),
            "calibration": scoring.calibration.method if scoring.calibration else None,
            "ensemble": ensemble_health(rm),
            "max_batch_size": config.max_batch_size,
            "max_wait_ms": config.max_wait_ms,
        }

    @app.get("/metrics")
    async def metrics_route() -> PlainTextResponse:
        text = scoring.metrics.render()
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")


def ensemble_health(rm) -> dict | None:
    """`/healthz`'s `ensemble`: members, aggregate and spread weight (None: one model)."""
    members = getattr(rm, "members", None)
    if not members:
        return None
    return {"members": len(members), "aggregate": rm.aggregate, "spread_weight": rm.spread_weight}


def _first_label(rm) -> str:
    """The name of the model's one label, as vLLM reports it (`id2label[0]`)."""
    names = getattr(getattr(getattr(rm, "model", None), "config", None), "id2label", None)
    return str(names.get(0, "LABEL_0")) if isinstance(names, dict) else "LABEL_0"


def serve(config: ServeConfig) -> Drain | None:
    """Load the reward model and serve it until SIGINT/SIGTERM; then stop accepting, let
    in-flight requests finish (up to `shutdown_timeout_s`), drain the batcher, log one
    line of what the drain did and return it (its `exit_status` is the process's); None
    when the service stopped before it started (its log says why). Before the model
    loads: a model whose files cannot be read (`DamagedModel`, `NoModel`) is refused
    before the port is bound, and the port is bound (`bind_port`: `Busy` when another
    process holds it)."""
    from orchrm.rmodel.files import check_model_files, model_directory

    config.check()
    check_model_files(model_directory(config.rm))
    sock = bind_port(config)
    try:
        import torch

        from orchrm.scoring.load import load_scorer
        from orchrm.serve.guard import DrainingServer

        if config.num_threads:
            torch.set_num_threads(config.num_threads)
        rm = load_scorer(
            config.rm, device=config.device, dtype=config.dtype,
            batch_size=config.max_batch_size, aggregate=config.aggregate,
            spread_weight=config.spread_weight,
        )  # fmt: skip
        rm.batch_size = forward_batch_size(config, rm.device)
        rm.score_texts(["warm-up"])  # the first forward pass pays one-off costs
        server = DrainingServer(uvicorn_config(create_app(rm, config), config))
        server.run(sockets=[sock])
    finally:
        sock.close()
    return server.drain


def bind_port(config: ServeConfig) -> socket.socket:
    """A socket bound to `config.host`:`config.port` (not yet listening: uvicorn starts
    that), so that a port in use is said before any model loads: `Busy` (exit status 5)
    for a port another process holds, `ConfigError` for an address this machine does not
    have or a port it may not bind."""
    where = (
        f"[{config.host}]:{config.port}" if ":" in config.host else f"{config.host}:{config.port}"
    )
    sock = socket.socket(socket.AF_INET6 if ":" in config.host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
    try:
        sock.bind((config.host, config.port))
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:
            raise Busy(
                f"cannot serve on {where}: another process is listening on port "
                f"{config.port}; stop it, or give another --port"
            ) from None
        raise ConfigError(
            f"cannot serve on {where}: {err.strerror or err}; give another --host or --port"
        ) from None
    return sock


def forward_batch_size(config: ServeConfig, device) -> int:
    """Orchestrations per forward pass (see `ServeConfig.forward_batch_size`)."""
    if config.forward_batch_size is not None:
        return min(config.forward_batch_size, config.max_batch_size)
    return (
        config.max_batch_size if str(device).startswith("cuda") else min(8, config.max_batch_size)
    )


def uvicorn_config(app: FastAPI, config: ServeConfig):
    """The uvicorn settings the service runs with (tests start servers with them too):
    the guarded h11 protocol (`orchrm.serve.guard`), its timeouts and connection cap,
    and rate-limited logs."""
    import uvicorn
    import uvicorn.config

    from orchrm.serve.guard import connection_limits, guarded_h11, limit_logs

    log_config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    log_config["loggers"]["orchrm.serve"] = {"handlers": ["default"], "level": "INFO"}
    log_config["loggers"]["orchrm.serve"]["propagate"] = False
    settings = uvicorn.Config(
        app,
        host=config.host,
        port=config.port,
        http=guarded_h11(config, app.state.metrics),
        ws="none",
        lifespan="on",
        access_log=False,
        log_config=log_config,
        timeout_keep_alive=config.keep_alive_timeout_s,
        timeout_graceful_shutdown=config.shutdown_timeout_s,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        backlog=connection_limits(config.max_connections)[1],
    )
    limit_logs()  # after uvicorn.Config, which configures logging
    return settings

"""What stands in front of every route of `orchrm serve`: request framing (411 without a
length, 400 and a closed connection with both Content-Length and Transfer-Encoding), the
client allow-list (403), the bearer token (401), the body's size and deadline (413, 408),
request ids, error bodies, and one log line per refused request (`Gate`, the ASGI
middleware)."""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
import time

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.requests import ClientDisconnect

from orchrm.jsonl import printable
from orchrm.serve.config import ServeConfig, client_networks, is_allowed
from orchrm.serve.metrics import Metrics
from orchrm.serve.prepare import ApiError
from orchrm.serve.workers import WorkerFailed

ROUTES = ("/score", "/select", "/get_reward", "/classify", "/pooling", "/healthz", "/metrics")
OPEN_ROUTES = ("/healthz",)

log = logging.getLogger("orchrm.serve")


def error_response(err: ApiError, request_id: str | None) -> JSONResponse:
    """The JSON error body and headers of a refusal."""
    body = {"error": err.code, "message": err.message, "field": err.field}
    headers = {"WWW-Authenticate": "Bearer"} if err.status == 401 else {}
    if err.status == 503:
        headers["Retry-After"] = "1"
    return JSONResponse(body | {"request_id": request_id}, err.status, headers=headers)


def request_id(request: Request) -> str | None:
    """The id `Gate` gave this request (in its responses' `X-Request-ID`)."""
    return request.scope.get("state", {}).get("request_id")


def refused(scope, err: ApiError) -> None:
    """Note why the request is refused, for `Gate`'s one log line about it."""
    scope.setdefault("state", {})["refusal"] = err


AUTH_SCHEMES = {
    s.lower().encode(): s
    for s in ("Basic", "Digest", "Negotiate", "NTLM", "Token", "ApiKey", "OAuth", "HOBA")
}
"""Authorization schemes other than Bearer that a 401 names (any other first word could
be a key sent without its scheme, which is never echoed)."""

BODY_ROUTES = ("/score", "/select", "/get_reward", "/classify", "/pooling")
"""Routes whose POST carries a body, which must be framed by its length."""


def framing_error(scope) -> ApiError | None:
    """A request whose body framing cannot be trusted: both Content-Length and
    Transfer-Encoding (a proxy and this server could split the stream differently: 400,
    and the connection is closed), or a POST to a body route with neither (411: HTTP/1.1
    reads such a body as empty; the client meant to send one)."""
    names = {name for name, _ in scope["headers"]}
    length, chunked = b"content-length" in names, b"transfer-encoding" in names
    if length and chunked:
        return ApiError(
            400,
            "conflicting_framing",
            "the request has both Content-Length and Transfer-Encoding: send one; this "
            "connection is closed",
            "Transfer-Encoding",
        )
    if scope["method"] == "POST" and scope["path"] in BODY_ROUTES and not (length or chunked):
        return ApiError(
            411,
            "length_required",
            "a POST body needs a Content-Length header (or Transfer-Encoding: chunked)",
            "Content-Length",
        )
    return None


async def read_body(request: Request, config: ServeConfig) -> bytes:
    """The request body, refused past `max_body_bytes` (413, before reading when the
    Content-Length says so) and past `body_timeout_s` (408)."""
    limit = config.max_body_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ApiError(
            413, "body_too_large", f"the body has {declared} bytes; the limit is {limit}"
        )
    body = bytearray()
    try:
        async with asyncio.timeout(config.body_timeout_s):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit:
                    message = f"the body exceeds the limit of {limit} bytes"
                    raise ApiError(413, "body_too_large", message)
    except TimeoutError:
        message = f"the body did not arrive within body_timeout_s ({config.body_timeout_s:g} s)"
        raise ApiError(408, "body_timeout", message) from None
    return bytes(body)


class Gate:
    """ASGI middleware in front of every route: a request id (`X-Request-ID`), the
    client allow-list and bearer-token checks (before the body is read), `Connection:
    close` on an answer sent before its body was read, client disconnects (counted apart,
    not errors), unexpected errors (logged under the request id, a 500 that says only the
    id), request counts and latency by route and status, requests in flight."""

    def __init__(
        self, app, metrics: Metrics, api_key: str | None, allow_clients: tuple[str, ...] = ()
    ):
        self.app, self.metrics = app, metrics
        self.key = api_key.encode() if api_key else None
        self.networks = client_networks(allow_clients)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = secrets.token_hex(8)
        scope.setdefault("state", {})["request_id"] = rid
        route = scope["path"] if scope["path"] in ROUTES else "other"
        status, start, body_done = None, time.perf_counter(), not _has_body(scope)

        async def receive_tracked():
            nonlocal body_done
            message = await receive()
            if message["type"] == "http.request" and not message.get("more_body", False):
                body_done = True
            return message

        async def send_tagged(message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [*message.get("headers", []), (b"x-request-id", rid.encode())]
                closing = scope["state"].get("close", False)
                if not body_done or closing:  # the rest of the body is not worth reading
                    headers.append((b"connection", b"close"))
                message = {**message, "headers": headers}
                self._log_refusal(scope, rid, status)  # before the client can read it
            await send(message)

        self.metrics.in_flight += 1
        disconnected = False
        try:
            await self._dispatch(scope, receive_tracked, send_tagged)
        except ClientDisconnect:
            disconnected = True
            self.metrics.disconnects += 1
        except Exception as err:
            remote = isinstance(err, WorkerFailed)  # its message is the worker's traceback
            log.error("request %s failed: %r", rid, err, exc_info=not remote)
            if status is None:
                message = f"internal error; the server log has the details under request id {rid}"
                error = error_response(ApiError(500, "internal", message), rid)
                await error(scope, receive, send_tagged)
        finally:
            self.metrics.in_flight -= 1
            if not disconnected:
                self.metrics.request(route, status or 500, time.perf_counter() - start)

    @staticmethod
    def _log_refusal(scope, rid: str, status: int) -> None:
        """The one log line of a refused request (none for a 500: its error is logged)."""
        refusal = scope["state"].get("refusal")
        if refusal is not None and status != 500:
            log.warning(  # one template: the log limiter caps a flood of refusals
                "request %s refused: %d %s: %s (%s %s)",
                rid,
                status,
                refusal.code,
                refusal.message[:300],
                scope["method"],
                printable(scope["path"][:100]),
            )

    async def _dispatch(self, scope, receive, send) -> None:
        error = framing_error(scope)
        guarded = scope["path"] not in OPEN_ROUTES
        if error is None and self.networks and guarded:
            error = self._forbidden(scope)
        if error is None and self.key and guarded:
            error = self._unauthorized(scope)
        if error is None:
            await self.app(scope, receive, send)
            return
        if error.code == "conflicting_framing":
            scope["state"]["close"] = True
        refused(scope, error)
        await error_response(error, scope["state"]["request_id"])(scope, receive, send)

    def _forbidden(self, scope) -> ApiError | None:
        """None for a client in `allow_clients`, else the 403 naming its address."""
        client = (scope.get("client") or (None,))[0]
        if is_allowed(client, self.networks):
            return None
        shown = printable(str(client))[:64]
        message = f"client {shown} is not in the networks this server serves (allow_clients)"
        return ApiError(403, "forbidden_client", message)

    def _unauthorized(self, scope) -> ApiError | None:
        """None for `Authorization: Bearer KEY` (the scheme in any case, the key compared
        in constant time), else the 401 saying what is wrong with what was sent."""
        given = next((v for k, v in scope["headers"] if k == b"authorization"), None)
        scheme, _, token = (given or b"").strip().partition(b" ")
        if given is None or not scheme:
            message = "missing bearer token"
        elif scheme.lower() in AUTH_SCHEMES and token.strip():  # named: never a stray key
            shown = AUTH_SCHEMES[scheme.lower()]
            message = f"the Authorization scheme is {shown}: send Authorization: Bearer KEY"
        elif scheme.lower() != b"bearer" or not token.strip():
            message = "Authorization is not Bearer KEY (the word Bearer, a space, the key)"
        elif hmac.compare_digest(token.strip(), self.key):
            return None
        else:
            message = "wrong bearer token"
        return ApiError(401, "unauthorized", message, "Authorization")


def _has_body(scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False

"""What protects the service at the connection level, below the routes: the HTTP/1.1
protocol with a header deadline, a connection cap and a shutdown that does not wait for
slow uploads; the server that drains on SIGINT/SIGTERM and says what the drain did; and
the rate limit on repeated log messages.

uvicorn's h11 protocol times out only idle keep-alive connections (and any byte a client
sends resets that timer), and it takes connections until the process runs out of file
descriptors. `guarded_h11` adds:
- a header deadline: a connection must complete each request's headers within
  `header_timeout_s` of connecting or of its previous response, else it is closed;
- a connection cap: past `max_connections` (lowered to stay below the descriptor limit,
  `connection_limits`), a connection still waiting for request headers is closed to make
  room (one that never completed a request first, then the longest waiting); when there
  is none, the new connection gets a 503 and is closed;
- on shutdown, a request whose body is still arriving is closed at once (its client sees
  the connection drop) instead of holding the shutdown until its body deadline;
- a client that half-closes its side after a whole request still gets the answer;
- a client still sending its body when it is answered (408 `body_timeout`) gets the
  whole answer: the connection closes lingering (`_Lingering`), not with a reset.

`DrainingServer` is uvicorn's server ending as a service manager expects: on SIGINT or
SIGTERM it drains (uvicorn's graceful shutdown: in-flight requests get up to
`shutdown_timeout_s`), logs one line of what the drain did (`Drain`), and returns
instead of ending the process by the signal; `Drain.exit_status` is then the process's.
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import signal
import threading
import time
from dataclasses import dataclass

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from orchrm.serve.config import ServeConfig
from orchrm.serve.metrics import Metrics

log = logging.getLogger("orchrm.serve")

RESERVED_FDS = 64
"""Descriptors kept free of client connections (model files, worker sockets, logs)."""
MAX_ACCEPT_BURST = 2048
"""Most connections accepted in one event-loop turn (and the listen backlog)."""


def connection_limits(max_connections: int) -> tuple[int, int]:
    """(connection cap, accept burst) that keep the process below its soft descriptor
    limit, `RESERVED_FDS` aside: the event loop accepts up to a burst of connections
    before their protocols can close any over the cap, so a burst or two in flight must
    fit beside the cap. The burst is also the listen backlog. A soft limit below what
    `max_connections` needs is raised first, as far as the hard limit allows."""
    soft = raise_descriptor_limit(max_connections * 4 // 3 + MAX_ACCEPT_BURST + RESERVED_FDS)
    if soft == resource.RLIM_INFINITY:
        return max_connections, MAX_ACCEPT_BURST
    available = max(soft - RESERVED_FDS, 16)
    cap = max(1, min(max_connections, available * 3 // 4))
    return cap, max(4, min(MAX_ACCEPT_BURST, (available - cap) // 3))


def raise_descriptor_limit(wanted: int) -> int:
    """The process's soft descriptor limit after raising it to `wanted`, or to the hard
    limit when that is lower (a soft limit only the process itself sees; nothing else
    is changed). A limit already as high, or one the system will not raise, is kept."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return soft
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            return soft
    return target


def _refusal() -> bytes:
    body = json.dumps(
        {
            "error": "too_many_connections",
            "message": "the service has as many connections open as it allows; retry later",
            "field": None,
            "request_id": None,
        }
    ).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\nretry-after: 1\r\n\r\n"
    )
    return head.encode() + body


LINGER_S = 2.0
"""How long a connection answered while its request body was still arriving keeps
reading (and dropping) what the client sends before it closes."""


class _Lingering:
    """A connection's transport that closes as a lingering close when the answer went out
    while the request's body was still arriving (a 408 `body_timeout`): closing a socket
    with unread bytes makes the kernel send a reset, and a reset can discard the answer
    the client has not read yet. So the server sends its end of stream after the answer,
    drops what still arrives for `LINGER_S` seconds, then closes. Anything else it asks
    of the transport goes to the transport."""

    def __init__(self, transport, protocol) -> None:
        self._transport, self._protocol = transport, protocol
        self.lingering = False

    def __getattr__(self, name: str):
        return getattr(self._transport, name)

    def is_closing(self) -> bool:
        return self.lingering or self._transport.is_closing()

    def close(self) -> None:
        if self.is_closing():
            return
        cycle, conn = self._protocol.cycle, self._protocol.conn
        answered = cycle is not None and cycle.response_complete
        if answered and conn.their_state is h11.SEND_BODY and self._transport.can_write_eof():
            self.lingering = True
            self._transport.write_eof()
            self._transport.resume_reading()  # flow control may have paused it
            self._protocol.loop.call_later(LINGER_S, self._transport.close)
            return
        self._transport.close()


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with the guards of the module docstring; `guarded_h11`
    makes the subclass that carries one service's settings."""

    cap = 512
    header_timeout = 10.0
    metrics = Metrics()
    refusal = _refusal()
    waiting_since = 0.0
    served = 0  # responses completed on this connection
    half_closed = False  # the client sent its end of stream after a whole request
    _timer = None

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(_Lingering(transport, self))
        if len(self.connections) > self.cap and not self._evict_one():
            self.metrics.connections_closed["refused"] += 1
            log.warning("connection limit (%d) reached: refused a connection", self.cap)
            transport.write(self.refusal)
            transport.close()
            return
        self._await_headers(None)

    def data_received(self, data: bytes) -> None:
        if not self.transport.lingering:  # a lingering close drops what still arrives
            super().data_received(data)

    def connection_lost(self, exc) -> None:
        if self._timer is not None:
            self._timer.cancel()
        super().connection_lost(exc)

    def eof_received(self) -> bool | None:
        """The client has stopped sending. One that half-closes after a whole request
        (HTTP/1.0 clients do) still gets its answer: the connection stays open for it
        and closes once it is sent. Otherwise (no request, or its body cut short) the
        connection closes, as a client gone."""
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete and not cycle.more_body:
            self.half_closed = True
            return True
        return None

    def on_response_complete(self) -> None:
        completed = self.cycle
        self.served += 1
        super().on_response_complete()
        if self.half_closed and not self.transport.is_closing():
            self.transport.close()  # nothing more can come from this client
        elif self.cycle is completed and not self.transport.is_closing():
            self._await_headers(completed)  # keep-alive: the next request's headers

    def shutdown(self) -> None:
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete and cycle.more_body:
            self.transport.close()  # its body is still arriving: do not wait for it
            return
        super().shutdown()

    def awaiting_headers(self) -> bool:
        """No request in progress: connected or kept alive, headers not complete."""
        idle = self.cycle is None or self.cycle.response_complete
        return idle and self.conn.their_state is h11.IDLE

    def _await_headers(self, cycle) -> None:
        """Close the connection unless a request newer than `cycle` has its headers in
        `header_timeout` seconds."""
        self.waiting_since = time.monotonic()
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.loop.call_later(self.header_timeout, self._header_deadline, cycle)

    def _header_deadline(self, cycle) -> None:
        if self.cycle is cycle and not self.transport.is_closing():
            self.metrics.connections_closed["header_timeout"] += 1
            self.transport.close()

    def _evict_one(self) -> bool:
        """Close a connection waiting for request headers, if any: one that has never
        completed a request first (slow clients never do), the longest waiting first."""
        waiting = [
            p
            for p in self.connections
            if p is not self and isinstance(p, GuardedH11) and p.awaiting_headers()
        ]
        if not waiting:
            return False
        oldest = min(waiting, key=lambda p: (p.served > 0, p.waiting_since))
        self.connections.discard(oldest)
        oldest.transport.close()
        self.metrics.connections_closed["evicted"] += 1
        return True


def guarded_h11(config: ServeConfig, metrics: Metrics) -> type[GuardedH11]:
    """`GuardedH11` for one service: its connection cap, header deadline and metrics."""
    settings = {
        "cap": connection_limits(config.max_connections)[0],
        "header_timeout": config.header_timeout_s,
        "metrics": metrics,
    }
    return type("GuardedH11", (GuardedH11,), settings)


@dataclass(frozen=True)
class Drain:
    """What a shutdown did with the requests in flight when it began."""

    finished: int = 0
    """Requests answered during the drain."""
    cut_off: int = 0
    """Requests still running when the drain gave up (past `shutdown_timeout_s`, or at a
    second Ctrl-C): cancelled; their clients get 503 `shutting_down`, or a dropped
    connection when their answer had begun."""
    closed: int = 0
    """Requests closed unanswered: their client left, or their body was still arriving."""
    seconds: float = 0.0
    """From the start of the shutdown to its end (batcher and prepare workers closed)."""
    signal: int | None = None
    """The signal that asked for the shutdown (None: asked from within the process)."""

    @property
    def exit_status(self) -> int:
        """0 after a clean drain; with requests cut off, the status of a process the
        signal ended (128 + its number: 143 for SIGTERM, 130 for SIGINT)."""
        return 128 + (self.signal or signal.SIGTERM) if self.cut_off else 0

    def summary(self) -> str:
        """The shutdown's log line."""
        line = (
            f"shutdown drained in {self.seconds:.2f} s: {self.finished} request(s) finished, "
            f"{self.cut_off} cut off"
        )
        if self.closed:
            line += f", {self.closed} closed unanswered (client gone or body still arriving)"
        return line


CUT_OFF = "the service shut down before this request was answered; retry"


async def _answer_cut_off(scope, send) -> None:
    """503 `shutting_down` for a request the drain cut off before its answer began."""
    rid = scope.get("state", {}).get("request_id")
    body = {"error": "shutting_down", "message": CUT_OFF, "field": None, "request_id": rid}
    data = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
        (b"retry-after", b"1"),
        (b"connection", b"close"),
        *([(b"x-request-id", rid.encode())] if rid else []),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": data})


class DrainCounter:
    """ASGI middleware around the whole app: counts the requests in flight and, once a
    shutdown has begun (`draining`), how each ends: answered, closed unanswered, or cut
    off. A request cut off before its answer began gets 503 `shutting_down`; none logs a
    traceback, as a cut-off is no error of the service."""

    def __init__(self, app) -> None:
        self.app = app
        self.draining = False
        self.in_flight = self.finished = self.closed = self.cancelled = 0

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = answered = False

        async def send_counted(message) -> None:
            nonlocal started, answered
            await send(message)
            started = True
            body = message["type"] == "http.response.body"
            answered = answered or (body and not message.get("more_body", False))

        self.in_flight += 1
        try:
            await self.app(scope, receive, send_counted)
        except asyncio.CancelledError:
            if not self.draining:  # the event loop itself is ending: leave it to end
                raise
            self.cancelled += 1
            if not started:
                await _answer_cut_off(scope, send)
        else:
            if self.draining:
                self.finished += answered
                self.closed += not answered
        finally:
            self.in_flight -= 1


class DrainingServer(uvicorn.Server):
    """uvicorn's server that drains on SIGINT/SIGTERM and returns (the module docstring);
    `drain` holds what the drain did once `run` has returned."""

    def __init__(self, config: uvicorn.Config) -> None:
        self.requests = DrainCounter(config.app)
        config.app = self.requests
        super().__init__(config)
        self.drain: Drain | None = None
        self.stopped_by: int | None = None

    def handle_exit(self, sig: int, frame) -> None:
        super().handle_exit(sig, frame)
        self.stopped_by = self.stopped_by or sig
        # uvicorn raises the signals it caught again once it has shut down, which ends
        # the process by the signal (status 143 for SIGTERM) even after a clean drain:
        # the caller takes the status from `drain` instead.
        getattr(self, "_captured_signals", []).clear()

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets)
        if sockets and self.started:  # uvicorn names the address only of a socket it bound
            host, port = sockets[0].getsockname()[:2]
            logging.getLogger("uvicorn.error").info(
                "Uvicorn running on http://%s:%d (Press CTRL+C to quit)",
                f"[{host}]" if ":" in host else host,
                port,
            )

    async def shutdown(self, sockets=None) -> None:
        start = time.monotonic()
        self.requests.draining = True
        await super().shutdown(sockets)
        counts = self.requests
        counts.draining = False  # a request cancelled from here on is still in flight
        self.drain = Drain(
            finished=counts.finished,
            cut_off=counts.cancelled + counts.in_flight,
            closed=counts.closed,
            seconds=time.monotonic() - start,
            signal=self.stopped_by,
        )
        (log.warning if self.drain.cut_off else log.info)("%s", self.drain.summary())


LOG_BURST = 10
"""Messages of one kind logged in a burst before the rate limit applies."""
LOG_EVERY_S = 6.0
"""Past the burst, at most one message of a kind per this many seconds."""


class LogLimiter(logging.Filter):
    """A token bucket per kind of message (logger, message template, exception type):
    a flood of one kind is cut to `burst` messages, then one per `every_s` seconds, and
    the next message let through says how many similar ones were suppressed."""

    MAX_KINDS = 1024

    def __init__(self, burst: int = LOG_BURST, every_s: float = LOG_EVERY_S) -> None:
        super().__init__()
        self.burst, self.every_s = burst, every_s
        self._lock = threading.Lock()  # handlers may log from any thread
        self._buckets: dict[tuple, list[float]] = {}  # kind -> [tokens, last, suppressed]

    def filter(self, record: logging.LogRecord) -> bool:
        # the first line names the kind; later ones (asyncio's context) vary per message
        first = str(record.msg).partition("\n")[0][:200]
        kind = (record.name, first, record.exc_info and record.exc_info[0])
        now = time.monotonic()
        with self._lock:
            bucket = self._buckets.get(kind)
            if bucket is None:
                if len(self._buckets) >= self.MAX_KINDS:  # forget the longest-quiet kind
                    del self._buckets[min(self._buckets, key=lambda k: self._buckets[k][1])]
                bucket = self._buckets[kind] = [float(self.burst), now, 0]
            bucket[0] = min(self.burst, bucket[0] + (now - bucket[1]) / self.every_s)
            bucket[1] = now
            if bucket[0] < 1:
                bucket[2] += 1
                return False
            bucket[0] -= 1
            suppressed, bucket[2] = int(bucket[2]), 0
        if suppressed:
            record.msg = f"{record.getMessage()} (suppressed {suppressed} similar messages)"
            record.args = None
        return True

    def reset(self) -> None:
        """Forget every kind: the next message of each starts a full burst."""
        with self._lock:
            self._buckets.clear()


LIMITED_LOGGERS = ("orchrm.serve", "uvicorn.error", "asyncio")
_LIMITER = LogLimiter()


def limit_logs() -> None:
    """Put the rate limit on the loggers a hostile client can make speak (idempotent)."""
    for name in LIMITED_LOGGERS:
        logger = logging.getLogger(name)
        if _LIMITER not in logger.filters:
            logger.addFilter(_LIMITER)

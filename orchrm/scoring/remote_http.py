"""JSON over HTTP to a reward server: persistent connections, retries, timeouts, and
errors that say which server and what went wrong.

Standard library only (a scoring client should stay light). Each thread keeps one
keep-alive connection per server. Transient failures are retried with exponential
backoff: a connection reset or dropped mid-answer, and HTTP 429, 502, 503 and 504 (a
`Retry-After` header, in seconds or as a date, replaces the backoff, capped by
`max_backoff_s`). A connection the server closed while idle is reopened at once, without
counting as a try. A refused connection, an unknown host, a timeout and any other HTTP
error are not retried: they raise `ModelError` at once, naming the URL.
"""

from __future__ import annotations

import datetime
import http.client
import json
import socket
import threading
import time
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

from orchrm.errors import OrchrmError
from orchrm.runtime.retry import RetryPolicy

TRANSIENT_STATUS = (429, 502, 503, 504)
"""HTTP statuses that mean "busy or restarting, try again"."""
_DROPPED = (
    ConnectionResetError,
    BrokenPipeError,
    ConnectionAbortedError,
    http.client.HTTPException,
)
"""What a connection that went away mid-request raises (`RemoteDisconnected` is both a
`ConnectionResetError` and an `HTTPException`)."""


class RemoteError(OrchrmError):
    """A reward server cannot be reached, refused a request or answered something a
    reward server does not (the message names the URL). An `OrchrmError`, so the command
    line reports it as one line; not an `orchrm.rmodel.files.ModelError`, as no model is
    loaded here. `status` is the HTTP status of a refusal (None when no answer came)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def _retry_after_seconds(value: str | None) -> float | None:
    """The seconds a `Retry-After` header asks for (None: no header, or one unreadable)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # "-0000": UTC by RFC 5322, not this machine's zone
        when = when.replace(tzinfo=datetime.UTC)
    return when.timestamp() - time.time()


class JsonClient:
    """POST and GET JSON with `policy`, sending `Authorization: Bearer api_key` when set.
    Safe to share between threads."""

    def __init__(self, policy: RetryPolicy, api_key: str | None = None):
        self.policy = policy
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self._local = threading.local()

    def post(self, url: str, body: object) -> object:
        """The JSON answer to POST `body` at `url`."""
        return self.request("POST", url, json.dumps(body).encode())

    def get(self, url: str) -> object:
        return self.request("GET", url, None)

    def request(self, method: str, url: str, payload: bytes | None) -> object:
        """The JSON answer, after retrying transient failures (module docstring)."""
        last = ""
        for attempt in range(self.policy.retries + 1):
            try:
                status, headers, data = self._send(method, url, payload)
            except ConnectionRefusedError:
                raise RemoteError(
                    f"cannot reach the reward server at {url}: connection refused"
                ) from None
            except socket.gaierror as err:
                raise RemoteError(f"cannot reach the reward server at {url}: {err}") from None
            except TimeoutError:
                raise RemoteError(
                    f"the reward server at {url} did not answer within "
                    f"{self.policy.timeout_s:g} s (timeout_s)"
                ) from None
            except _DROPPED as err:
                last, retry_after = f"connection lost ({type(err).__name__})", None
            else:
                if status not in TRANSIENT_STATUS:
                    return _answer(url, status, data)
                last, retry_after = f"HTTP {status}", headers.get("retry-after")
            if attempt < self.policy.retries:
                time.sleep(self.policy.wait(attempt, _retry_after_seconds(retry_after)))
        raise RemoteError(
            f"the reward server at {url} failed {self.policy.retries + 1} times; last: {last}"
        )

    def _send(self, method: str, url: str, payload: bytes | None):
        """(status, lower-cased headers, body) of one request on this thread's
        connection; a kept-alive connection the server has closed is reopened once."""
        parts = urlsplit(url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        for reused in (True, False):
            connection, was_open = self._connection(parts)
            try:
                connection.request(method, path, body=payload, headers=self.headers)
                response = connection.getresponse()
                data = response.read()
            except _DROPPED:
                self._drop(parts)
                if reused and was_open:
                    continue  # the server closed an idle keep-alive connection
                raise
            except BaseException:
                self._drop(parts)
                raise
            if response.will_close:
                self._drop(parts)
            return response.status, {k.lower(): v for k, v in response.getheaders()}, data
        raise AssertionError("unreachable")

    def _connection(self, parts) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection to the server of `parts`, and whether it was open."""
        pool = self._local.__dict__.setdefault("pool", {})
        key = (parts.scheme, parts.netloc)
        if key in pool:
            return pool[key], True
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise RemoteError(f"{parts.geturl()!r} is not an http:// or https:// URL")
        https = parts.scheme == "https"
        kind = http.client.HTTPSConnection if https else http.client.HTTPConnection
        pool[key] = kind(parts.hostname, parts.port, timeout=self.policy.timeout_s)
        return pool[key], False

    def _drop(self, parts) -> None:
        connection = self._local.__dict__.get("pool", {}).pop((parts.scheme, parts.netloc), None)
        if connection is not None:
            connection.close()


def _answer(url: str, status: int, data: bytes) -> object:
    """The decoded JSON of a final answer; a `RemoteError` for an HTTP error or a body
    that is not JSON."""
    try:
        value = json.loads(data) if data else None
    except (ValueError, UnicodeDecodeError):
        value = None
        if status < 400:
            raise RemoteError(
                f"the reward server at {url} answered HTTP {status} with a body that is not "
                f"JSON: {data[:120]!r}"
            ) from None
    if status >= 400:
        raise RemoteError(
            f"the reward server at {url} refused the request: HTTP {status}: "
            f"{_error_message(value, data)}",
            status,
        )
    return value


def _error_message(value: object, data: bytes) -> str:
    """The sentence in an error body: orchrm's and vLLM's `message`, OpenAI's
    `error.message`, FastAPI's `detail`, else the body's start."""
    if isinstance(value, dict):
        inner = value.get("error")
        for found in (
            value.get("message"),
            inner.get("message") if isinstance(inner, dict) else None,
        ):
            if isinstance(found, str) and found:
                return found
        if value.get("detail") is not None:
            return str(value["detail"])[:300]
    return data[:300].decode("utf-8", "replace") or "(empty body)"

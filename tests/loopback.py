"""What the stand-in HTTP servers of the tests share: a free loopback port, a request
thread per connection, and a clean stop."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackServer:
    """A context manager serving `handler()` (a request-handler class) on 127.0.0.1 from
    a background thread; `_stopping` is set on exit so slow handlers can wake up."""

    _server: ThreadingHTTPServer | None = None

    def handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    def __enter__(self):
        self._stopping = getattr(self, "_stopping", None) or threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self._server.daemon_threads = True
        # `shutdown()` waits up to one poll interval; the default 0.5 s adds up over a suite.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

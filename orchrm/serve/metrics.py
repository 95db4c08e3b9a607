"""The service's counters and histograms, written in the Prometheus text format (0.0.4).

Only the event loop's thread updates them, so they need no lock.
"""

from __future__ import annotations

from collections import Counter

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class Histogram:
    """Cumulative buckets, sum and count, as Prometheus histograms are."""

    def __init__(self, buckets: tuple[float, ...]):
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.sum += value
        self.count += 1
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1

    def lines(self, name: str, labels: str = "") -> list[str]:
        sep = "," if labels else ""
        out = [
            f'{name}_bucket{{{labels}{sep}le="{_number(b)}"}} {n}'
            for b, n in zip(self.buckets, self.counts, strict=True)
        ]
        out.append(f'{name}_bucket{{{labels}{sep}le="+Inf"}} {self.count}')
        braces = f"{{{labels}}}" if labels else ""
        out += [f"{name}_sum{braces} {_number(self.sum)}", f"{name}_count{braces} {self.count}"]
        return out


class Metrics:
    """Requests by route and status, request latency by route, micro-batch sizes, forward
    time per batch, orchestrations by parse status, requests in flight, client
    disconnects, connections closed by the guards, prepare workers replaced."""

    def __init__(self) -> None:
        self.requests: Counter[tuple[str, int]] = Counter()
        self.latency: dict[str, Histogram] = {}
        self.batch_size = Histogram(BATCH_BUCKETS)
        self.forward_seconds = Histogram(LATENCY_BUCKETS)
        self.items: Counter[str] = Counter()
        self.in_flight = 0
        self.disconnects = 0
        self.connections_closed: Counter[str] = Counter()
        self.worker_restarts = 0

    def request(self, route: str, status: int, seconds: float) -> None:
        self.requests[(route, status)] += 1
        self.latency.setdefault(route, Histogram(LATENCY_BUCKETS)).observe(seconds)

    def batch(self, size: int, seconds: float) -> None:
        self.batch_size.observe(size)
        self.forward_seconds.observe(seconds)

    def render(self) -> str:
        out = [
            "# HELP orchrm_requests_total HTTP requests by route and status code.",
            "# TYPE orchrm_requests_total counter",
        ]
        for (route, status), n in sorted(self.requests.items()):
            out.append(f'orchrm_requests_total{{route="{route}",status="{status}"}} {n}')
        out += [
            "# HELP orchrm_request_duration_seconds Time from request to response, by route.",
            "# TYPE orchrm_request_duration_seconds histogram",
        ]
        for route, hist in sorted(self.latency.items()):
            out += hist.lines("orchrm_request_duration_seconds", f'route="{route}"')
        return "\n".join(out + self._service_lines()) + "\n"

    def _service_lines(self) -> list[str]:
        out = [
            "# HELP orchrm_batch_size Orchestrations scored together in one forward pass.",
            "# TYPE orchrm_batch_size histogram",
            *self.batch_size.lines("orchrm_batch_size"),
            "# HELP orchrm_batch_seconds Time of one micro-batch: tokenize and forward.",
            "# TYPE orchrm_batch_seconds histogram",
            *self.forward_seconds.lines("orchrm_batch_seconds"),
            "# HELP orchrm_orchestrations_total Orchestrations scored, by parse status.",
            "# TYPE orchrm_orchestrations_total counter",
        ]
        for status in ("ok", "invalid", "unparseable"):
            out.append(f'orchrm_orchestrations_total{{status="{status}"}} {self.items[status]}')
        out += [
            "# HELP orchrm_requests_in_flight Requests received and not yet answered.",
            "# TYPE orchrm_requests_in_flight gauge",
            f"orchrm_requests_in_flight {self.in_flight}",
            "# HELP orchrm_client_disconnects_total Requests whose client left before the "
            "answer (not counted in orchrm_requests_total).",
            "# TYPE orchrm_client_disconnects_total counter",
            f"orchrm_client_disconnects_total {self.disconnects}",
            "# HELP orchrm_connections_closed_total Connections the service closed, by reason.",
            "# TYPE orchrm_connections_closed_total counter",
        ]
        for reason in ("header_timeout", "evicted", "refused"):
            n = self.connections_closed[reason]
            out.append(f'orchrm_connections_closed_total{{reason="{reason}"}} {n}')
        out += [
            "# HELP orchrm_prepare_worker_restarts_total Prepare workers replaced after a "
            "request ran past its budget or a worker died.",
            "# TYPE orchrm_prepare_worker_restarts_total counter",
            f"orchrm_prepare_worker_restarts_total {self.worker_restarts}",
        ]
        return out


def _number(x: float) -> str:
    return repr(float(x))

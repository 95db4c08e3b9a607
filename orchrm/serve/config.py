"""`ServeConfig`: everything `orchrm serve` can set, with defaults that are safe offline."""

from __future__ import annotations

import ipaddress
import socket
from typing import Literal

from orchrm.configs import config, setting
from orchrm.errors import ConfigError
from orchrm.rmodel.ensemble import AGGREGATES
from orchrm.rmodel.precision import DTYPES

API_KEY_ENV = "ORCHRM_API_KEY"


@config
class ServeConfig:
    """How the reward model is served over HTTP."""

    rm: str = setting("", panel="Model")
    """The reward model directory (`orchrm train`'s `model/`, or any HF reward model)."""
    host: str = setting("127.0.0.1", panel="Server")
    """Address to bind. A non-loopback address needs `api_key`, `allow_clients` or
    `insecure`."""
    port: int = setting(8080, panel="Server")
    """TCP port to listen on (not 8000, where vLLM and SGLang serve the LLM by default)."""
    api_key: str | None = setting(None, panel="Server")
    """Bearer token every route but /healthz requires (`Authorization: Bearer KEY`);
    `orchrm serve` also reads it from the ORCHRM_API_KEY environment variable."""
    allow_clients: tuple[str, ...] = setting((), panel="Server")
    """Networks (10.0.0.0/8, fd00::/8) or addresses (10.1.2.3) of the clients served,
    one per option; any other client gets 403 on every route but /healthz. Lets a
    non-loopback bind serve clients that send no key (OpenRLHF); with `api_key` too, a
    client needs both."""
    insecure: bool = setting(False, panel="Server")
    """Allow a non-loopback bind without an API key or `allow_clients` (anyone who
    reaches it can score)."""
    max_batch_size: int = setting(32, min=1, panel="Scale")
    """Most orchestrations in one forward pass. 1 turns micro-batching off."""
    forward_batch_size: int | None = setting(None, min=1, panel="Scale")
    """Most orchestrations per forward pass inside a micro-batch: the batch is sorted by
    length and cut into passes of this size, so short texts are not padded to the
    longest. None: the whole micro-batch in one pass on CUDA (padding is cheap there),
    passes of 8 on a CPU (where padding costs as much as real tokens)."""
    max_wait_ms: float = setting(5.0, min=0, panel="Scale")
    """How long the first orchestration of a batch waits for others to join it. 0: take
    whatever is already queued, never wait."""
    max_items: int = setting(1024, min=1, panel="Limits")
    """Most orchestrations (or OpenRLHF queries) in one request (422 beyond)."""
    max_text_chars: int = setting(100_000, min=1, panel="Limits")
    """Longest question, orchestration, query or prompt, in characters (422 beyond)."""
    max_body_bytes: int = setting(32 * 1024 * 1024, min=1, panel="Limits")
    """Largest request body (413 beyond, checked before the body is parsed)."""
    invalid_penalty: float = setting(-10.0, panel="Model")
    """The score of an unparseable orchestration (it cannot run). Parsed orchestrations
    that break a graph rule are scored by the model and reported as `invalid`."""
    device: str | None = setting(None, panel="Model")
    """Torch device; None: CUDA when available, else CPU."""
    dtype: Literal[DTYPES] = setting("auto", panel="Model")
    """Precision of the forward passes; auto: bf16 where the hardware runs it fast, else
    fp32 (`orchrm.rmodel.precision`; ORCHRM_BF16 overrides the detection). /healthz says
    which. A client gets this server's scores bit for bit from a local model loaded in
    the same precision and scoring the same batches (docs/remote-scoring.md)."""
    aggregate: Literal[AGGREGATES] | None = setting(None, panel="Model")
    """With an ensemble (`orchrm train --ensemble K`): the score served (mean, min,
    mean_minus_std, or warm: the averaged weights alone, one pass); None: the
    ensemble's own. Answers carry each item's spread beside it (module docstring of
    `orchrm.serve.app`)."""
    spread_weight: float | None = setting(None, min=0.0, panel="Model")
    """With an ensemble: lambda of mean_minus_std; None: the ensemble's own."""
    num_threads: int | None = setting(None, min=1, panel="Scale")
    """CPU threads for PyTorch; None: its default (one per core)."""
    max_request_seconds: float = setting(30.0, above=0.0, panel="Limits")
    """Longest time one request may take from its complete body to its answer: parsing,
    rendering, waiting for and running its forward passes. Past it the request gets 503
    `over_budget` and its work still queued is dropped."""
    prepare_workers: int = setting(2, min=1, panel="Scale")
    """Worker processes that decode, check, parse and render request bodies, off the
    event loop and apart from the scoring thread. One whose request runs past
    `max_request_seconds` is killed and replaced."""
    max_queued_requests: int = setting(2048, min=1, panel="Limits")
    """Requests that may wait for a free prepare worker; past it a request gets 503
    `overloaded` at once. As many as `max_connections`, so that a burst of single-sample
    requests (OpenRLHF sends a rollout's samples at once) waits rather than fails."""
    header_timeout_s: float = setting(10.0, above=0.0, panel="Timeouts")
    """How long a connection may take to send a request's headers, from connecting or
    from its previous response; then it is closed."""
    body_timeout_s: float = setting(30.0, above=0.0, panel="Timeouts")
    """How long a request's body may take to arrive once its headers have (408
    `body_timeout` beyond, and the connection is closed)."""
    keep_alive_timeout_s: float = setting(5.0, above=0.0, panel="Timeouts")
    """How long an idle keep-alive connection stays open."""
    max_connections: int = setting(2048, min=1, panel="Limits")
    """Most connections open at once (lowered to stay below the process's descriptor
    limit, `ulimit -n`); a burst of single-sample requests holds one per sample. At the
    limit a connection still waiting for request headers is closed to make room, one
    that never completed a request first, then the longest waiting; with none, a new
    connection gets 503 and is closed."""
    shutdown_timeout_s: float = setting(30.0, above=0.0, panel="Timeouts")
    """On SIGTERM/SIGINT, how long in-flight requests may take to finish; requests whose
    body is still arriving are closed at once."""
    openapi: bool = setting(False, panel="Server")
    """Serve the OpenAPI schema and its pages (/openapi.json, /docs, /redoc)."""

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ConfigError for a client network that is none and for an open bind
        without a key (before any model is loaded)."""
        networks = client_networks(self.allow_clients)
        if not (self.api_key or networks or self.insecure or is_loopback(self.host)):
            raise ConfigError(
                f"refusing to bind {self.host!r} without an API key: anyone who can reach "
                f"it could use the model. Set --api-key (or {API_KEY_ENV}), bind "
                "127.0.0.1, name the clients to serve with --allow-clients NETWORK, or "
                "pass --insecure"
            )


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def client_networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    """The networks `allow_clients` names (an address is a network of one); ConfigError
    naming the first entry that is neither."""
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry.strip()))
        except ValueError as err:
            raise ConfigError(
                f"allow_clients: {entry!r} is not a network or address such as "
                f"10.0.0.0/8, 10.1.2.3 or fd00::/8 ({err})"
            ) from None
    return tuple(networks)


def is_allowed(client: str | None, networks: tuple[Network, ...]) -> bool:
    """Whether the client address `client` lies in one of `networks` (an IPv4 client
    seen through an IPv6 socket, ::ffff:10.1.2.3, as its IPv4 address)."""
    try:
        address = ipaddress.ip_address(client or "")
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in networks)


def is_loopback(host: str) -> bool:
    """Whether every address `host` names is a loopback address ('' and 0.0.0.0 are not:
    they bind every interface)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)

"""`orchrm serve`: the HTTP scoring service (the command-line face of `orchrm.serve.app.serve`)."""

from __future__ import annotations

from pathlib import Path

import typer

from orchrm.serve.config import API_KEY_ENV, ServeConfig

_DEFAULTS = ServeConfig()


def serve_command(
    rm: Path = typer.Option(..., "--rm", help="A reward model directory (orchrm train's model/)."),
    host: str = typer.Option(_DEFAULTS.host, "--host", help="Non-loopback needs --api-key."),
    port: int = typer.Option(_DEFAULTS.port, "--port"),
    api_key: str = typer.Option(
        None,
        "--api-key",
        envvar=API_KEY_ENV,
        show_default=False,
        help="Bearer token required on every route but /healthz.",
    ),
    insecure: bool = typer.Option(
        False, "--insecure", help="Allow a non-loopback bind without --api-key."
    ),
    max_batch_size: int = typer.Option(
        _DEFAULTS.max_batch_size, "--max-batch-size", min=1, help="1: no micro-batching."
    ),
    forward_batch_size: int = typer.Option(
        None,
        "--forward-batch-size",
        min=1,
        help="Orchestrations per forward pass (length-sorted); default 8 on CPU, all on CUDA.",
    ),
    max_wait_ms: float = typer.Option(
        _DEFAULTS.max_wait_ms, "--max-wait-ms", min=0, help="How long a batch waits to fill."
    ),
    max_items: int = typer.Option(_DEFAULTS.max_items, "--max-items", min=1),
    max_text_chars: int = typer.Option(_DEFAULTS.max_text_chars, "--max-text-chars", min=1),
    max_body_bytes: int = typer.Option(_DEFAULTS.max_body_bytes, "--max-body-bytes", min=1),
    invalid_penalty: float = typer.Option(
        _DEFAULTS.invalid_penalty, "--invalid-penalty", help="Score of unparseable output."
    ),
    device: str = typer.Option(None, "--device", help="Default: CUDA when available."),
    threads: int = typer.Option(None, "--threads", min=1, help="PyTorch CPU threads."),
    max_request_seconds: float = typer.Option(
        _DEFAULTS.max_request_seconds,
        "--max-request-seconds",
        help="Budget of one request from its body to its answer (503 over_budget beyond).",
    ),
    prepare_workers: int = typer.Option(
        _DEFAULTS.prepare_workers,
        "--prepare-workers",
        min=1,
        help="Processes that parse and render requests off the event loop.",
    ),
    max_queued_requests: int = typer.Option(
        _DEFAULTS.max_queued_requests,
        "--max-queued-requests",
        min=1,
        help="Requests waiting for a prepare worker (503 overloaded beyond).",
    ),
    header_timeout: float = typer.Option(
        _DEFAULTS.header_timeout_s, "--header-timeout", help="Seconds to send request headers."
    ),
    body_timeout: float = typer.Option(
        _DEFAULTS.body_timeout_s, "--body-timeout", help="Seconds to send a body (408 beyond)."
    ),
    keep_alive_timeout: float = typer.Option(
        _DEFAULTS.keep_alive_timeout_s, "--keep-alive-timeout", help="Idle keep-alive seconds."
    ),
    max_connections: int = typer.Option(
        _DEFAULTS.max_connections, "--max-connections", min=1, help="Open connections at most."
    ),
    shutdown_timeout: float = typer.Option(
        _DEFAULTS.shutdown_timeout_s,
        "--shutdown-timeout",
        help="Seconds in-flight requests get to finish on SIGTERM.",
    ),
    openapi: bool = typer.Option(False, "--openapi", help="Serve /openapi.json, /docs and /redoc."),
) -> None:
    """Serve a reward model over HTTP: /score, /select, OpenRLHF's /get_reward, /healthz,
    /metrics, with micro-batching of concurrent requests."""
    config = ServeConfig(
        rm=str(rm),
        host=host,
        port=port,
        api_key=api_key or None,
        insecure=insecure,
        max_batch_size=max_batch_size,
        forward_batch_size=forward_batch_size,
        max_wait_ms=max_wait_ms,
        max_items=max_items,
        max_text_chars=max_text_chars,
        max_body_bytes=max_body_bytes,
        invalid_penalty=invalid_penalty,
        device=device,
        num_threads=threads,
        max_request_seconds=max_request_seconds,
        prepare_workers=prepare_workers,
        max_queued_requests=max_queued_requests,
        header_timeout_s=header_timeout,
        body_timeout_s=body_timeout,
        keep_alive_timeout_s=keep_alive_timeout,
        max_connections=max_connections,
        shutdown_timeout_s=shutdown_timeout,
        openapi=openapi,
    )
    try:
        config.check()
    except ValueError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    from orchrm.rm.model import ModelError
    from orchrm.serve.app import serve

    try:
        serve(config)
    except ModelError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None

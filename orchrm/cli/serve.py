"""`orchrm serve`: the HTTP scoring service (the command-line face of `orchrm.serve.app.serve`);
`orchrm serve-llm`: a GGUF served by llama.cpp on loopback (`orchrm.runtime.local_llm`)."""

from __future__ import annotations

from dataclasses import replace

import typer

from orchrm.cli.options import config_options
from orchrm.runtime.local_llm import ServeLLMConfig
from orchrm.serve.config import API_KEY_ENV, ServeConfig


@config_options(
    ServeConfig,
    required=["rm"],
    flags={
        "num_threads": "--threads",
        "header_timeout_s": "--header-timeout",
        "body_timeout_s": "--body-timeout",
        "keep_alive_timeout_s": "--keep-alive-timeout",
        "shutdown_timeout_s": "--shutdown-timeout",
    },
    settings={"api_key": {"envvar": API_KEY_ENV, "show_default": False}},
)
def serve_command(config: ServeConfig) -> None:
    """Serve a reward model over HTTP: /score, /select, OpenRLHF's /get_reward, vLLM's
    /classify and /pooling, /healthz, /metrics, with micro-batching of concurrent
    requests. The settings, the model's files and the port are checked before the model
    loads (a port in use: exit status 5). SIGTERM or SIGINT drains the requests in
    flight; the exit status is 0 once all are answered, 143 (SIGTERM) or 130 (SIGINT)
    when the shutdown timeout cut some off."""
    # Checked before the model loads: a bad setting costs no loading time.
    config.check()
    from orchrm.serve.app import serve

    drain = serve(replace(config, api_key=config.api_key or None))
    if drain is None:  # it stopped before it served: uvicorn has logged why
        raise typer.Exit(1)
    if drain.exit_status:
        raise typer.Exit(drain.exit_status)


@config_options(ServeLLMConfig, leave_out=["ready_timeout_s"])
def serve_llm_command(config: ServeLLMConfig) -> None:
    """Serve a GGUF model with llama.cpp on 127.0.0.1 (the bundled SmolLM2-135M-Instruct
    without --gguf), with the OpenAI-compatible API at http://127.0.0.1:PORT/v1, until
    Ctrl-C or SIGTERM. Nothing is downloaded. `orchrm run --local` starts one itself."""
    from orchrm.runtime.local_llm import check_server_package, serve_forever

    check_server_package()
    config.model_path()  # a missing file is said before llama.cpp starts
    serve_forever(config)

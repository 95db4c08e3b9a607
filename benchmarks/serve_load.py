"""Load test of `orchrm serve`: C concurrent clients for T seconds on loopback, with
micro-batching on and off, and optionally with hostile clients mixed in.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/serve_load.py [--good 32] [--seconds 60]
        [--rm DIR] [--per-request 1] [--route score|get_reward] [--modes on,off]
        [--threads N] [--slow 100] [--poisoned 1]

For each mode it starts `orchrm serve` as a subprocess on a free loopback port (on:
`--max-batch-size 32 --max-wait-ms 5`; off: `--max-batch-size 1 --max-wait-ms 0`, one
orchestration per forward pass), waits for /healthz, warms up, then runs C asyncio
clients (`--good`), each sending requests back to back over its own keep-alive
connection, for T seconds (`--seconds`). A request is one world question with
`--per-request` orchestrations written by the world's orchestrators (`math` preset; some
are truncated or break a rule, as LLM output does), sent to /score, or to /get_reward as
OpenRLHF queries under a ChatML template. It prints requests/s, orchestrations/s,
p50/p99 latency, errors (any non-200, a wrong answer shape, or a lost connection), the
mean micro-batch size read from the server's /metrics, the bytes the server logged, and
the on/off throughput ratio (`orchrm.experiments.serve_load.loadgen`).

With `--slow` or `--poisoned`, each mode runs twice on fresh servers: `clean` (the good
clients alone) and `mixed` (the same good clients plus the hostile ones), and it prints
the good requests' p99 mixed/clean ratio. A poisoned client sends, back to back, lone
surrogates, huge degenerate orchestrations (100,000 characters of repeated tags,
brackets or newlines), deeply nested JSON, a /get_reward query of 15,000 newlines and
too many items; what the server answered each kind is printed. A slow client opens a
connection and sends a request head (half of them) or a body (the other half) one byte
a second, reconnecting whenever the server closes it. Default model: the offline MiniLM
saved untrained with `save_model` (the speed of a trained one is the same).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Literal

from orchrm.cli.console import csv_values
from orchrm.cli.script import run_script
from orchrm.configs import config, setting
from orchrm.errors import ConfigError, MissingInput
from orchrm.experiments.serve_load.loadgen import (
    LoadSettings,
    default_model,
    report,
    request_bodies,
    run_phase,
)

LOAD = LoadSettings()
"""The load's defaults."""


@config(frozen=True)
class ServeLoadSettings:
    """The load test's options; those of the load default to `LoadSettings`'s."""

    clients: int = setting(LOAD.clients, min=1)
    """Good clients, each with one request in flight at a time."""
    seconds: float = setting(LOAD.seconds, min=0.0)
    """Measured seconds of load."""
    rm: str | None = None
    """A reward model dir (default: the untrained MiniLM)."""
    per_request: int = setting(LOAD.per_request, min=1)
    """Orchestrations a request."""
    route: Literal["score", "get_reward"] = LOAD.route
    """The route the requests go to."""
    modes: tuple[Literal["on", "off"], ...] = ("on", "off")
    """Micro-batching on, off, or both in turn, comma-separated."""
    threads: int | None = setting(LOAD.threads, min=1)
    """The server's PyTorch CPU threads (default: its own)."""
    warmup: float = setting(LOAD.warmup, min=0.0)
    """Unmeasured seconds of the same load first."""
    slow: int = setting(LOAD.slow, min=0)
    """Slow clients in the mixed run."""
    poisoned: int = setting(LOAD.poisoned, min=0)
    """Poisoned clients in the mixed run."""

    def __post_init__(self) -> None:
        if not self.modes:
            raise ConfigError("--modes names no mode (on, off)")


def main(args: ServeLoadSettings) -> None:
    """Run each mode's phases and print their table."""
    if args.rm and not Path(args.rm).is_dir():
        raise MissingInput(f"--rm {args.rm}: no such reward model folder")
    load = LoadSettings(
        clients=args.clients,
        seconds=args.seconds,
        route=args.route,
        per_request=args.per_request,
        warmup=args.warmup,
        threads=args.threads,
        slow=args.slow,
        poisoned=args.poisoned,
    )
    bodies = request_bodies(load.route, load.per_request)
    phases = ("clean", "mixed") if load.slow or load.poisoned else ("clean",)
    with tempfile.TemporaryDirectory() as tmp:
        rm = args.rm or default_model(Path(tmp))
        print(
            f"{load.clients} good clients x {load.seconds:g} s, {load.per_request} "
            f"orchestration(s) per /{load.route} request, model {rm}, {os.cpu_count()} CPUs; "
            f"mixed run: {load.slow} slow, {load.poisoned} poisoned clients",
            flush=True,
        )
        rows = [run_phase(m, ph, load, rm, bodies) for m in args.modes for ph in phases]
    print(report(rows))


if __name__ == "__main__":
    modes = {"parser": csv_values, "spell": ",".join}
    run_script(
        ServeLoadSettings, main, doc=__doc__, flags={"clients": "--good"}, settings={"modes": modes}
    )

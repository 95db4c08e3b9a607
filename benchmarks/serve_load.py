"""Load test of `orchrm serve`: C concurrent clients for T seconds on loopback, with
micro-batching on and off, and optionally with hostile clients mixed in.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/serve_load.py [-C|--good 32] [-T 60]
        [--rm DIR] [--per-request 1] [--route score|get_reward] [--modes on,off]
        [--threads N] [--slow 100] [--poisoned 1]

For each mode it starts `orchrm serve` as a subprocess on a free loopback port (on:
`--max-batch-size 32 --max-wait-ms 5`; off: `--max-batch-size 1 --max-wait-ms 0`, one
orchestration per forward pass), waits for /healthz, warms up, then runs C asyncio
clients, each sending requests back to back over its own keep-alive connection, for T
seconds. A request is one world question with `--per-request` orchestrations written by
the world's orchestrators (`math` preset; some are truncated or break a rule, as LLM
output does), sent to /score, or to /get_reward as OpenRLHF queries under a ChatML
template. It prints requests/s, orchestrations/s, p50/p99 latency, errors (any non-200,
a wrong answer shape, or a lost connection), the mean micro-batch size read from the
server's /metrics, the bytes the server logged, and the on/off throughput ratio
(`orchrm.experiments.serve_load.loadgen`).

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

import argparse
import os
import tempfile
from pathlib import Path

from orchrm.experiments.serve_load.loadgen import (
    LoadSettings,
    default_model,
    report,
    request_bodies,
    run_phase,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-C", "--clients", "--good", dest="clients", type=int, default=32)
    parser.add_argument("-T", "--seconds", type=float, default=60.0)
    parser.add_argument("--rm", type=Path, help="A reward model dir (default: untrained MiniLM).")
    parser.add_argument("--per-request", type=int, default=1, help="Orchestrations a request.")
    parser.add_argument("--route", choices=("score", "get_reward"), default="score")
    parser.add_argument("--modes", default="on,off", help="Comma-separated: on, off.")
    parser.add_argument("--threads", type=int, help="The server's PyTorch CPU threads.")
    parser.add_argument("--warmup", type=float, default=3.0, help="Unmeasured seconds first.")
    parser.add_argument("--slow", type=int, default=0, help="Slow clients in the mixed run.")
    parser.add_argument("--poisoned", type=int, default=0, help="Poisoned clients, mixed run.")
    args = parser.parse_args()
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
        rows = [run_phase(m, ph, load, rm, bodies) for m in args.modes.split(",") for ph in phases]
    print(report(rows))


if __name__ == "__main__":
    main()

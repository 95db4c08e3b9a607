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
server's /metrics, the bytes the server logged, and the on/off throughput ratio.

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
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

MODES = {"on": (32, 5.0), "off": (1, 0.0)}


def default_model(folder: Path) -> Path:
    """The offline MiniLM as an (untrained) orchrm reward model, max_length 256 as
    `orchrm train` writes by default."""
    from orchrm.scoring.backbone import default_backbone, load_backbone
    from orchrm.training.build import save_model

    model, tokenizer = load_backbone(default_backbone())
    return save_model(model, tokenizer, folder / "model", {"max_length": 256})


def request_bodies(route: str, per_request: int, n: int = 64) -> list[bytes]:
    """`n` request bodies of `per_request` world orchestrations each."""
    from orchrm.runtime.prompts import orchestrator
    from orchrm.world.orchestrators import orchestrators
    from orchrm.world.tasks import generate_tasks

    writers = list(orchestrators(0).values())
    bodies = []
    for i, task in enumerate(generate_tasks("math", n, seed=0)):
        texts = [writers[(i + k) % 2].write(task, k)[0] for k in range(per_request)]
        if route == "score":
            bodies.append({"question": task.question, "orchestrations": texts})
            continue
        system, user = orchestrator(task.question, "high")
        prompt = (
            f"<|im_start|>system\n{system['content']}<|im_end|>\n"
            f"<|im_start|>user\n{user['content']}<|im_end|>\n<|im_start|>assistant\n"
        )
        queries = [prompt + t + "<|im_end|>" for t in texts]
        bodies.append(
            {"query": queries, "prompts": [prompt] * per_request, "labels": [""] * per_request}
        )
    return [json.dumps(b).encode() for b in bodies]


class Client:
    """One keep-alive HTTP/1.1 connection, requests sent one after another."""

    def __init__(self, port: int, path: str):
        self.port, self.path = port, path
        self.reader = self.writer = None

    async def post(self, body: bytes, path: str | None = None) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        head = (
            f"POST {path or self.path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode() + body)
        await self.writer.drain()
        status_line = await self.reader.readline()
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        if not status_line:
            raise ConnectionError("connection closed")
        return int(status_line.split()[1]), await self.reader.readexactly(length)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def hostile_bodies(max_text_chars: int = 100_000) -> list[tuple[str, str, bytes]]:
    """(kind, path, body) of what a poisoned client sends, each kind once per round."""
    n = max_text_chars
    text = {
        "surrogate": {"question": "q", "orchestrations": ["<agent>\ud800</agent>"]},
        "surrogate_question": {"question": "x\udfff", "orchestrations": ["<answer>1</answer>"]},
        "repeated_tags": {"question": "q", "orchestrations": ["<agent>" * (n // 7)]},
        "unclosed_tags": {"question": "q", "orchestrations": ["<agent><agent_id>a" * (n // 18)]},
        "nested_brackets": {"question": "q", "orchestrations": ["[{(" * (n // 3)]},
        "newlines": {"question": "\n" * n, "orchestrations": ["\n" * n]},
        "too_many_items": {"question": "q", "orchestrations": ["<answer>1</answer>"] * 5000},
    }
    bodies = [(kind, "/score", json.dumps(b).encode()) for kind, b in text.items()]
    bodies.append(("deep_json", "/score", b'{"question": ' + b"[" * n + b"]" * n + b"}"))
    reward = {"query": ["\n" * 15_000, "Task:\n" + "\n" * 15_000 + "<agent>"]}
    bodies.append(("newline_query", "/get_reward", json.dumps(reward).encode()))
    return bodies


async def poisoned_client(port: int, end: float, tally: Counter) -> None:
    """Send `hostile_bodies` round after round until `end`; tally (kind, status)."""
    bodies, conn = hostile_bodies(), Client(port, "/score")
    while time.perf_counter() < end:
        for kind, path, body in bodies:
            try:
                status, _ = await conn.post(body, path)
                tally[(kind, status)] += 1
                if status != 200:
                    conn.close()  # the server may close after a refusal
            except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError):
                tally[(kind, "closed")] += 1
                conn.close()
    conn.close()


async def slow_client(port: int, end: float, body_phase: bool, tally: Counter) -> None:
    """A request head (or, `body_phase`, a body) one byte a second, reconnecting each
    time the server closes the connection, until `end`."""
    head = b"POST /score HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    while time.perf_counter() < end:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            tally["connect_failed"] += 1
            await asyncio.sleep(1)
            continue
        closed = asyncio.ensure_future(reader.read())  # resolves when the server closes
        if body_phase:
            writer.write(head + b"Content-Length: 100000\r\n\r\n")
        data = b'{"question": "' + b"x" * 100_000 if body_phase else head + b"X-Pad: " * 10_000
        try:
            for byte in data:
                if closed.done() or time.perf_counter() >= end:
                    break
                writer.write(bytes([byte]))
                await asyncio.wait([closed], timeout=1.0)
        except (OSError, ConnectionError):
            pass
        if closed.done():
            tally["closed_by_server"] += 1
        closed.cancel()
        writer.close()


async def load(
    port: int, route: str, bodies: list[bytes], per_request: int, clients: int, seconds: float
) -> dict:
    """Run `clients` clients for `seconds`; latencies of the requests that succeeded."""
    latencies: list[float] = []
    errors = 0
    key = "results" if route == "score" else "rewards"
    end = time.perf_counter() + seconds

    async def client(c: int) -> None:
        nonlocal errors
        conn, i = Client(port, f"/{route}"), c
        while time.perf_counter() < end:
            body = bodies[i % len(bodies)]
            i += clients
            start = time.perf_counter()
            try:
                status, answer = await conn.post(body)
                ok = status == 200 and len(json.loads(answer)[key]) == per_request
            except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError):
                conn.close()
                ok = False
            if ok:
                latencies.append(time.perf_counter() - start)
            else:
                errors += 1
        conn.close()

    start = time.perf_counter()
    await asyncio.gather(*(client(c) for c in range(clients)))
    return {"latencies": latencies, "errors": errors, "wall": time.perf_counter() - start}


async def mixed_load(port: int, args, bodies: list[bytes], *, slow: int, poisoned: int) -> dict:
    """`load` with `slow` slow and `poisoned` poisoned clients running alongside."""
    tally: Counter = Counter()
    end = time.perf_counter() + args.seconds
    hostile = [slow_client(port, end, i % 2 == 1, tally) for i in range(slow)]
    hostile += [poisoned_client(port, end, tally) for _ in range(poisoned)]
    tasks = [asyncio.ensure_future(h) for h in hostile]
    await asyncio.sleep(min(1.0, args.seconds / 10))  # the slow ones are connected first
    result = await load(
        port, args.route, bodies, args.per_request, args.clients, end - time.perf_counter()
    )
    await asyncio.wait(tasks, timeout=5)
    for t in tasks:
        t.cancel()
    return result | {"tally": tally}


def server_stats(port: int) -> dict[str, float]:
    """The server's /metrics samples without labels, and the labelled ones by full name."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    lines = (line.rsplit(" ", 1) for line in text.splitlines() if line and line[0] != "#")
    return {name: float(value) for name, value in lines}


def orchrm_command() -> list[str]:
    """The installed `orchrm` command beside this Python, else `python -m orchrm` (orchrm
    on the path without its console script, as on a machine that reads it from a
    checkout)."""
    script = Path(sys.executable).with_name("orchrm")
    return [str(script)] if script.exists() else [sys.executable, "-m", "orchrm"]


def start_server(args, rm: Path, mode: str, log) -> tuple[subprocess.Popen, int]:
    """`orchrm serve` for `mode` on a free port, once /healthz answers."""
    batch, wait = MODES[mode]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [*orchrm_command(), "serve", "--rm", str(rm)]
    command += ["--port", str(port), "--max-batch-size", str(batch), "--max-wait-ms", str(wait)]
    command += ["--max-items", str(max(args.per_request, 1024))]
    if args.threads:
        command += ["--threads", str(args.threads)]
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while True:
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"`{' '.join(command)}` did not start")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5)
            return server, port
        except OSError:
            time.sleep(0.3)


def run_phase(mode: str, phase: str, args, rm: Path, bodies: list[bytes]) -> dict:
    """One server, warmed up, under the good clients alone (`clean`) or with the hostile
    ones (`mixed`)."""
    hostile = {"slow": args.slow, "poisoned": args.poisoned} if phase == "mixed" else {}
    with tempfile.TemporaryFile() as log:
        server, port = start_server(args, rm, mode, log)
        try:
            asyncio.run(load(port, args.route, bodies, args.per_request, args.clients, args.warmup))
            before = server_stats(port)
            loads = os.getloadavg()[0]
            if hostile:
                result = asyncio.run(mixed_load(port, args, bodies, **hostile))
            else:
                result = asyncio.run(
                    load(port, args.route, bodies, args.per_request, args.clients, args.seconds)
                )
            after = server_stats(port)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(60)
        log_bytes = log.seek(0, os.SEEK_END)
    return summary(mode, phase, args, result, before, after) | {
        "load_1m": loads,
        "log_kb": log_bytes / 1024,
        "tally": result.get("tally", Counter()),
        "restarts": after.get("orchrm_prepare_worker_restarts_total", 0.0),
    }


def summary(mode: str, phase: str, args, result: dict, before: dict, after: dict) -> dict:
    """A table row: throughput, good-request latency and errors, mean micro-batch."""
    lat = sorted(result["latencies"])
    n = len(lat)
    batches = after["orchrm_batch_size_count"] - before["orchrm_batch_size_count"]
    items = after["orchrm_batch_size_sum"] - before["orchrm_batch_size_sum"]
    batch, wait = MODES[mode]
    return {
        "mode": mode,
        "phase": phase,
        "batch": batch,
        "wait_ms": wait,
        "requests": n,
        "req_s": n / result["wall"],
        "orch_s": n * args.per_request / result["wall"],
        "p50_ms": 1000 * lat[n // 2] if n else float("nan"),
        "p99_ms": 1000 * lat[min(n - 1, int(0.99 * n))] if n else float("nan"),
        "errors": result["errors"],
        "mean_batch": items / batches if batches else 0.0,
    }


COLUMNS = (
    "mode",
    "phase",
    "batch",
    "wait_ms",
    "requests",
    "req_s",
    "orch_s",
    "p50_ms",
    "p99_ms",
    "errors",
    "mean_batch",
    "load_1m",
    "log_kb",
)


def report(rows: list[dict]) -> None:
    """The table, then the ratios and what the hostile clients got."""
    print(" ".join(f"{c:>10}" for c in COLUMNS))
    for row in rows:
        cells = (row[c] for c in COLUMNS)
        print(" ".join(f"{v:>10.1f}" if isinstance(v, float) else f"{v:>10}" for v in cells))
    clean = {r["mode"]: r for r in rows if r["phase"] == "clean"}
    for row in rows:
        if row["phase"] != "mixed":
            continue
        base = clean.get(row["mode"])
        if base and base["p99_ms"] > 0:
            ratio = row["p99_ms"] / base["p99_ms"]
            print(
                f"mode {row['mode']}: good p99 mixed/clean {ratio:.2f}x, good errors "
                f"clean {base['errors']} mixed {row['errors']}, prepare workers replaced "
                f"{row['restarts']:g}"
            )
        tally = ", ".join(f"{k}={v}" for k, v in sorted(row["tally"].items(), key=str))
        print(f"mode {row['mode']}: hostile outcomes: {tally}")
    on = [r for r in rows if r["mode"] == "on" and r["phase"] == "clean"]
    off = [r for r in rows if r["mode"] == "off" and r["phase"] == "clean"]
    if on and off and off[0]["req_s"]:
        print(f"throughput on/off: {on[0]['req_s'] / off[0]['req_s']:.2f}x")


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
    bodies = request_bodies(args.route, args.per_request)
    phases = ("clean", "mixed") if args.slow or args.poisoned else ("clean",)
    with tempfile.TemporaryDirectory() as tmp:
        rm = args.rm or default_model(Path(tmp))
        print(
            f"{args.clients} good clients x {args.seconds:g} s, {args.per_request} "
            f"orchestration(s) per /{args.route} request, model {rm}, {os.cpu_count()} CPUs; "
            f"mixed run: {args.slow} slow, {args.poisoned} poisoned clients",
            flush=True,
        )
        rows = [run_phase(m, ph, args, rm, bodies) for m in args.modes.split(",") for ph in phases]
    report(rows)


if __name__ == "__main__":
    main()

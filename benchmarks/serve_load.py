"""Load test of `orchrm serve`: C concurrent clients for T seconds on loopback, with
micro-batching on and off.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/serve_load.py [-C 32] [-T 60] [--rm DIR]
        [--per-request 1] [--route score|get_reward] [--modes on,off] [--threads N]

For each mode it starts `orchrm serve` as a subprocess on a free loopback port (on:
`--max-batch-size 32 --max-wait-ms 5`; off: `--max-batch-size 1 --max-wait-ms 0`, one
orchestration per forward pass), waits for /healthz, warms up, then runs C asyncio
clients, each sending requests back to back over its own keep-alive connection, for T
seconds. A request is one world question with `--per-request` orchestrations written by
the world's orchestrators (`math` preset; some are truncated or break a rule, as LLM
output does), sent to /score, or to /get_reward as OpenRLHF queries under a ChatML
template. It prints requests/s, orchestrations/s, p50/p99 latency, errors (any non-200,
a wrong answer shape, or a lost connection), the mean micro-batch size read from the
server's /metrics, and the on/off throughput ratio. Default model: the offline MiniLM
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
from pathlib import Path

MODES = {"on": (32, 5.0), "off": (1, 0.0)}


def default_model(folder: Path) -> Path:
    """The offline MiniLM as an (untrained) orchrm reward model, max_length 256 as
    `orchrm train` writes by default."""
    from orchrm.rm.config import default_backbone
    from orchrm.rm.model import load_backbone, save_model

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

    async def post(self, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        head = (
            f"POST {self.path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
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


def batch_stats(port: int) -> tuple[int, float]:
    """(batches, orchestrations) the server has run so far, from /metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    values = dict(line.rsplit(" ", 1) for line in text.splitlines() if line.startswith("orchrm_b"))
    return int(values["orchrm_batch_size_count"]), float(values["orchrm_batch_size_sum"])


def run_mode(mode: str, args, rm: Path, bodies: list[bytes]) -> dict:
    batch, wait = MODES[mode]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [str(Path(sys.executable).with_name("orchrm")), "serve", "--rm", str(rm)]
    command += ["--port", str(port), "--max-batch-size", str(batch), "--max-wait-ms", str(wait)]
    command += ["--max-items", str(max(args.per_request, 1024))]
    if args.threads:
        command += ["--threads", str(args.threads)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"`{' '.join(command)}` did not start")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5)
                break
            except OSError:
                time.sleep(0.3)
        asyncio.run(load(port, args.route, bodies, args.per_request, args.clients, args.warmup))
        before = batch_stats(port)
        loads = os.getloadavg()[0]
        result = asyncio.run(
            load(port, args.route, bodies, args.per_request, args.clients, args.seconds)
        )
        after = batch_stats(port)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)
    lat = sorted(result["latencies"])
    n = len(lat)
    batches, items = after[0] - before[0], after[1] - before[1]
    return {
        "mode": mode,
        "batch": batch,
        "wait_ms": wait,
        "requests": n,
        "req_s": n / result["wall"],
        "orch_s": n * args.per_request / result["wall"],
        "p50_ms": 1000 * lat[n // 2] if n else float("nan"),
        "p99_ms": 1000 * lat[min(n - 1, int(0.99 * n))] if n else float("nan"),
        "errors": result["errors"],
        "mean_batch": items / batches if batches else 0.0,
        "load_1m": loads,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-C", "--clients", type=int, default=32)
    parser.add_argument("-T", "--seconds", type=float, default=60.0)
    parser.add_argument("--rm", type=Path, help="A reward model dir (default: untrained MiniLM).")
    parser.add_argument("--per-request", type=int, default=1, help="Orchestrations a request.")
    parser.add_argument("--route", choices=("score", "get_reward"), default="score")
    parser.add_argument("--modes", default="on,off", help="Comma-separated: on, off.")
    parser.add_argument("--threads", type=int, help="The server's PyTorch CPU threads.")
    parser.add_argument("--warmup", type=float, default=3.0, help="Unmeasured seconds first.")
    args = parser.parse_args()
    bodies = request_bodies(args.route, args.per_request)
    with tempfile.TemporaryDirectory() as tmp:
        rm = args.rm or default_model(Path(tmp))
        print(
            f"{args.clients} clients x {args.seconds:g} s, {args.per_request} orchestration(s) "
            f"per /{args.route} request, model {rm}, {os.cpu_count()} CPUs",
            flush=True,
        )
        rows = [run_mode(m, args, rm, bodies) for m in args.modes.split(",")]
    columns = (
        "mode",
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
    )
    print(" ".join(f"{c:>10}" for c in columns))
    for row in rows:
        print(
            " ".join(
                f"{row[c]:>10.1f}" if isinstance(row[c], float) else f"{row[c]:>10}"
                for c in columns
            )
        )
    by_mode = {r["mode"]: r for r in rows}
    if "on" in by_mode and "off" in by_mode and by_mode["off"]["req_s"]:
        print(f"throughput on/off: {by_mode['on']['req_s'] / by_mode['off']['req_s']:.2f}x")


if __name__ == "__main__":
    main()

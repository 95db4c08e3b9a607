"""A load generator for `orchrm serve`: C concurrent clients for T seconds on the
loopback, with micro-batching on and off, and optionally hostile clients mixed in.

`run_phase` starts `orchrm serve` as a subprocess on a free loopback port for one mode
(`MODES`: on, `--max-batch-size 32 --max-wait-ms 5`; off, `--max-batch-size 1
--max-wait-ms 0`, one orchestration per forward pass), waits for /healthz, warms up, then
runs `LoadSettings.clients` asyncio clients, each sending requests back to back over its
own keep-alive connection, for `LoadSettings.seconds`. A request (`request_bodies`) is one
world question with `per_request` orchestrations written by the world's orchestrators
(`math` preset; some are truncated or break a rule, as LLM output does), sent to /score,
or to /get_reward as OpenRLHF queries under a ChatML template. A phase's row holds
requests/s, orchestrations/s, p50/p99 latency, errors (any non-200, a wrong answer shape,
or a lost connection), the mean micro-batch size read from the server's /metrics, the 1-min
load average and the bytes the server logged; `report` writes the rows as a table with the
on/off throughput ratio.

In the `mixed` phase, slow and poisoned clients run beside the good ones, and `report`
adds the good requests' p99 mixed/clean ratio. A poisoned client (`hostile_bodies`) sends,
back to back, lone surrogates, huge degenerate orchestrations (100,000 characters of
repeated tags, brackets or newlines), deeply nested JSON, a /get_reward query of 15,000
newlines and too many items, and tallies what the server answered each kind. A slow client
opens a connection and sends a request head (half of them) or a body (the other half) one
byte a second, reconnecting whenever the server closes it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from orchrm.serve.process import free_port, orchrm_command

MODES = {"on": (32, 5.0), "off": (1, 0.0)}
"""Micro-batching on and off: (`--max-batch-size`, `--max-wait-ms`) of the server."""


@dataclass(frozen=True)
class LoadSettings:
    """The load of one phase."""

    clients: int = 32
    """Good clients, each with one request in flight at a time."""
    seconds: float = 60.0
    """Measured seconds of load."""
    route: str = "score"
    """`score` or `get_reward`."""
    per_request: int = 1
    """Orchestrations a request."""
    warmup: float = 3.0
    """Unmeasured seconds of the same load first."""
    threads: int | None = None
    """The server's PyTorch CPU threads (`--threads`); None: its default."""
    slow: int = 0
    """Slow clients in the mixed phase."""
    poisoned: int = 0
    """Poisoned clients in the mixed phase."""


def default_model(folder: Path) -> Path:
    """The offline MiniLM as an (untrained) orchrm reward model, max_length 256 as
    `orchrm train` writes by default."""
    from orchrm.rmodel.backbone import load_backbone
    from orchrm.rmodel.tokens import default_backbone
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


async def mixed_load(
    port: int, settings: LoadSettings, bodies: list[bytes], *, slow: int, poisoned: int
) -> dict:
    """`load` with `slow` slow and `poisoned` poisoned clients running alongside."""
    tally: Counter = Counter()
    end = time.perf_counter() + settings.seconds
    hostile = [slow_client(port, end, i % 2 == 1, tally) for i in range(slow)]
    hostile += [poisoned_client(port, end, tally) for _ in range(poisoned)]
    tasks = [asyncio.ensure_future(h) for h in hostile]
    await asyncio.sleep(min(1.0, settings.seconds / 10))  # the slow ones are connected first
    result = await load(
        port,
        settings.route,
        bodies,
        settings.per_request,
        settings.clients,
        end - time.perf_counter(),
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


def start_server(settings: LoadSettings, rm: Path, mode: str, log) -> tuple[subprocess.Popen, int]:
    """`orchrm serve` of `rm` for `mode` on a free port, its output to the file `log`, once
    /healthz answers; SystemExit when it exits first or does not answer in 120 s."""
    batch, wait = MODES[mode]
    port = free_port()
    command = [*orchrm_command(), "serve", "--rm", str(rm)]
    command += ["--port", str(port), "--max-batch-size", str(batch), "--max-wait-ms", str(wait)]
    command += ["--max-items", str(max(settings.per_request, 1024))]
    if settings.threads:
        command += ["--threads", str(settings.threads)]
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


def run_phase(mode: str, phase: str, settings: LoadSettings, rm: Path, bodies: list[bytes]) -> dict:
    """One server of `rm` in `mode`, warmed up, under the good clients alone (`clean`) or
    with the hostile ones (`mixed`): its row (`summary`, with the load average, the log's
    size, the hostile outcomes and the prepare workers replaced)."""
    hostile = {"slow": settings.slow, "poisoned": settings.poisoned} if phase == "mixed" else {}
    with tempfile.TemporaryFile() as log:
        server, port = start_server(settings, rm, mode, log)
        try:
            asyncio.run(
                load(
                    port,
                    settings.route,
                    bodies,
                    settings.per_request,
                    settings.clients,
                    settings.warmup,
                )
            )
            before = server_stats(port)
            loads = os.getloadavg()[0]
            if hostile:
                result = asyncio.run(mixed_load(port, settings, bodies, **hostile))
            else:
                result = asyncio.run(
                    load(
                        port,
                        settings.route,
                        bodies,
                        settings.per_request,
                        settings.clients,
                        settings.seconds,
                    )
                )
            after = server_stats(port)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(60)
        log_bytes = log.seek(0, os.SEEK_END)
    return summary(mode, phase, settings, result, before, after) | {
        "load_1m": loads,
        "log_kb": log_bytes / 1024,
        "tally": result.get("tally", Counter()),
        "restarts": after.get("orchrm_prepare_worker_restarts_total", 0.0),
    }


def summary(
    mode: str, phase: str, settings: LoadSettings, result: dict, before: dict, after: dict
) -> dict:
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
        "orch_s": n * settings.per_request / result["wall"],
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


def report(rows: list[dict]) -> str:
    """The table of the rows, then the ratios and what the hostile clients got."""
    lines = [" ".join(f"{c:>10}" for c in COLUMNS)]
    for row in rows:
        cells = (row[c] for c in COLUMNS)
        lines.append(" ".join(f"{v:>10.1f}" if isinstance(v, float) else f"{v:>10}" for v in cells))
    clean = {r["mode"]: r for r in rows if r["phase"] == "clean"}
    for row in rows:
        if row["phase"] != "mixed":
            continue
        base = clean.get(row["mode"])
        if base and base["p99_ms"] > 0:
            ratio = row["p99_ms"] / base["p99_ms"]
            lines.append(
                f"mode {row['mode']}: good p99 mixed/clean {ratio:.2f}x, good errors "
                f"clean {base['errors']} mixed {row['errors']}, prepare workers replaced "
                f"{row['restarts']:g}"
            )
        tally = ", ".join(f"{k}={v}" for k, v in sorted(row["tally"].items(), key=str))
        lines.append(f"mode {row['mode']}: hostile outcomes: {tally}")
    on = [r for r in rows if r["mode"] == "on" and r["phase"] == "clean"]
    off = [r for r in rows if r["mode"] == "off" and r["phase"] == "clean"]
    if on and off and off[0]["req_s"]:
        lines.append(f"throughput on/off: {on[0]['req_s'] / off[0]['req_s']:.2f}x")
    return "\n".join(lines)

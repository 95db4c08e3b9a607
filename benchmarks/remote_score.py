"""Scoring throughput, local against through `orchrm serve` on the loopback.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/remote_score.py --plans 192
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/remote_score.py --dtype bf16 \
        --model orchrm-demo/rm/math/model

The offline MiniLM (saved untrained, max_length 128; or `--model`, a trained one) scores
world orchestrations in `--dtype` (fp32 unless given) three
ways: `OrchRM` in process; `RemoteScorer` rendering here and posting to the server's
`/classify`; `RemoteScorer` without a tokenizer, posting harmony XML to `/score`, where
the server renders. The server runs in this process (uvicorn in a thread, one prepare
worker), so all three share the same CPU cores and the same PyTorch threads
(`--threads`). Prints orchestrations per second and the largest score difference from
the local model, which batches the texts otherwise than the server's micro-batches do;
in bf16 also the largest difference between the local model's bf16 and fp32 scores.
"""

from __future__ import annotations

import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Literal

import torch
import uvicorn

from orchrm.cli.script import run_script
from orchrm.configs import config, setting
from orchrm.errors import MissingInput
from orchrm.parse import parse_harmony
from orchrm.rmodel.backbone import load_backbone
from orchrm.rmodel.tokens import default_backbone
from orchrm.scoring.load import load_scorer
from orchrm.scoring.local import OrchRM
from orchrm.serve.app import create_app, uvicorn_config
from orchrm.serve.config import ServeConfig
from orchrm.training.build import save_model
from orchrm.world.orchestrators import orchestrators
from orchrm.world.tasks import generate_tasks


@config(frozen=True)
class RemoteSettings:
    """The benchmark's options."""

    plans: int = setting(192, min=1)
    """World orchestrations scored each time."""
    repeats: int = setting(3, min=1)
    """Timed passes per way of scoring (the best counts)."""
    threads: int = setting(1, min=1)
    """PyTorch CPU threads."""
    dtype: Literal["fp32", "bf16"] = "fp32"
    """Precision the model scores in."""
    model: str | None = None
    """A reward model directory (default: the offline MiniLM, untrained)."""


def world_items(count: int) -> list[tuple[str, object]]:
    items = []
    for task in generate_tasks("math", count, seed=3):
        for writer in orchestrators(0).values():
            items.append((task.question, parse_harmony(writer.write(task, 0)[0])))
    return items[:count]


def serve(rm: OrchRM) -> tuple[str, uvicorn.Server, threading.Thread]:
    config = ServeConfig(rm="bench", prepare_workers=1, max_request_seconds=600)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn_config(create_app(rm, config), config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]})
    thread.start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{sock.getsockname()[1]}", server, thread


def rate(scorer, items, repeats: int) -> tuple[float, list[float]]:
    scorer.score(items[:8])  # warm-up
    best, scores = 0.0, []
    for _ in range(repeats):
        start = time.perf_counter()
        scores = [r.score for r in scorer.score(items)]
        best = max(best, len(items) / (time.perf_counter() - start))
    return best, scores


def main(args: RemoteSettings) -> None:
    """Score three ways and print their rates."""
    if args.model is not None and not Path(args.model).is_dir():
        raise MissingInput(f"--model {args.model}: no such directory")
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.model
        if path is None:
            model, tokenizer = load_backbone(default_backbone())
            path = save_model(model, tokenizer, Path(tmp) / "model", {"max_length": 128})
        rm = OrchRM.load(path, device="cpu", dtype=args.dtype, batch_size=8)
        items = world_items(args.plans)
        base, server, thread = serve(rm)
        try:
            local, expected = rate(rm, items, args.repeats)
            print(
                f"local OrchRM ({args.dtype}): {local:.1f} orchestrations/s ({len(items)} "
                f"plans, {args.threads} thread(s))"
            )
            if args.dtype == "bf16":
                full = OrchRM.load(path, device="cpu", dtype="fp32", batch_size=8)
                single = [r.score for r in full.score(items)]
                diff = max(abs(a - b) for a, b in zip(expected, single, strict=True))
                spread = statistics.pstdev(single)
                print(f"local bf16 against fp32: max |difference| {diff:.1e} (sd {spread:.2f})")
            for name, scorer in (
                ("remote /classify, rendered here", load_scorer(path, f"{base}/classify")),
                ("remote /score, rendered by the server", load_scorer(rm_url=f"{base}/score")),
            ):
                speed, scores = rate(scorer, items, args.repeats)
                diff = max(abs(a - b) for a, b in zip(scores, expected, strict=True))
                print(f"{name}: {speed:.1f} orchestrations/s; max |score - local| {diff:.1e}")
        finally:
            server.should_exit = True
            thread.join(60)


if __name__ == "__main__":
    run_script(RemoteSettings, main, doc=__doc__)

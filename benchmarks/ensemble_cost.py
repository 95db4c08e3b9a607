"""What an ensemble costs to score with: texts/s and the memory of the models held, for
one model, an ensemble of K members (each text tokenized once, read by every member)
and the ensemble's averaged weights (WARM, one pass), on the same texts in one run.

    .venv/bin/python benchmarks/ensemble_cost.py --rm runs/overoptimization/rm/math/model
    .venv/bin/python benchmarks/ensemble_cost.py [--members 4]   # untrained members

Texts are world plans rendered for the model (`--texts`); each variant scores all of
them `--rounds` times, the variants taking turns, and the median round counts. Memory
is what loading a variant and scoring the texts once adds to the resident set of a
fresh process that has the libraries and the texts already.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from orchrm.cli.script import run_script
from orchrm.configs import config, setting

VARIANTS = ("one model", "ensemble", "warm")


@config(frozen=True)
class CostSettings:
    """The benchmark's options."""

    rm: str = ""
    """An ensemble's model directory (`orchrm train --ensemble K`); empty: one of
    `members` untrained MiniLM members is built in a temporary folder."""
    members: int = setting(4, min=2)
    """Members of the ensemble built without --rm."""
    texts: int = setting(512, min=1)
    """Texts scored per round."""
    rounds: int = setting(5, min=1)
    """Rounds per variant."""
    dtype: str = "fp32"
    """Precision of every variant: fp32 or bf16."""
    batch_size: int = setting(32, min=1)
    """Texts per forward pass."""


def build_ensemble(folder: Path, members: int) -> Path:
    """An ensemble directory of `members` untrained MiniLM members (heads of seeds 0,
    1, ...), with their averaged weights at the top, as `orchrm train` writes one."""
    import torch

    from orchrm.rmodel.backbone import load_backbone
    from orchrm.rmodel.tokens import default_backbone
    from orchrm.training.build import save_model, write_model_files
    from orchrm.training.ensemble import average_weights

    dirs = []
    for i in range(members):
        torch.manual_seed(i)
        model, tokenizer = load_backbone(default_backbone())
        dirs.append(save_model(model, tokenizer, folder / f"m{i}", {"max_length": 256}))
    model, tokenizer = average_weights(dirs)
    meta = {
        "max_length": 256,
        "ensemble": {"members": members, "aggregate": "mean_minus_std", "spread_weight": 1.0},
    }
    top = folder / "model"
    write_model_files(top, model, tokenizer, meta, None)
    (top / "members").mkdir()
    for i, d in enumerate(dirs):
        d.rename(top / "members" / str(i))
    return top


def world_texts(n: int) -> list[tuple[str, object]]:
    """(question, plan) of `n` plans the world's orchestrators write."""
    from orchrm.parse import parse_harmony
    from orchrm.world.orchestrators import orchestrators
    from orchrm.world.tasks import generate_tasks

    writers = list(orchestrators(0).values())
    items = []
    for task in generate_tasks("math", n, seed=7):
        text, _ = writers[len(items) % len(writers)].write(task, len(items))
        try:
            items.append((task.question, parse_harmony(text)))
        except Exception:  # a plan cut short: not a text to time
            continue
    return items[:n]


def load(variant: str, rm: Path, s: CostSettings):
    from orchrm.scoring.load import load_scorer

    if variant == "one model":
        return load_scorer(rm / "members" / "0", dtype=s.dtype, batch_size=s.batch_size)
    aggregate = "warm" if variant == "warm" else None
    return load_scorer(rm, dtype=s.dtype, batch_size=s.batch_size, aggregate=aggregate)


def held_memory(variant: str, rm: Path, s: CostSettings) -> float:
    """MiB the resident set grows by in a fresh process that loads `variant` and scores
    the texts once (the libraries imported and the texts made before)."""
    code = (
        "import gc, json, os, sys\n"
        "sys.path.insert(0, 'benchmarks')\n"
        "import ensemble_cost as b\n"
        "import torch, transformers\n"
        f"s = b.CostSettings(**json.loads({json.dumps(json.dumps(_fields(s)))}))\n"
        "items = b.world_texts(s.texts)\n"
        "def rss():\n"
        "    gc.collect()\n"
        "    return int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE')\n"
        "before = rss()\n"
        f"model = b.load({variant!r}, b.Path({str(rm)!r}), s)\n"
        "model.score(items)\n"
        "print((rss() - before) / 2**20)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def _fields(s: CostSettings) -> dict:
    from dataclasses import asdict

    return asdict(s)


def main(s: CostSettings) -> None:
    """Time and weigh each variant; print the table with ratios to one model."""
    with tempfile.TemporaryDirectory() as tmp:
        rm = Path(s.rm) if s.rm else build_ensemble(Path(tmp), s.members)
        items = world_texts(s.texts)
        scorers = {v: load(v, rm, s) for v in VARIANTS}
        for scorer in scorers.values():
            scorer.score(items[:8])  # one-off costs out of the timing
        seconds = {v: [] for v in VARIANTS}
        for _ in range(s.rounds):
            for v, scorer in scorers.items():
                start = time.perf_counter()
                scorer.score(items)
                seconds[v].append(time.perf_counter() - start)
        k = len(scorers["ensemble"].members)
        rows = {
            v: (len(items) / statistics.median(seconds[v]), held_memory(v, rm, s)) for v in VARIANTS
        }
    one_rate, one_mem = rows["one model"]
    print(
        f"{len(items)} world plans, {s.dtype}, batch {s.batch_size}, ensemble of {k}; "
        f"median of {s.rounds} rounds; memory: what loading and scoring adds to a process"
    )
    print(f"{'variant':<12}{'texts/s':>10}{'x one':>8}{'MiB':>9}{'x one':>8}")
    for v, (rate, mem) in rows.items():
        share = f"{mem / one_mem:>8.2f}" if one_mem > 0 else f"{'-':>8}"
        print(f"{v:<12}{rate:>10.1f}{rate / one_rate:>8.2f}{mem:>9.0f}{share}")


if __name__ == "__main__":
    run_script(CostSettings, main, doc=__doc__)

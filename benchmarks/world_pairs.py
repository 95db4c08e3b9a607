"""The world benchmarks' shared setup: logs, mined pairs and held-out tasks, as the demo
makes them (not a benchmark itself; `rm_scaling.py` and `world_headroom.py` import it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from orchrm.evaluation.metrics import tasks_from_logs
from orchrm.evaluation.reruns import with_reruns
from orchrm.experiments.world_models import PairDataset, WorldRMConfig, world_reward_models
from orchrm.jsonl import write_jsonl
from orchrm.selection.selectors import CandidateSet
from orchrm.store.pairs import MineSummary
from orchrm.world.generate import generate
from orchrm.world.orchestrators import orchestrators
from orchrm.world.tasks import Preset

SAMPLES = 8


@dataclass
class WorldPairs:
    train: list[CandidateSet]
    """Training tasks, once per orchestrator (specialized, then base)."""
    test: list[CandidateSet]
    """Held-out tasks with exactly SAMPLES specialized candidates, re-executed 20 times
    (so votes have an expected accuracy)."""
    pairs: Path
    """The export folder (train.jsonl, validation.jsonl)."""
    mined: MineSummary


def world_pairs(
    preset: str | Preset,
    train_tasks: int,
    test_tasks: int,
    seed: int,
    out: Path,
    budget=(512, None),
    split: tuple[float, float, float] = (1.0, 0.0, 0.0),
    specialized: dict | None = None,
) -> WorldPairs:
    """Training logs from world `seed`, held-out logs from `seed + 1`, both in OUT/logs;
    pairs mined as the demo mines them and exported cut to `budget` into OUT/pairs.
    `specialized`: fields to change on the specialized orchestrator (e.g. `follow`)."""
    (out / "logs").mkdir(parents=True, exist_ok=True)
    world = {}
    for part, n, s in (("train", train_tasks, seed), ("test", test_tasks, seed + 1)):
        writers = orchestrators(s)
        writers["specialized"] = dataclasses.replace(writers["specialized"], **(specialized or {}))
        generated = generate(preset, n, SAMPLES, s, progress=False, writers=writers)
        world[part] = generated.tasks
        write_jsonl(generated.records, out / "logs" / f"{part}.jsonl")
    name = preset if isinstance(preset, str) else preset.name
    result = world_reward_models(
        WorldRMConfig(
            out=str(out),
            logs=[str(out / "logs" / "train.jsonl")],
            datasets=(PairDataset("world", name),),
            store="store.duckdb",
            split=split,
            budget=budget,
        )
    )
    mined = result.datasets["world"].mined
    train_log, test_log = str(out / "logs" / "train.jsonl"), str(out / "logs" / "test.jsonl")
    test = [
        t
        for t in tasks_from_logs([test_log], "specialized", SAMPLES)
        if len(t.candidates) == SAMPLES
    ]
    return WorldPairs(
        train=[
            t for o in ("specialized", "base") for t in tasks_from_logs([train_log], o, SAMPLES)
        ],
        test=with_reruns(test, world["test"], 20),
        pairs=out / "pairs",
        mined=mined,
    )

"""Ingest 100,000 generated log records into a fresh store, then mine pairs from them.

    .venv/bin/python benchmarks/store_ingest.py [--records 100000] [--keep DIR]

Records are world logs (`orchrm.run/1`, both orchestrators, `math` preset): a base set is
generated through the real executor, then replicated under new task ids and questions
until there are `--records` of them (every copy is a distinct task to the store). Prints
the ingest and mining times against the goals (60 s and 30 s on a 2-core machine).
"""

from __future__ import annotations

import copy
import tempfile
import time
from pathlib import Path

from orchrm.cli.script import run_script
from orchrm.configs import config, setting
from orchrm.jsonl import write_jsonl
from orchrm.store.db import Store
from orchrm.store.ingest import ingest_file
from orchrm.store.pairs import MineConfig, mine
from orchrm.world.generate import generate

GOAL_INGEST_S, GOAL_MINE_S = 60.0, 30.0


def records(n: int, base_tasks: int = 400, samples: int = 8) -> list[dict]:
    base = generate("math", base_tasks, samples, seed=0, progress=False).records
    out: list[dict] = []
    copy_no = 0
    while len(out) < n:
        for r in base[: n - len(out)]:
            twin = copy.copy(r)
            twin["task_id"] = f"{r['task_id']}~{copy_no}"
            twin["question"] = f"{r['question']} (variant {copy_no})"
            out.append(twin)
        copy_no += 1
    return out


@config(frozen=True)
class IngestSettings:
    """The run's options."""

    records: int = setting(100_000, min=1)
    """Log records to generate, ingest and mine."""
    keep: str | None = None
    """Keep the log and store in this folder."""


def main(args: IngestSettings) -> None:
    """Generate the records, ingest them into a fresh store, mine it; print the times.
    The log and store are deleted afterwards unless --keep names their folder."""
    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        measure(Path(args.keep), args)
        return
    with tempfile.TemporaryDirectory(prefix="orchrm-bench-") as folder:
        measure(Path(folder), args)


def measure(folder: Path, args: IngestSettings) -> None:
    """Write the log into `folder`, ingest it into a store beside it, mine; print times."""
    log, db_path = folder / "world.jsonl", folder / "bench.duckdb"
    db_path.unlink(missing_ok=True)

    start = time.perf_counter()
    write_jsonl(records(args.records), log)
    print(f"generated {args.records} records in {time.perf_counter() - start:.1f} s -> {log}")

    with Store(db_path) as store:
        start = time.perf_counter()
        summary = ingest_file(store, log)
        ingest_s = time.perf_counter() - start
        start = time.perf_counter()
        mined = mine(store, MineConfig(specialized=("specialized",), base=("base",)))
        mine_s = time.perf_counter() - start
    print(
        f"ingest: {summary.records} records ({summary.added} added, {summary.malformed} "
        f"malformed) in {ingest_s:.1f} s = {summary.records / ingest_s:.0f} records/s; "
        f"goal {GOAL_INGEST_S:.0f} s: {'met' if ingest_s <= GOAL_INGEST_S else 'MISSED'} "
        f"({ingest_s / GOAL_INGEST_S:.2f} of it)"
    )
    print(
        f"mine: {sum(mined.kept.values())} pairs kept {mined.kept} of {mined.available} in "
        f"{mine_s:.1f} s; goal {GOAL_MINE_S:.0f} s: "
        f"{'met' if mine_s <= GOAL_MINE_S else 'MISSED'} ({mine_s / GOAL_MINE_S:.2f} of it)"
    )


if __name__ == "__main__":
    run_script(IngestSettings, main, doc=__doc__)

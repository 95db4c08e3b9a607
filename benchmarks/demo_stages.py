"""Where `orchrm demo`'s time goes: each stage's seconds and share of the total.

    .venv/bin/python benchmarks/demo_stages.py [--out DIR] [--presets math,search]
        [--mixed] [--unified] [--train-tasks N] [--test-tasks N] [--steps N] [--dtype D]

It takes every option of `orchrm demo` (`DemoConfig`'s defaults for what is not given,
but OUT is runs/demo-stages unless given). Runs the demo into OUT with every stage's
manifest removed first, so that none is reused, and prints the stages `run_demo` times
(`report.json`'s `seconds`: generating the world logs, the pairs and each model's
training of `orchrm.experiments.world_models`, each preset's evaluation), the wall time
of the whole process, and its peak memory.
"""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path

from orchrm.cli.console import csv_values
from orchrm.cli.script import run_script
from orchrm.experiments.demo.config import DemoConfig

SETTINGS = DemoConfig(out="runs/demo-stages")
"""The demo's settings (`orchrm demo`'s options), into a folder of this benchmark's."""


def main(config: DemoConfig) -> None:
    """Run the demo afresh and print where its time went."""
    from orchrm.experiments.demo.run import run_demo
    from orchrm.experiments.stages import STAGE_JSON

    for manifest in Path(config.out).rglob(f"*{STAGE_JSON}"):
        manifest.unlink()
    started = time.perf_counter()
    run_demo(config, say=lambda m: None)
    wall = time.perf_counter() - started
    seconds = json.loads((Path(config.out) / "report.json").read_text())["seconds"]
    total = seconds.pop("total")
    print(f"{'stage':<28}{'seconds':>9}{'share':>8}")
    for stage, s in seconds.items():
        print(f"{stage:<28}{s:>9.1f}{s / total:>8.1%}")
    print(f"{'total (run_demo)':<28}{total:>9.1f}")
    print(f"{'wall, imports included':<28}{wall:>9.1f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"peak RSS {peak:.2f} GB; presets {', '.join(config.presets)}; mixed {config.mixed}")


if __name__ == "__main__":
    run_script(
        SETTINGS, main, doc=__doc__, settings={"presets": {"parser": csv_values, "spell": ",".join}}
    )

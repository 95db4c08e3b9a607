"""Where `orchrm demo`'s time goes: each stage's seconds and share of the total.

    .venv/bin/python benchmarks/demo_stages.py [--out DIR] [--presets math,search]
        [--mixed] [--unified] [--train-tasks N] [--test-tasks N] [--steps N] [--dtype D]

Runs the demo (`DemoConfig`'s defaults for what is not given) into OUT with every stage's
manifest removed first, so that none is reused, and prints the stages `run_demo` times
(`report.json`'s `seconds`: generating the world logs, the pairs and each model's
training of `orchrm.experiments.world_models`, each preset's evaluation), the wall time
of the whole process, and its peak memory.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from orchrm.experiments.demo.config import DemoConfig
from orchrm.experiments.demo.run import run_demo
from orchrm.experiments.stages import STAGE_JSON
from orchrm.rmodel.precision import DTYPES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/demo-stages")
    parser.add_argument("--presets", default=None, help="comma-separated world presets")
    parser.add_argument("--mixed", action="store_true", default=None)
    parser.add_argument("--unified", action="store_true", default=None)
    parser.add_argument("--train-tasks", type=int, default=None)
    parser.add_argument("--test-tasks", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--dtype", default=None, choices=DTYPES)
    options = {k: v for k, v in vars(parser.parse_args()).items() if v is not None}
    if "presets" in options:
        options["presets"] = tuple(p for p in options["presets"].split(",") if p)
    config = DemoConfig(**options)
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
    main()

"""Where `orchrm demo`'s time goes: each stage's seconds and share of the total.

    .venv/bin/python benchmarks/demo_stages.py [--out DIR] [--presets math] [--mixed] [...]

Runs the demo (any `DemoConfig` field as an option, its defaults otherwise) and prints the
stages `run_demo` times (`report.json`'s `seconds`: generating the world logs, each
pipeline stage of `orchrm.experiments.world_models` (ingest, mine, export, each model's training),
each preset's evaluation), the wall time of the whole process, and its peak memory.
"""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path

from orchrm.configs import argument_parser, given
from orchrm.experiments.demo import run_demo
from orchrm.experiments.demo_config import DemoConfig


def main() -> None:
    parser = argument_parser(DemoConfig, __doc__.splitlines()[0])
    parser.add_argument("--presets", default=None, help="Comma-separated world presets.")
    options = given(parser.parse_args())
    if "presets" in options:
        options["presets"] = tuple(p for p in options["presets"].split(",") if p)
    options.setdefault("out", "runs/demo-stages")
    config = DemoConfig(**options)
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

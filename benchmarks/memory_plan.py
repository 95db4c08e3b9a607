"""The memory plan against measured peaks: random Llama- and BERT-shaped models trained
for real on this machine's CPU, each point in a fresh process.

    .venv/bin/python benchmarks/memory_plan.py [--grid quick|full] [--dtype fp32|bf16]
        [--only llama-20m,bert-22m] [--steps 2] [--json runs/memory_plan.json]

For each point: `orchrm.memplan.plan.plan_training`'s peak (and its total), the peak resident
memory one probe measured above what the process held before the model was built
(`orchrm.memplan.probe`), and their ratio; `packed` rows train a decoder's texts packed
into one row (`orchrm.rmodel.packed`), their tokens the texts' own. The full grid takes
several minutes on 2 cores.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchrm.cli.console import csv_values  # noqa: E402
from orchrm.cli.script import run_script  # noqa: E402
from orchrm.configs import config, setting  # noqa: E402
from orchrm.errors import ConfigError  # noqa: E402
from orchrm.memplan.measured import grid, run_point  # noqa: E402


@config(frozen=True)
class PlanCheckSettings:
    """The benchmark's options."""

    grid: Literal["quick", "full"] = "quick"
    """quick: the ~20M-parameter shapes; full: and the ~110M ones (minutes)."""
    dtype: Literal["fp32", "bf16"] = "fp32"
    """Precision of the training steps."""
    only: tuple[str, ...] = ()
    """Comma-separated shapes to keep (default: every shape of the grid)."""
    steps: int = setting(2, min=1)
    """Training steps measured per point."""
    json: str | None = None
    """Also write the rows to this file."""

    def __post_init__(self) -> None:
        shapes = {p.shape for p in grid(self.grid)}
        if missing := [s for s in self.only if s not in shapes]:
            raise ConfigError(
                f"--only {','.join(missing)}: not in --grid {self.grid}, whose shapes are "
                + ", ".join(sorted(shapes))
            )


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def main(args: PlanCheckSettings) -> None:
    """Plan and measure every point, one table row each."""
    points = [p for p in grid(args.grid) if not args.only or p.shape in args.only]
    print(
        f"{'shape':<13}{'L':>5}{'pairs':>6} {'lora':<5}{'gc':<4}{'attn':<7}"
        f"{'plan peak':>10}{'total':>8}{'measured':>10}{'ratio':>7}{'s/step':>8}"
    )
    rows = []
    for point in points:
        row = run_point(point, args.dtype, args.steps)
        rows.append(row)
        print(
            f"{point.shape:<13}{point.max_length:>5}{point.micro_batch_pairs:>6} "
            f"{_yes(point.lora):<5}{_yes(point.gradient_checkpointing):<4}"
            f"{'packed' if point.packing else point.attn_implementation:<7}"
            f"{row['plan_peak_mib']:>10.0f}"
            f"{row['plan_total_mib']:>8.0f}{row['measured_mib']:>10.0f}{row['ratio']:>7.2f}"
            f"{row['seconds_per_step']:>8.1f}",
            flush=True,
        )
    ratios = [r["ratio"] for r in rows]
    print(f"plan peak / measured: min {min(ratios):.2f}, max {max(ratios):.2f} (MiB)")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    run_script(
        PlanCheckSettings,
        main,
        doc=__doc__,
        settings={"only": {"parser": csv_values, "spell": ",".join}},
    )

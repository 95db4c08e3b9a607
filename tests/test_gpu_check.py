"""benchmarks/gpu_check.py's tiny configuration on the CPU, in fp32: every part (training
through orchrm and through TRL, scoring, `orchrm serve` under load, GRPO through `orchrm
rl`) prints rows with numbers and none prints an error, so the check a GPU runs cannot rot
between the times one is lent."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchrm.experiments.gpu_check.check import PARTS

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_every_part_of_the_tiny_check_prints_numbers_and_no_error(tmp_path):
    out = tmp_path / "check.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--tiny", "--dtype", "fp32",
         "--work", str(tmp_path / "work"), "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("gpu_check (tiny): CPU") and ", fp32, " in lines[0], lines[0]
    rows = json.loads(out.read_text())["rows"]
    for part in PARTS:
        mine = [r for r in rows if r["part"] == part]
        errors = [r["note"] for r in mine if r["what"] == "error"]
        assert not errors, f"{part}: {errors}"
        figures = [r for r in mine if r["what"] != "part seconds"]
        assert figures, f"{part} printed no figure"
        for r in figures:
            assert r["value"] is not None and math.isfinite(r["value"]) and r["value"] > 0, r
            printed = [x for x in lines if x.startswith(f"{part:<6} {r['what']}")]
            assert len(printed) == 1, f"{part} {r['what']}: not one table row in\n{done.stdout}"
    results = json.loads(out.read_text())["results"]
    assert results["train"]["plan_peak_mib"] > 0
    assert "orchrm/TRL pairs/s" in {r["what"] for r in rows}
    assert results["serve"]["on"]["errors"] == results["serve"]["off"]["errors"] == 0
    assert results["serve"]["on"]["requests"] > 0 and results["serve"]["off"]["requests"] > 0
    assert results["rl"]["steps"] == 3

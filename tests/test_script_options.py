"""Benchmark scripts take their options the way `orchrm`'s commands do
(`orchrm.cli.script.run_script` over a config's fields): help from the config, bounds
checked, one line and exit status 2 for a bad value, `--config FILE.yaml` under the
options given."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STRESS = ROOT / "benchmarks" / "caller_batcher_stress.py"


def script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(STRESS), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "HF_HUB_OFFLINE": "1"},
    )


def test_help_comes_from_the_config_with_defaults_and_bounds():
    done = script("--help")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())  # the help wraps at 80 columns
    assert "does a `CallerBatcher` keep each error to its call?" in text
    assert "--calls <int range> Calls in all. [default: 2000; x>=1]" in text
    assert "--round-ms <float range> Time of one scoring round, in milliseconds." in text
    assert "--config FILE.yaml" in text


def test_a_bad_value_is_one_line_and_exit_status_2():
    below = script("--calls", "0")
    assert below.returncode == 2 and "'--calls'" in below.stderr
    refused = script("--calls", "3", "--poisoned", "30")
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == ["error: --poisoned 30 is more than --calls 3"]
    assert "Traceback" not in refused.stderr


def test_an_unreadable_named_file_is_one_line_and_exit_status_3(tmp_path):
    missing = tmp_path / "callers.py"
    done = script("--calls", "3", "--poisoned", "0", "--callers", str(missing))
    assert done.returncode == 3
    assert done.stderr.strip().splitlines() == [f"error: {missing}: No such file or directory"]


def test_a_config_file_sets_what_the_command_line_does_not(tmp_path):
    settings = tmp_path / "stress.yaml"
    settings.write_text("calls: 40\npoisoned: 4\nthreads: 2\nround_ms: 0.0\n")
    done = script("--config", str(settings), "--poisoned", "5")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "calls: 40 from 2 threads, 5 poisoned"
    assert "clean calls failed: 0 of 35 (answered wrong: 0)" in done.stdout


def test_no_script_or_module_parses_its_own_command_line():
    # One way to take options: every command and benchmark script builds them from a
    # config (orchrm/cli/options.py, orchrm/cli/script.py); llama.cpp's server process
    # is `orchrm serve-llm`, built the same way.
    files = [*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "orchrm").rglob("*.py")]
    found = [
        f"{path.relative_to(ROOT)}: {word}"
        for path in files
        for word in ("import argparse", "sys.argv[1:", "runpy.run_module")
        if word in path.read_text()
    ]
    assert not found

"""Fixtures every test module may use."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ORCHRM = Path(sys.executable).with_name("orchrm")


@pytest.fixture
def orchrm_cli() -> Callable[..., subprocess.CompletedProcess]:
    """Run the installed `orchrm` command (or `python -m orchrm`) offline, at 200 columns,
    and return what it printed and its exit status."""

    def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        command = [str(ORCHRM)] if ORCHRM.exists() else [sys.executable, "-m", "orchrm"]
        return subprocess.run(
            [*command, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "COLUMNS": "200", "HF_HUB_OFFLINE": "1"},
        )

    return run

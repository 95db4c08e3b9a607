"""`orchrm run`: sample, execute and grade orchestrations over an OpenAI-compatible API."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from orchrm.cli.console import console
from orchrm.cli.options import config_options
from orchrm.tasks.config import SampleRunConfig


@config_options(
    SampleRunConfig,
    required=["tasks"],
    flags={"run.call_timeout_s": "--timeout", "run.max_retries": "--retries"},
    settings={
        "api_key": {"envvar": "OPENAI_API_KEY", "show_default": False},
        "run.max_retries": {"min": 0},
        "run.concurrency": {"min": 1},
    },
)
def run_command(config: SampleRunConfig) -> None:
    """Sample orchestrations for each task, execute them, grade them, write a JSONL log."""
    from orchrm.tasks.job import run_job

    records = run_job(config)
    _print_run_summary(records, Path(config.out))


def _print_run_summary(records: list[dict], out: Path) -> None:
    executed = [r for r in records if r["execution"] is not None]
    failed = [r for r in executed if r["execution"]["error"]]
    graded = [r for r in records if r["correct"] is not None]
    table = Table(title=f"run written to {out}")
    table.add_column("what")
    table.add_column("count", justify="right")
    rows = [
        ("orchestration samples", len(records)),
        ("unparseable", sum(r["parse_error"] is not None for r in records)),
        ("parsed but invalid", sum(bool(r["violations"]) for r in records)),
        ("executed", len(executed)),
        ("execution failed", len(failed)),
        ("correct / graded", f"{sum(bool(r['correct']) for r in graded)} / {len(graded)}"),
        ("orchestrator tokens", sum(r["tokens"]["orchestrator"] for r in records)),
        ("execution tokens", sum(r["tokens"]["execution"] for r in records)),
    ]
    for what, n in rows:
        table.add_row(what, str(n))
    console.print(table)

"""`orchrm run`: sample, execute and grade orchestrations over an OpenAI-compatible API."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rich.table import Table

from orchrm.cli.console import console
from orchrm.cli.options import config_options
from orchrm.runtime.config import RunConfig
from orchrm.tasks.config import SampleRunConfig


@config_options(
    RunConfig,
    ["temperature", "call_timeout_s", "max_retries", "concurrency"],
    into="run_config",
    flags={"call_timeout_s": "--timeout", "max_retries": "--retries"},
    settings={"max_retries": {"min": 0}, "concurrency": {"min": 1}},
)
@config_options(
    SampleRunConfig,
    [
        "tasks",
        "out",
        "base_url",
        "api_key",
        "model",
        "orchestrator_model",
        "subagent_model",
        "samples",
        "dom",
        "limit",
        "corpus",
        "orchestrator_id",
        "benchmark",
        "context",
        "seed",
        "preflight",
    ],
    required=["tasks"],
    settings={"api_key": {"envvar": "OPENAI_API_KEY", "show_default": False}},
)
def run_command(
    config: SampleRunConfig,
    run_config: RunConfig,
) -> None:
    """Sample orchestrations for each task, execute them, grade them, write a JSONL log."""
    from orchrm.tasks.job import run_job

    config = replace(config, run=run_config)
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

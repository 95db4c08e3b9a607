"""`orchrm run`: sample, execute and grade orchestrations over an OpenAI-compatible API."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from orchrm.cli.console import console, fail
from orchrm.cli.options import config_options
from orchrm.runtime.config import RunConfig


@config_options(
    RunConfig,
    ["temperature", "call_timeout_s", "max_retries", "concurrency"],
    into="run_config",
    flags={"call_timeout_s": "--timeout", "max_retries": "--retries"},
    settings={"max_retries": {"min": 0}, "concurrency": {"min": 1}},
)
def run_command(
    run_config: RunConfig,
    tasks: Path = typer.Option(
        ..., "--tasks", help="JSONL tasks (question/problem, answer, id), or a --benchmark file."
    ),
    out: Path = typer.Option(Path("runs/run.jsonl"), "--out", help="Where to write the log."),
    backend: str = typer.Option("openai", "--backend", help="LLM backend: openai."),
    base_url: str = typer.Option(
        None, "--base-url", help="OpenAI-compatible server (vLLM, SGLang, hosted API)."
    ),
    api_key: str = typer.Option(
        None,
        "--api-key",
        envvar="OPENAI_API_KEY",
        show_default=False,
        help="Bearer token of the server (default: EMPTY, which vLLM accepts).",
    ),
    model: str = typer.Option("default", "--model", help="Model for every role not set below."),
    orchestrator_model: str = typer.Option(
        None,
        "--orchestrator-model",
        help="Model that writes orchestrations (default: --model).",
    ),
    subagent_model: str = typer.Option(
        None, "--subagent-model", help="Model that answers the sub-agents (default: --model)."
    ),
    samples: int = typer.Option(4, "--samples", min=1, help="Orchestrations sampled per task."),
    dom: str = typer.Option("high", "--dom", help="Degree of MAS asked for: low or high."),
    limit: int = typer.Option(None, "--limit", min=1, help="Use only the first N tasks."),
    corpus: Path = typer.Option(None, "--corpus", help="JSONL corpus for WebSearchAgent (BM25)."),
    orchestrator_id: str = typer.Option(
        None, "--orchestrator-id", help="Name recorded for the orchestrator (default: its model)."
    ),
    benchmark: str = typer.Option(
        None,
        "--benchmark",
        help="Read --tasks as this benchmark's official file: aime, hotpotqa, browsecomp-plus, "
        "gpqa (orchrm.tasks.loaders).",
    ),
    context: str = typer.Option(
        "question",
        "--context",
        help="hotpotqa: question (paragraphs in the question) or corpus (the search corpus).",
    ),
    seed: int = typer.Option(0, "--seed", help="gpqa: seeds the option order of each question."),
) -> None:
    """Sample orchestrations for each task, execute them, grade them, write a JSONL log."""
    import asyncio

    from orchrm.jsonl import write_jsonl
    from orchrm.runtime.openai_backend import OpenAIBackend, OpenAIConfig
    from orchrm.runtime.retrieval import load_corpus
    from orchrm.runtime.run import load_tasks, run_tasks
    from orchrm.tasks.loaders import load_benchmark, load_benchmark_corpus

    if backend != "openai":
        fail(f"unknown backend {backend!r}: choose openai")
    if dom not in ("low", "high"):
        fail(f"--dom must be low or high, got {dom!r}")
    if benchmark:
        task_list = load_benchmark(benchmark, tasks, limit, seed, context=context)
        retriever = load_benchmark_corpus(benchmark, tasks, limit, corpus=corpus, context=context)
    else:
        task_list = load_tasks(tasks, limit)
        retriever = load_corpus(corpus) if corpus else None
    models = {"orchestrator": orchestrator_model, "subagent": subagent_model}
    config = OpenAIConfig(model=model, models={k: v for k, v in models.items() if v})
    if base_url:
        config.base_url = base_url
    if api_key:
        config.api_key = api_key
    config.timeout_s = run_config.call_timeout_s

    async def go() -> list[dict]:
        async with OpenAIBackend(config) as client:
            return await run_tasks(
                task_list,
                client,
                samples=samples,
                dom=dom,
                orchestrator=orchestrator_id or config.model_for("orchestrator"),
                config=run_config,
                retriever=retriever,
            )

    records = asyncio.run(go())
    write_jsonl(records, out)
    _print_run_summary(records, out)


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

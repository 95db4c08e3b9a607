"""`orchrm run` in one call: read the tasks (a JSONL file or a benchmark's official file),
check the LLM server, sample, execute and grade N orchestrations per task, write the log."""

from __future__ import annotations

import asyncio
from pathlib import Path

from orchrm.errors import ConfigError
from orchrm.jsonl import write_jsonl
from orchrm.tasks.config import SampleRunConfig


def read_job_tasks(config: SampleRunConfig):
    """(tasks, retriever or None) that `config` names."""
    from orchrm.runtime.retrieval import load_corpus
    from orchrm.tasks.benchmarks.registry import load_benchmark, load_benchmark_corpus
    from orchrm.tasks.task import load_tasks

    if config.benchmark:
        name, path, limit = config.benchmark, config.tasks, config.limit
        tasks = load_benchmark(name, path, limit, config.seed, context=config.context)
        retriever = load_benchmark_corpus(
            name, path, limit, corpus=config.corpus, context=config.context
        )
        return tasks, retriever
    return load_tasks(config.tasks, config.limit), load_corpus(
        config.corpus
    ) if config.corpus else None


def run_job(config: SampleRunConfig, progress: bool = True) -> list[dict]:
    """Run what `config` says and write its log to `config.out`; returns the records. The
    server is asked for its models first (`preflight`), so a server that is not there or
    a model it does not serve stops the run before any task is sampled. With `local`,
    llama.cpp serves `config.local_llm`'s model on loopback for the run's duration."""
    from orchrm.runtime.local_llm import LocalLLM

    tasks, retriever = read_job_tasks(config)
    if not config.local:
        return _run(config, tasks, retriever, None, progress)
    if config.base_url:
        raise ConfigError("--local serves its own model: drop --base-url, or drop --local")
    with LocalLLM(config.local_llm) as llm:
        return _run(config, tasks, retriever, llm, progress)


def _run(config: SampleRunConfig, tasks, retriever, llm, progress: bool) -> list[dict]:
    from orchrm.runtime.openai_backend import OpenAIBackend, OpenAIConfig
    from orchrm.tasks.run import run_tasks

    models = {"orchestrator": config.orchestrator_model, "subagent": config.subagent_model}
    model = llm.model if llm and config.model == "default" else config.model
    client_config = OpenAIConfig(model=model, models={k: v for k, v in models.items() if v})
    if config.base_url or llm:
        client_config.base_url = llm.base_url if llm else config.base_url
    if config.api_key:
        client_config.api_key = config.api_key
    client_config.timeout_s = config.run.call_timeout_s

    async def go() -> list[dict]:
        async with OpenAIBackend(client_config) as client:
            if config.preflight:
                await client.preflight()
            return await run_tasks(
                tasks,
                client,
                samples=config.samples,
                dom=config.dom,
                orchestrator=config.orchestrator_id or client_config.model_for("orchestrator"),
                config=config.run,
                retriever=retriever,
                progress=progress,
                example=config.example,
            )

    records = asyncio.run(go())
    write_jsonl(records, Path(config.out))
    return records

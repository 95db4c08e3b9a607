"""`SampleRunConfig`: what `orchrm run` can set (kept apart from the run's code so the
command line reads it without loading the OpenAI client)."""

from __future__ import annotations

from dataclasses import field
from typing import Literal

from orchrm.configs import config, setting
from orchrm.runtime.config import RunConfig
from orchrm.runtime.local_llm import LocalLLMConfig
from orchrm.tasks.benchmarks.registry import BENCHMARK_NAMES


@config
class SampleRunConfig:
    """Which tasks, which server and models, how many orchestrations per task, where the
    log goes; `run` says how each orchestration is executed."""

    tasks: str = setting("", panel="Data")
    """JSONL tasks (question/problem, answer, id), or a --benchmark file."""
    out: str = setting("runs/run.jsonl", panel="Output")
    """Where to write the log (orchrm.run/1 records)."""
    base_url: str | None = setting(None, panel="Server")
    """OpenAI-compatible server up to /v1 (vLLM, SGLang, a hosted API); default:
    $OPENAI_BASE_URL, else http://127.0.0.1:8000/v1."""
    api_key: str | None = setting(None, panel="Server")
    """Bearer token of the server; default: $OPENAI_API_KEY, else EMPTY (vLLM accepts it)."""
    model: str = setting("default", panel="Server")
    """Model for every role not set below (vLLM: its --served-model-name)."""
    orchestrator_model: str | None = setting(None, panel="Server")
    """Model that writes the orchestrations (default: model)."""
    subagent_model: str | None = setting(None, panel="Server")
    """Model that answers the sub-agents (default: model)."""
    samples: int = setting(4, min=1, panel="Data")
    """Orchestrations sampled per task (the N of best-of-N)."""
    dom: Literal["low", "high"] = setting("high", panel="Data")
    """Degree of multi-agent structure the orchestrator is asked for."""
    example: bool = setting(False, panel="Data")
    """Show the orchestrator one worked example (a task and its plan) before each task:
    small models follow the format far more often with it."""
    limit: int | None = setting(None, min=1, panel="Data")
    """Use only the first N tasks."""
    corpus: str | None = setting(None, panel="Data")
    """JSONL corpus searched by WebSearchAgent (BM25)."""
    orchestrator_id: str | None = setting(None, panel="Output")
    """Name recorded for the orchestrator (default: its model)."""
    benchmark: Literal[BENCHMARK_NAMES] | None = setting(None, panel="Data")
    """Read tasks as this benchmark's official file (its answer checker grades)."""
    context: Literal["question", "corpus"] = setting("question", panel="Data")
    """hotpotqa: paragraphs in the question, or as the search corpus."""
    seed: int = setting(0, panel="Data")
    """gpqa: seeds the option order of each question."""
    preflight: bool = setting(True, panel="Server")
    """Ask the server for its models before sampling, and stop at once when it cannot be
    reached or does not serve a model named here."""
    local: bool = setting(False, panel="Server")
    """Serve a GGUF model (default: the bundled SmolLM2-135M) with llama.cpp on loopback
    for this run: for trying the pipeline, not for results."""
    local_llm: LocalLLMConfig = field(
        default_factory=LocalLLMConfig, metadata={"panel": "Local model"}
    )
    """The model --local serves and how (context per slot, slots, threads)."""
    run: RunConfig = field(default_factory=RunConfig, metadata={"panel": "Execution"})
    """How each orchestration is executed (temperature, timeouts, retries, concurrency)."""

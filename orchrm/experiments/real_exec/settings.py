"""The real-execution study's settings (`orchrm.experiments.real_exec.run`): the task mix,
the sizes, the server's and the executor's settings and what they decide (`run_config`,
`execution_setup`), the llama.cpp server they start, and the clock of a run's stages."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from orchrm.configs import config, setting
from orchrm.errors import ConfigError
from orchrm.experiments.real_exec.evaluate import RUNS_PER_SEED
from orchrm.runtime.config import RunConfig
from orchrm.runtime.local_llm import LocalLLM, LocalLLMConfig
from orchrm.runtime.openai_backend import OpenAIBackend, OpenAIConfig
from orchrm.tasks.benchmarks.generated import world_corpus

MIX: tuple[tuple[str, int], ...] = (
    ("add", 1),
    ("mul", 1),
    ("compare", 1),
    ("capital", 1),
    ("capital", 2),
    ("founded", 1),
    ("founded", 2),
)
"""(kind, level) cells the train and test tasks cycle through: where `calibrate`
measured the best and worst sub-agent types `SPREAD` points apart or more
(`orchrm.experiments.real_exec.tables`; seed 0, 12 arithmetic tasks a cell over two
calibrations, 6 retrieval tasks a cell; docs/results.md): CoT or SC against Debate or
Reflexion on small sums, products and comparisons, and web search against every other
type on the retrieval questions one passage answers. `capital1`, the same one-passage
question as `capital2` whose 6 tasks had none right, completes the retrieval cells."""


@config(frozen=True)
class Sizes:
    """How many tasks, plans a task (N), training steps and executions of each held-out
    plan a draw (K) a run has."""

    train_tasks: int
    test_tasks: int
    samples: int
    steps: int
    reruns: int


QUICK = Sizes(train_tasks=6, test_tasks=6, samples=4, steps=20, reruns=2)
FULL = Sizes(train_tasks=56, test_tasks=140, samples=4, steps=150, reruns=3)


@config(frozen=True)
class RealExecSettings:
    """One run's settings: the sizes, the server's and the executor's."""

    out: str = "runs/real-exec"
    sizes: Sizes = FULL
    execution_seeds: tuple[int, ...] = (0, 1)
    """One draw each: held-out run k of seed E has seed E * 1000 + k; the training plans
    run once, with seed E * 1000 of the first."""
    max_tokens: int = setting(96, min=1)
    """Completion tokens a sub-agent call."""
    slots: int = setting(8, min=1)
    """llama.cpp's parallel slots."""
    threads: int = setting(0, min=0)
    """llama.cpp's threads (0: every core)."""
    concurrency: int = setting(16, min=1)
    """Plans executed at once."""
    seed: int = 0
    tasks_only: bool = False
    """Write the training and held-out task files into OUT/logs and stop: nothing runs."""
    calibrate_tasks: int = setting(4, min=1)
    """`calibrate`: tasks a (kind, level) cell."""
    members: int = setting(1, min=1)
    """Reward models trained as an ensemble (`orchrm train --ensemble`), scored by its
    default aggregate; 1: one model."""
    train_runs: int = setting(1, min=1)
    """Executions of each training plan (runs 0 to R - 1 of the first execution seed).
    With 2 or more, correct-over-incorrect pairs are judged on each plan's success rate
    over its R runs (`orchrm pairs mine --denoise`) and read as soft labels."""
    cache: str = ""
    """The executions cache ('': OUT/executions.jsonl); runs that differ only in their
    reward model can share one, one run at a time."""
    backbone: str = ""
    """The reward model's backbone (a Hugging Face model directory or name; '': the
    default, MiniLM)."""
    kinds: tuple[str, ...] = ()
    """`calibrate`: these task kinds only (empty: every kind)."""


def check(settings: RealExecSettings) -> None:
    """Raise ConfigError for settings no run can have."""
    seeds, k = settings.execution_seeds, settings.sizes.reruns
    if not seeds or len(set(seeds)) < len(seeds) or min(seeds) < 0:
        raise ConfigError(f"execution seeds {seeds}: give one or more distinct seeds >= 0")
    if not 1 <= k < RUNS_PER_SEED:
        raise ConfigError(f"reruns {k}: give 1 to {RUNS_PER_SEED - 1} executions a plan")
    if settings.train_runs >= RUNS_PER_SEED:
        raise ConfigError(
            f"train runs {settings.train_runs}: give 1 to {RUNS_PER_SEED - 1} executions a "
            "training plan"
        )


def cache_path(settings: RealExecSettings) -> Path:
    """The executions cache of a run: `cache`, else OUT/executions.jsonl."""
    return Path(settings.cache) if settings.cache else Path(settings.out) / "executions.jsonl"


def run_config(settings: RealExecSettings) -> RunConfig:
    """Small budgets for a 135M model on two CPU cores."""
    return RunConfig(
        max_tokens=settings.max_tokens,
        sc_samples=3,
        debate_rounds=1,
        reflexion_rounds=1,
        concurrency=settings.concurrency,
        call_timeout_s=180.0,
    )


def execution_setup(settings: RealExecSettings) -> dict:
    """What decides a run's answers besides its task, plan, seed and sample
    (`orchrm.experiments.real_exec.cache.bind_setup`): the served model, the sub-agents'
    budgets and sampling, and the corpus web search reads."""
    config = run_config(settings)
    budgets = ("temperature", "max_tokens", "sc_samples", "debate_rounds", "reflexion_rounds")
    searching = ("search_iterations", "search_k")
    passages = "\n".join(f"{d.id}\t{d.text}" for d in world_corpus().documents)
    return {
        "model": LocalLLMConfig().alias,
        **{name: getattr(config, name) for name in (*budgets, *searching)},
        "corpus_sha256": hashlib.sha256(passages.encode()).hexdigest(),
    }


# --------------------------------------------------------------------------- the server


def serve(settings: RealExecSettings) -> LocalLLM:
    """The llama.cpp server of SmolLM2-135M-Instruct, started by `with`."""
    return LocalLLM(LocalLLMConfig(slots=settings.slots, ctx_size=2048, threads=settings.threads))


NO_PROMPT_CACHE = {"cache_prompt": False}
"""Sent with every request: llama.cpp computes each prompt afresh instead of reusing a
cached prefix, whose logits differ in the last bits from a fresh computation, so that
the same seed repeats a run."""


def _server(llm: LocalLLM) -> OpenAIBackend:
    return OpenAIBackend(
        OpenAIConfig(base_url=llm.base_url, model=llm.model, extra_body=NO_PROMPT_CACHE)
    )


Serve = Callable[[RealExecSettings], AbstractContextManager]
"""Settings -> a `with` block that yields a `ChatBackend` to execute on, which `async
with` opens and which answers `preflight` (`llama`: SmolLM2 on llama.cpp)."""


@contextmanager
def llama(settings: RealExecSettings) -> Iterator[OpenAIBackend]:
    """A client of SmolLM2-135M-Instruct on llama.cpp (`serve`), for the `with` block."""
    with serve(settings) as llm:
        yield _server(llm)


@dataclass
class Clock:
    """Seconds per stage, in order."""

    seconds: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    mark: float = field(default_factory=time.perf_counter)

    def lap(self, stage: str) -> None:
        """Add the seconds since the last lap to `stage`."""
        now = time.perf_counter()
        self.seconds[stage] = round(self.seconds.get(stage, 0.0) + now - self.mark, 1)
        self.mark = now

    def total(self) -> float:
        return time.perf_counter() - self.started

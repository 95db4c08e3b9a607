"""Settings of the SmolLM2 GRPO comparison (`orchrm.experiments.rl_real.run`): its sizes,
the policy's training and the server's, and the executor every stage executes plans
with, through the seeded execution cache."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

from orchrm.configs import config
from orchrm.errors import ConfigError
from orchrm.experiments.real_exec.cache import Execution, ExecutionCache, parsed_plan
from orchrm.experiments.real_exec.evaluate import run_seed
from orchrm.experiments.real_exec.settings import (
    RealExecSettings,
    Sizes,
    _server,
    run_config,
    serve,
)
from orchrm.orchestration import Orchestration, validate
from orchrm.runtime.backend import ChatBackend
from orchrm.tasks.benchmarks.generated import GeneratedTask, grade, world_corpus
from orchrm.world.templates import structure_of

METHODS = ("warmup", "orchrm", "execution")
"""`warmup`: the warm-up policy with no further training; `orchrm` and `execution`:
GRPO from it with that reward."""
TRAIN_SEED = run_seed(0, 0)
"""Execution seed of the reward model's training plans, as the benchmark runs them."""
REWARD_SEED = run_seed(7, 0)
"""Execution seed of the plans execution-reward GRPO samples (each its own sample
index)."""
EVAL_DRAW = 1
"""Held-out run k of every policy's plans has seed `run_seed(EVAL_DRAW, k)`."""


@config(frozen=True)
class RLRealSizes:
    """Tasks, steps and samples of a run."""

    train_tasks: int
    """Training tasks: the reward model's plans and GRPO's prompts."""
    test_tasks: int
    """Held-out tasks of the evaluation."""
    rm_samples: int
    """Plans a training task from each template orchestrator, for the reward model."""
    rm_steps: int
    """Reward-model training steps (16 pairs each)."""
    warmup_steps: int
    """Supervised warm-up steps."""
    warmup_tasks: int
    """Tasks a warm-up step; each brings `warmup_plans` plans."""
    warmup_plans: int
    """Base template plans a training task in the warm-up's data."""
    steps: int
    """GRPO steps."""
    prompts_per_step: int
    """Tasks a GRPO step."""
    num_generations: int
    """Samples a task a GRPO step (the group)."""
    eval_samples: int
    """Plans a held-out task (M)."""
    eval_runs: int
    """Executions a held-out plan (K)."""
    untrained_tasks: int
    """Held-out tasks the untrained model writes one plan for (its valid share)."""
    max_new_tokens: int = 384
    """Most tokens of a sampled plan (the template plans have 120 to 320)."""


QUICK = RLRealSizes(
    train_tasks=7,
    test_tasks=4,
    rm_samples=2,
    rm_steps=10,
    warmup_steps=4,
    warmup_tasks=2,
    warmup_plans=2,
    steps=2,
    prompts_per_step=2,
    num_generations=2,
    eval_samples=1,
    eval_runs=1,
    untrained_tasks=2,
)
FULL = RLRealSizes(
    train_tasks=28,
    test_tasks=28,
    rm_samples=4,
    rm_steps=150,
    warmup_steps=30,
    warmup_tasks=2,
    warmup_plans=4,
    steps=24,
    prompts_per_step=2,
    num_generations=4,
    eval_samples=2,
    eval_runs=2,
    untrained_tasks=8,
)


@config(frozen=True)
class RLRealSettings:
    """One run's settings: sizes, the policy and its training, the server's."""

    out: str = "runs/rl-real"
    sizes: RLRealSizes = FULL
    methods: tuple[str, ...] = METHODS
    policy: str = "smollm2"
    """The orchestrator: `smollm2` (the bundled GGUF), a causal-LM directory or a GGUF."""
    rm: str = ""
    """A reward model directory; empty: train one into OUT (stage 1)."""
    rm_backbone: str = ""
    """The backbone of the reward model trained here ('': the default, MiniLM)."""
    lora_r: int = 16
    lora_alpha: int = 32
    warmup_lr: float = 1e-3
    lr: float = 2e-4
    """GRPO's learning rate (AdamW on the LoRA, 5% warmup, then constant)."""
    temperature: float = 1.0
    """Sampling temperature while training and evaluating."""
    prompt_grad: bool = False
    """Back-propagate through the prompt too (`orchrm.rl.pretrained`)."""
    micro_batch: int = 8
    """Sequences a forward and backward pass."""
    threads: int = 0
    """PyTorch threads (0: every core)."""
    slots: int = 8
    """llama.cpp's parallel slots."""
    concurrency: int = 16
    """Plans executed at once."""
    max_tokens: int = 96
    """Completion tokens a sub-agent call."""
    seed: int = 0
    tasks_only: bool = False
    """Write the training and held-out task files into OUT/logs and stop: nothing runs."""
    progress: bool = True

    def real_exec(self) -> RealExecSettings:
        """The real-execution benchmark's settings this run executes and trains the
        reward model with."""
        s = self.sizes
        return RealExecSettings(
            out=self.out,
            sizes=Sizes(s.train_tasks, s.test_tasks, s.rm_samples, s.rm_steps, 1),
            execution_seeds=(0,),
            max_tokens=self.max_tokens,
            slots=self.slots,
            concurrency=self.concurrency,
            seed=self.seed,
            tasks_only=self.tasks_only,
            backbone=self.rm_backbone,
        )

    def check(self) -> None:
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown or not self.methods:
            raise ConfigError(f"methods {list(self.methods)}: choose from {', '.join(METHODS)}")
        if self.sizes.num_generations < 2:
            raise ConfigError("GRPO needs num_generations >= 2 (the group is the baseline)")


Clients = Callable[[], ChatBackend]
"""Makes a fresh client of the server that executes sub-agent calls."""
Serve = Callable[[RealExecSettings], AbstractContextManager[Clients]]


@contextmanager
def llama_clients(settings: RealExecSettings) -> Iterator[Clients]:
    """SmolLM2-135M-Instruct on llama.cpp for the `with` block, as a maker of clients."""
    with serve(settings) as llm:
        yield lambda: _server(llm)


@dataclass
class Executor:
    """Executes plans on the server through the cache, counting what ran."""

    clients: Clients
    cache: ExecutionCache
    settings: RealExecSettings
    progress: bool = True
    seconds: float = 0.0

    def run(self, executions: list[Execution], description: str) -> None:
        """Execute what the cache lacks of `executions`."""
        missing = self.cache.missing(executions)
        if not missing:
            return
        started = time.perf_counter()

        async def go():
            async with self.clients() as server:
                await self.cache.execute(
                    server,
                    missing,
                    run_config(self.settings),
                    retriever=world_corpus(),
                    progress=self.progress,
                    description=description,
                )

        asyncio.run(go())
        self.seconds += time.perf_counter() - started

    def outcome(self, e: Execution, task: GeneratedTask) -> tuple[bool, int]:
        """(right, tokens) of an executed run; (False, 0) for one that failed."""
        result = self.cache.result(e)
        if result is None or result.error is not None:
            return False, result.total_tokens if result else 0
        return bool(grade(result.answer, task.task.answer)), result.total_tokens


def runnable_plan(text: str) -> Orchestration | None:
    """The plan a sample writes when it parses and breaks no graph rule, else None."""
    parsed = parsed_plan(text)
    if isinstance(parsed, Orchestration) and not validate(parsed):
        return parsed
    return None


def plan_shape(o: Orchestration) -> str:
    """The plan's template structure, or its agent types in order for another plan."""
    record = {"orchestration": {"agents": [{"type": a.type, "id": a.id} for a in o.agents]}}
    known = structure_of(record)
    return known if known != "?" else ">".join(a.type for a in o.agents)

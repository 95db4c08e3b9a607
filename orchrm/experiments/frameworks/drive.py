"""orchrm driven by the RL frameworks' own client code on the world's plans, at a scale of
one's choosing.

verl (`verl_run`): verl's `RewardLoopWorker` (`orchrm.rl.verl_loop`) rewards a batch of
responses (`verl_rows`: plans of the world's two orchestrators, some broken off) from many
executor threads, against a seeded MiniLM reward model scored on the CPU in fp32; the run
counts the model loads, the rewards that differ from scoring each response alone and the
scoring rounds the concurrent calls were batched into.

OpenRLHF (`openrlhf_run`): OpenRLHF's `SingleTurnAgentExecutor`
(`orchrm.experiments.frameworks.openrlhf_rollout`) posts a rollout's single-sample reward requests
(`world_plans`) at once to `orchrm serve` in its own process; the run counts every HTTP
attempt, the retries and the samples left without a reward.

verl and OpenRLHF are imported inside the functions that use them, so importing this
module needs neither.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from orchrm.world.orchestrators import orchestrators
from orchrm.world.tasks import generate_tasks

BROKEN = "<thinking>half a plan</thinking>\n<agent>\n  <agent_id>A</agent_id>"
"""An orchestrator output cut off mid-plan: it does not parse."""


def verl_rows(samples: int) -> list:
    """(task, orchestrator output) for each sample: plans of the world's two
    orchestrators over 16 math tasks, with every 16th output broken off mid-plan."""
    tasks = generate_tasks("math", 16, seed=5)
    writers = orchestrators(5)
    out = []
    for n in range(samples):
        task = tasks[n % len(tasks)]
        text, _ = writers[("base", "specialized")[n % 2]].write(task, n // 32)
        out.append((task, BROKEN if n % 16 == 7 else text))
    return out


def world_plans() -> list[tuple[str, str]]:
    """(question, harmony text) the world's two orchestrators wrote: 8 math tasks, 2
    samples each."""
    out = []
    for task in generate_tasks("math", 8, seed=1):
        for writer in orchestrators(0).values():
            for sample in range(2):
                out.append((task.question, writer.write(task, sample)[0]))
    return out


def seeded_minilm(folder: Path) -> Path:
    """The default backbone with a reward head seeded 0, saved in `folder` as orchrm
    saves a model, at 64 tokens: most plans are cut, so a wrong truncation shows in the
    rewards."""
    import torch

    from orchrm.rmodel.backbone import load_backbone
    from orchrm.rmodel.tokens import default_backbone
    from orchrm.training.build import save_model

    torch.manual_seed(0)
    model, tokenizer = load_backbone(default_backbone())
    metadata = {"max_length": 64, "reward_mean": 0.5, "reward_std": 2.0}
    return save_model(model, tokenizer, folder, metadata)


@dataclass(frozen=True)
class VerlRun:
    """What `verl_run` measured."""

    samples: int
    valid: float
    """Responses that parse into a runnable plan (verl's `valid` summed)."""
    threads: int
    seconds: float
    """Wall time of the reward loop alone."""
    loads: int
    """Times the worker process loaded the reward model."""
    wrong: int
    """Rewards that differ by more than 1e-4 from scoring each response alone."""
    rounds: int
    """Scoring rounds the concurrent calls were batched into."""
    largest_round: int
    """Calls in the largest round."""


def verl_run(samples: int, threads: int) -> VerlRun:
    """verl's reward loop over `verl_rows(samples)` from `threads` executor threads, with
    `seeded_minilm` as the reward model (scored in fp32), against the same rows scored one
    at a time."""
    from orchrm.rl import verl_reward
    from orchrm.rl.verl_loop import (
        data_proto,
        one_at_a_time,
        run_reward_loop,
        smollm2_tokenizer,
        verl_config,
    )
    from orchrm.rmodel import backbone

    folder = Path(tempfile.mkdtemp())
    rows = verl_rows(samples)
    rm_dir = seeded_minilm(folder / "rm")
    policy, tokenizer = smollm2_tokenizer(folder / "policy")
    expected = one_at_a_time(rm_dir, rows)
    loads = []
    real = backbone.load_backbone
    backbone.load_backbone = lambda *a, **k: loads.append(a[0]) or real(*a, **k)
    try:
        config = verl_config(policy, rm_path=rm_dir, dtype="fp32")
        data = data_proto(rows, tokenizer)
        start = time.perf_counter()
        outputs = run_reward_loop(config, data, threads)
        seconds = time.perf_counter() - start
    finally:
        backbone.load_backbone = real
    wrong = sum(abs(o["reward_score"] - e) > 1e-4 for o, e in zip(outputs, expected, strict=True))
    (scorer,) = verl_reward._SCORERS.values()
    batcher = scorer.__dict__["_callers"]
    valid = sum(o["reward_extra_info"]["valid"] for o in outputs)
    return VerlRun(
        samples, valid, threads, seconds, len(loads), wrong, batcher.rounds, batcher.largest_round
    )


@dataclass(frozen=True)
class OpenRLHFRun:
    """What `openrlhf_run` measured."""

    at_once: int
    options: tuple[str, ...]
    """The `orchrm serve` options the server ran with."""
    peak: int
    """The most requests in flight at once."""
    statuses: dict
    """Every HTTP attempt's outcome (its status, or `error` for a failed connection)."""
    missing: int
    """Samples left without a reward after OpenRLHF's tries."""
    seconds: float

    @property
    def attempts(self) -> int:
        return sum(self.statuses.values())

    @property
    def retries(self) -> int:
        """Attempts beyond one per sample."""
        return self.attempts - self.at_once


def openrlhf_run(at_once: int, options: list[str] | tuple[str, ...] = ()) -> OpenRLHFRun:
    """`at_once` single-sample reward requests (the world's plans in turn, under a ChatML
    policy tokenizer) posted at once by OpenRLHF's executor to `orchrm serve` (its own
    process, fp32, default limits unless `options` set them) serving `seeded_minilm`."""
    from orchrm.experiments.frameworks.openrlhf_rollout import (
        Posts,
        chatml_tokenizer,
        rollout,
        sample,
    )
    from orchrm.serve.process import orchrm_serve

    folder = Path(tempfile.mkdtemp())
    plans = world_plans()
    tokenizer = chatml_tokenizer(plans)
    model = seeded_minilm(folder / "model")
    samples = [sample(tokenizer, *plans[i % len(plans)]) for i in range(at_once)]
    with Posts() as posts, orchrm_serve(model, folder / "serve.log", *options) as port:
        start = time.monotonic()
        outputs = rollout(samples, tokenizer, f"http://127.0.0.1:{port}/get_reward")
        seconds = time.monotonic() - start
    missing = sum(o["reward"] is None for o in outputs)
    return OpenRLHFRun(at_once, tuple(options), posts.peak, dict(posts.statuses), missing, seconds)

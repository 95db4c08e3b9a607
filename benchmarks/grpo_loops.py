"""The two GRPO loops on the same work: TRL's `GRPOTrainer` (`orchrm.rl.grpo`, what
`orchrm rl` runs) against orchrm's own loop with shared-prompt sampling
(`orchrm.rl.pretrained`, what the real-orchestrator study runs), each training the
bundled SmolLM2-135M-Instruct with the same LoRA on the same orchestrator prompts.

    .venv/bin/python benchmarks/grpo_loops.py                  # 2 tasks x 4 samples, 384 tokens
    .venv/bin/python benchmarks/grpo_loops.py --steps 2 --max-new-tokens 32   # a quick look

Same work in both: fp32, LoRA of rank `lora_r` on every linear layer, AdamW at `lr`,
`prompts` tasks a step with `samples` samples each of at most `max_new_tokens` tokens
at temperature 1, one on-policy update a step, no KL (TRL's default: no reference model
and no old-policy pass). The reward is the same cheap function of the text in both
(distinct words over 100): it spreads within every group, so both loops compute every
sample; a learned reward's cost would be the same in both and is left out. The first
step of each loop (one-off costs) is not timed; the table gives the mean of the others,
per step and per 1,000 sampled tokens (an untrained SmolLM2 writes prose, mostly to the
token limit, so the loops sample about as much).
"""

from __future__ import annotations

import resource
import statistics
import tempfile
import time
from pathlib import Path

from orchrm.cli.script import run_script
from orchrm.configs import config, setting
from orchrm.errors import ConfigError

LOOPS = {"own": "orchrm's own loop", "trl": "TRL GRPOTrainer"}


@config(frozen=True)
class LoopSettings:
    """The benchmark's options."""

    steps: int = setting(3, min=2)
    """GRPO steps of each loop; the first is not timed."""
    prompts: int = setting(2, min=1)
    """Tasks a step (the real-orchestrator study's `prompts_per_step`)."""
    samples: int = setting(4, min=2)
    """Samples a task (its `num_generations`)."""
    max_new_tokens: int = setting(384, min=1)
    """Most tokens of a sample (its `max_new_tokens`)."""
    lora_r: int = setting(16, min=1)
    """LoRA rank (its `lora_r`; alpha is twice it)."""
    lr: float = 2e-4
    """Learning rate (its `lr`)."""
    threads: int = setting(0, min=0)
    """Torch threads (0: torch's default)."""
    loops: tuple[str, ...] = ("own", "trl")
    """The loops to run, in this order (`own`, `trl`); one alone gives its own peak
    memory."""


def reward(texts: list[str]) -> list[float]:
    """The stand-in reward: distinct words of each text over 100."""
    return [len(set(t.split())) / 100 for t in texts]


def tasks(s: LoopSettings):
    from orchrm.world.tasks import generate_tasks

    return generate_tasks("math", s.prompts * s.steps, seed=0)


def run_trl(s: LoopSettings, out: Path) -> list[tuple[float, int]]:
    """(seconds, sampled tokens) of each step of TRL's `GRPOTrainer`."""
    from transformers import TrainerCallback

    from orchrm.experiments.rl_world.data import prompt_rows
    from orchrm.rl.config import GRPOConfig, PolicyConfig
    from orchrm.rl.grpo import train_grpo
    from orchrm.rl.rewards import completion_text

    steps: list[list] = []

    def score(prompts, completions, completion_ids, **_):
        steps[-1][1] += sum(len(ids) for ids in completion_ids)
        return reward([completion_text(c) for c in completions])

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            steps.append([time.perf_counter(), 0])

        def on_step_end(self, args, state, control, **kw):
            steps[-1][0] = time.perf_counter() - steps[-1][0]

    policy = PolicyConfig(
        model="smollm2",
        steps=s.steps,
        lr=s.lr,
        max_completion_length=s.max_new_tokens,
        progress=False,
    )
    grpo = GRPOConfig(
        num_generations=s.samples,
        prompts_per_step=s.prompts,
        beta=0.0,
        lora_r=s.lora_r,
        lora_alpha=2 * s.lora_r,
    )
    train_grpo(policy, grpo, score, prompt_rows(tasks(s), chat=True), out, callbacks=[Clock()])
    return [tuple(step) for step in steps]


def run_own(s: LoopSettings) -> list[tuple[float, int]]:
    """(seconds, sampled tokens) of each step of orchrm's own loop."""
    import torch

    from orchrm.rl.pretrained import (
        grpo_step,
        load_pretrained,
        make_optimizer,
        prompt_ids,
        sample_groups,
    )

    model, tokenizer = load_pretrained("smollm2", lora_r=s.lora_r, lora_alpha=2 * s.lora_r)
    optimizer, scheduler = make_optimizer(model, s.lr, s.steps)
    generator = torch.Generator().manual_seed(0)
    drawn = tasks(s)
    steps = []
    for step in range(s.steps):
        batch = drawn[step * s.prompts : (step + 1) * s.prompts]
        start = time.perf_counter()
        ids = [prompt_ids(tokenizer, t.question) for t in batch]
        groups = sample_groups(
            model,
            tokenizer,
            ids,
            s.samples,
            s.max_new_tokens,
            temperature=1.0,
            generator=generator,
        )
        rewards = reward([x.text for g in groups for x in g])
        grpo_step(model, tokenizer, optimizer, scheduler, ids, groups, rewards)
        steps.append((time.perf_counter() - start, sum(x.tokens for g in groups for x in g)))
    return steps


def main(s: LoopSettings) -> None:
    """Run both loops, one after the other; print seconds a step and a 1,000 tokens."""
    import torch

    if s.threads:
        torch.set_num_threads(s.threads)
    unknown = set(s.loops) - set(LOOPS)
    if unknown or not s.loops:
        raise ConfigError(f"loops {list(s.loops)}: choose from {', '.join(LOOPS)}")
    rows, peaks = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for loop in s.loops:
            rows[LOOPS[loop]] = run_own(s) if loop == "own" else run_trl(s, Path(tmp))
            peaks[LOOPS[loop]] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(
        f"SmolLM2-135M-Instruct, LoRA r={s.lora_r}, fp32, {torch.get_num_threads()} threads; "
        f"{s.prompts} tasks x {s.samples} samples of <= {s.max_new_tokens} tokens a step; "
        f"mean of steps 2 to {s.steps}; peak: the process's peak resident memory when the "
        "loop ended (GiB)"
    )
    print(
        f"{'loop':<20}{'s a step':>10}{'tokens a step':>15}{'s a 1k tokens':>15}"
        f"{'x first':>9}{'peak':>7}"
    )
    first = None
    for name, steps in rows.items():
        timed = steps[1:]
        sec = statistics.fmean(t for t, _ in timed)
        tokens = statistics.fmean(n for _, n in timed)
        per_k = 1000 * sec / max(tokens, 1)
        first = first or per_k
        print(
            f"{name:<20}{sec:>10.1f}{tokens:>15.0f}{per_k:>15.2f}{per_k / first:>9.2f}"
            f"{peaks[name]:>7.1f}"
        )


if __name__ == "__main__":
    run_script(LoopSettings, main, doc=__doc__)

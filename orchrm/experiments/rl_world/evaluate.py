"""Held-out evaluation of an orchestrator policy on world tasks, and the training curve's
points (`curve_callback`), for `orchrm rl` (`orchrm.experiments.rl_world.pipeline`) and its
comparison report (`orchrm.experiments.rl_world.compare`).

For each held-out task the policy samples `samples` orchestrations. Three accuracies, each
a mean over tasks with a 95% BCa bootstrap interval over tasks
(`orchrm.evaluation.metrics.Bootstrap`):
- expected: the mean of each orchestration's exact success probability on its task
  (`orchrm.world.model.success_probability`, 0 when it does not parse or is invalid):
  what executing the policy's orchestration scores on average, without execution noise.
  The main comparison uses it: its intervals are several times tighter.
- executed: each orchestration run once on the world's sub-agents, graded.
- majority@N: the N executions vote on the answer (`orchrm.selection.selectors.majority_selector`).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

from orchrm.evaluation.metrics import Bootstrap
from orchrm.experiments.rl_world.config import RLExperimentConfig
from orchrm.rl.policy import policy_prompt, sample
from orchrm.rl.rewards import run_plans, runnable
from orchrm.runtime.executor import RunItem
from orchrm.selection.selectors import Candidate, CandidateSet, majority_selector
from orchrm.tasks.grading import grade
from orchrm.world.backend import WorldBackend
from orchrm.world.generate import world_config
from orchrm.world.model import success_probability
from orchrm.world.tasks import WorldTask


@dataclass
class PolicyEval:
    """One evaluation of a policy on held-out tasks."""

    step: int
    """The training step the policy was evaluated at."""
    tasks: int
    samples: int
    """Orchestrations sampled per task."""
    expected: float
    """Mean true success probability of the sampled valid orchestrations (invalid: 0)."""
    expected_ci: tuple[float, float]
    executed: float
    """Share right when each sample is executed once."""
    executed_ci: tuple[float, float]
    majority: float | None
    """Share right by majority vote over a task's executed samples (None: not run)."""
    majority_ci: tuple[float, float] | None
    valid: float
    """Share of sampled orchestrations that parse into a valid graph."""
    parsed: float
    """Share that parse at all (valid or not)."""
    mean_tokens: float
    """Mean tokens of a sampled orchestration."""
    seconds: float
    by_type: dict[str, float] = field(default_factory=dict)
    """Share of agents of each sub-agent type in the valid samples (what the policy
    learned to use)."""


@dataclass
class _Read:
    """The sampled orchestrations of every task, read before any runs."""

    items: list[RunItem] = field(default_factory=list)
    """The valid ones, to execute."""
    where: list[tuple[int, int]] = field(default_factory=list)
    """(task, sample) of each item."""
    expected: list[float] = field(default_factory=list)
    """Each task's mean exact success probability over its samples (invalid: 0)."""
    parsed: int = 0
    """Samples that parse (valid or not)."""
    types: dict[str, int] = field(default_factory=dict)
    """Agents of each sub-agent type in the valid samples."""


def _read_samples(tasks: list[WorldTask], drawn: list, world) -> _Read:
    """Each sample parsed and validated, the valid ones made run items and scored in
    closed form on their task."""
    read = _Read()
    for t, group in zip(tasks, drawn, strict=True):
        row = []
        for s, draw in enumerate(group):
            o = runnable(draw.text)
            read.parsed += o is not None or _parses(draw.text)
            row.append(o)
            if o is not None:
                read.items.append(RunItem(o, t.question, t.id, s))
                read.where.append((len(read.expected), s))
                for a in o.agents:
                    read.types[a.type] = read.types.get(a.type, 0) + 1
        read.expected.append(
            statistics.fmean(success_probability(t, o, world) if o else 0.0 for o in row)
        )
    return read


def _grade(
    tasks: list[WorldTask], answers: list[list], samples: int, majority: bool
) -> tuple[list[float], list[float]]:
    """Each task's share of right answers over its samples, and, with `majority`, whether
    its samples' vote is right (else an empty list)."""
    executed, voted = [], []
    for t, row in zip(tasks, answers, strict=True):
        right = [bool(grade(a, t.answer, t.domain)) if a is not None else False for a in row]
        executed.append(sum(right) / samples)
        if majority:
            candidates = tuple(Candidate(None, a, c) for a, c in zip(row, right, strict=True))
            chosen = majority_selector(CandidateSet(t.id, t.question, candidates, t.domain)).index
            voted.append(float(right[chosen]))
    return executed, voted


def evaluate_policy(
    model,
    tokenizer,
    tasks: list[WorldTask],
    config: RLExperimentConfig,
    *,
    step: int = 0,
    majority: bool = True,
) -> PolicyEval:
    """Sample `config.eval_samples` orchestrations of at most
    `config.policy.max_completion_length` tokens per task, score them in closed form,
    execute them and vote (see the module docstring); `config.seed` seeds the sampling,
    the world and the intervals."""
    start = time.perf_counter()
    samples, seed = config.eval_samples, config.seed
    prompts = [policy_prompt(t.question) for t in tasks]
    drawn = sample(
        model,
        tokenizer,
        prompts,
        samples,
        config.policy.max_completion_length,
        seed=seed,
        batch_size=256,
    )
    world = world_config()
    backend = WorldBackend(tasks, seed, None, world)
    read = _read_samples(tasks, drawn, world)
    results = run_plans(backend, world, read.items)
    answers = [[None] * samples for _ in tasks]
    for (i, s), r in zip(read.where, results, strict=True):
        answers[i][s] = r.answer
    executed, voted = _grade(tasks, answers, samples, majority)
    total = len(tasks) * samples
    n_agents = sum(read.types.values()) or 1
    intervals = Bootstrap(seed=seed)
    return PolicyEval(
        step=step,
        tasks=len(tasks),
        samples=samples,
        expected=statistics.fmean(read.expected),
        expected_ci=intervals.mean(read.expected),
        executed=statistics.fmean(executed),
        executed_ci=intervals.mean(executed),
        majority=statistics.fmean(voted) if majority else None,
        majority_ci=intervals.mean(voted) if majority else None,
        valid=len(read.items) / total,
        parsed=read.parsed / total,
        mean_tokens=statistics.fmean(d.tokens for group in drawn for d in group),
        seconds=time.perf_counter() - start,
        by_type={k: v / n_agents for k, v in sorted(read.types.items())},
    )


def _parses(text: str) -> bool:
    from orchrm.parse import ParseError, parse_harmony

    try:
        parse_harmony(text)
    except ParseError:
        return False
    return True


def curve_callback(
    tokenizer, tasks, config: RLExperimentConfig, at_steps: set[int], say=print, tracker=None
):
    """A `transformers.TrainerCallback` that appends a `PolicyEval` (`evaluate_policy` with
    `config`, no vote) to its `points` at each step in `at_steps`, and logs it to
    `tracker` (`orchrm.training.tracking.Tracker`, `curve_scalars`) when one is given;
    transformers is imported here, so this module imports without it."""
    from transformers import TrainerCallback

    class _Curve(TrainerCallback):
        def __init__(self):
            self.points: list[PolicyEval] = []

        def on_step_end(self, args, state, control, model=None, **kwargs):
            if state.global_step not in at_steps or model is None:
                return
            training = model.training
            point = evaluate_policy(
                model, tokenizer, tasks, config, step=state.global_step, majority=False
            )
            model.train(training)
            self.points.append(point)
            if tracker is not None:
                tracker.log(curve_scalars(point), point.step)
            say(
                f"  step {point.step}: expected accuracy {100 * point.expected:.1f}% "
                f"(valid {100 * point.valid:.0f}%)"
            )

    return _Curve()


def curve_scalars(point: PolicyEval, name: str = "eval") -> dict:
    """A curve point as tracker scalars: expected and executed accuracy, majority vote
    when run, valid and parsed shares, mean tokens of a sampled orchestration."""
    values = {
        "expected_accuracy": point.expected,
        "executed_accuracy": point.executed,
        "majority_accuracy": point.majority,
        "valid": point.valid,
        "parsed": point.parsed,
        "mean_tokens": point.mean_tokens,
    }
    return {name: values}

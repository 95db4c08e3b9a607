"""What executing an orchestration will cost, predicted from the plan alone, before
anything runs; and how well the prediction tracks the measured cost of run logs.

Each sub-agent type has a call pattern (`orchrm.runtime.agents`, bounded by `RunConfig`),
which its entry in `orchrm.orchestration.AGENT_REGISTRY` states as data: its `steps`,
each one call, a `RunConfig` count of calls (per debate role, maybe at once), or calls
that stop early (a mean between a floor and the `RunConfig` count). A `CostModel` holds
what the pattern leaves open: the mean prompt and completion tokens of each kind of call,
and the mean calls of each step that stops early. `fit_cost_model` learns them from
`orchrm.run/1` logs; the defaults, the registry's, are typical of the world's logs.

An agent reads the output of every agent with an edge into it, in each of its calls, so
an edge adds the source's output length to every call of its target. Latency follows
the critical path: agents run as soon as their inputs are ready (`orchrm.runtime.
executor`), so the longest chain of sequential calls through the graph is what a run
waits for.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

from orchrm.orchestration import AGENT_REGISTRY, Agent, AgentType, CallStep, Orchestration
from orchrm.runtime.config import RunConfig

DEFAULT_CALL_TOKENS: dict[tuple[str, str], tuple[float, float]] = {
    (name, step.name): step.tokens for name, kind in AGENT_REGISTRY.items() for step in kind.steps
}
"""(prompt, completion) tokens of one call of each (sub-agent type, step), for a call
that reads no upstream output: each step's `tokens` in the registry."""
DEFAULT_MEAN_CALLS: dict[tuple[str, str], float] = {
    (name, step.name): step.mean_calls
    for name, kind in AGENT_REGISTRY.items()
    for step in kind.steps
    if step.mean_calls is not None
}
"""Mean calls of each (sub-agent type, step) that stops early: the registry's."""
FALLBACK_CALL_TOKENS = (300.0, 300.0)
"""A call of a kind neither the model nor the defaults know (an unknown agent type)."""
FINAL_STEP = {name: kind.final_step for name, kind in AGENT_REGISTRY.items()}
"""The call whose text an agent passes downstream."""


@dataclass
class CostModel:
    """What a call pattern leaves open, per kind of call."""

    call_tokens: dict[tuple[str, str], tuple[float, float]] = field(
        default_factory=lambda: dict(DEFAULT_CALL_TOKENS)
    )
    """(prompt, completion) tokens of one call by (sub-agent type, step), for a call
    that reads no upstream output."""
    mean_calls: dict[tuple[str, str], float] = field(
        default_factory=lambda: dict(DEFAULT_MEAN_CALLS)
    )
    """Calls of an agent on average by (sub-agent type, step), for the steps that stop
    early (Reflexion's critic and refinement, WebSearch's search turns), each kept
    within its step's `min_calls` and `RunConfig` count."""

    def tokens(self, agent_type: str, step: str) -> tuple[float, float]:
        return self.call_tokens.get((agent_type, step), FALLBACK_CALL_TOKENS)


@dataclass(frozen=True)
class PredictedCost:
    """What an orchestration is expected to spend when executed once."""

    calls: float
    """LLM calls of every sub-agent."""
    tokens: float
    """Prompt + completion tokens of those calls."""
    critical_path_calls: float
    """Sequential calls on the longest path through the graph: the latency in calls."""


def _roles(agent: Agent, kind: AgentType) -> int:
    """The debate roles an agent's calls go round: its own, at least its type's minimum."""
    return max(kind.min_roles, len(agent.debate_roles or ()))


def _step_calls(
    agent: Agent, kind: AgentType, step: CallStep, config: RunConfig, model: CostModel
) -> float:
    """Expected calls of one step of an agent of type `kind`."""
    if not step.count:
        return 1.0
    most = getattr(config, step.count)
    if step.mean_calls is None:
        calls = float(most)
    elif not most:
        return 0.0
    else:
        mean = model.mean_calls.get((kind.name, step.name), step.mean_calls)
        calls = min(max(mean, step.min_calls), most)
    return calls * _roles(agent, kind) if step.per_role else calls


def agent_calls(agent: Agent, config: RunConfig, model: CostModel) -> dict[str, float]:
    """Expected calls of one agent, by step (one answer call for an unknown type)."""
    kind = AGENT_REGISTRY.get(agent.type)
    if kind is None:
        return {"answer": 1.0}
    return {step.name: _step_calls(agent, kind, step, config, model) for step in kind.steps}


def agent_depth(agent: Agent, calls: dict[str, float]) -> float:
    """Sequential calls of one agent making `calls` by step, expected or logged: the calls
    it waits for one after another. A step whose calls run `at_once` waits for one, or for
    one per round of its roles when they are `per_role` (SC's samples, a Debate round's
    roles); a step its type does not make counts every call."""
    kind = AGENT_REGISTRY.get(agent.type)
    steps = {step.name: step for step in kind.steps} if kind else {}
    total = 0.0
    for name, count in calls.items():
        step = steps.get(name)
        if step is not None and step.at_once:
            total += math.ceil(count / _roles(agent, kind)) if step.per_role else 1.0
        else:
            total += count
    return total


def predict_cost(
    orchestration: Orchestration,
    run_config: RunConfig | None = None,
    model: CostModel | None = None,
) -> PredictedCost:
    """The expected calls, tokens and critical-path calls of one execution of
    `orchestration` under `run_config`, from its graph alone. A direct answer costs
    nothing. A plan that breaks a graph rule costs what its agents would (with a cycle,
    the critical path follows declaration order), so that a plan which cannot run never
    looks cheap."""
    config, model = run_config or RunConfig(), model or CostModel()
    if not orchestration.agents:
        return PredictedCost(0.0, 0.0, 0.0)
    order = orchestration.topological_order() or list(
        dict.fromkeys(a.id for a in orchestration.agents)
    )
    known = {a.id for a in orchestration.agents}
    sources: dict[str, list[str]] = {i: [] for i in known}
    for e in set(orchestration.edges):
        if e.source in known and e.target in known and e.source != e.target:
            sources[e.target].append(e.source)
    calls = tokens = 0.0
    finish: dict[str, float] = {}
    for agent_id in order:
        agent = orchestration.agent(agent_id)
        pattern = agent_calls(agent, config, model)
        upstream = [orchestration.agent(u) for u in sources[agent_id]]
        read = sum(model.tokens(u.type, FINAL_STEP.get(u.type, "answer"))[1] for u in upstream)
        for step, count in pattern.items():
            prompt, completion = model.tokens(agent.type, step)
            tokens += count * (prompt + read + completion)
        calls += sum(pattern.values())
        start = max((finish[u] for u in sources[agent_id] if u in finish), default=0.0)
        finish[agent_id] = start + agent_depth(agent, pattern)
    return PredictedCost(calls, tokens, max(finish.values()))


@dataclass(frozen=True)
class MeasuredCost:
    """What one logged execution spent."""

    calls: int
    tokens: int
    critical_path_calls: int
    """Sequential calls on the longest path, counted from the logged calls."""


def measured_cost(record: dict) -> MeasuredCost | None:
    """The cost an executed `orchrm.run/1` record logs (None: not executed, or no
    parsed orchestration). Tokens are `tokens.execution` (the execution's prompt +
    completion), calls the logged calls."""
    execution = record.get("execution") if isinstance(record, dict) else None
    if not execution or not record.get("orchestration"):
        return None
    from orchrm.parse import from_dict

    o = from_dict(record["orchestration"])
    tokens = (record.get("tokens") or {}).get("execution", execution.get("total_tokens", 0))
    calls = execution.get("calls") or []
    by_agent = _steps_by_agent(calls)
    finish: dict[str, float] = {}
    for agent_id in o.topological_order() or []:
        agent = o.agent(agent_id)
        steps = by_agent.get(agent_id, {})
        depth = agent_depth(agent, steps) if steps else 0.0
        start = max(
            (finish[e.source] for e in o.edges if e.target == agent_id and e.source in finish),
            default=0.0,
        )
        finish[agent_id] = start + depth
    return MeasuredCost(len(calls), int(tokens or 0), int(max(finish.values(), default=0.0)))


def _steps_by_agent(calls: list[dict]) -> dict[str, dict[str, int]]:
    """Logged calls counted by agent and step."""
    out: dict[str, dict[str, int]] = {}
    for c in calls:
        steps = out.setdefault(c["agent_id"], {})
        steps[c["step"]] = steps.get(c["step"], 0) + 1
    return out


def fit_cost_model(records: Iterable[dict]) -> CostModel:
    """A `CostModel` from executed `orchrm.run/1` records: mean tokens of each kind of
    call, over calls of agents that read no upstream output (the kinds no such call
    shows keep their defaults), and the mean calls of each step that stops early."""
    from orchrm.parse import from_dict

    tokens: dict[tuple[str, str], list[tuple[int, int]]] = {}
    per_agent: dict[str, list[dict[str, int]]] = {name: [] for name, _ in DEFAULT_MEAN_CALLS}
    for r in records:
        execution = r.get("execution") if isinstance(r, dict) else None
        if not execution or not r.get("orchestration"):
            continue
        o = from_dict(r["orchestration"])
        fed = {e.target for e in o.edges}
        calls = execution.get("calls") or []
        steps = _steps_by_agent(calls)
        for c in calls:
            if c["agent_id"] not in fed:
                key = (c["agent_type"], c["step"])
                tokens.setdefault(key, []).append((c["prompt_tokens"], c["completion_tokens"]))
        if execution.get("error"):
            continue  # a run cut short says nothing of how long agents go on
        for agent in o.agents:
            if agent.type in per_agent and agent.id in steps:
                per_agent[agent.type].append(steps[agent.id])
    model = CostModel()
    for key, seen in tokens.items():
        model.call_tokens[key] = (
            statistics.fmean(p for p, _ in seen),
            statistics.fmean(c for _, c in seen),
        )
    for name, step in DEFAULT_MEAN_CALLS:
        if per_agent[name]:
            model.mean_calls[(name, step)] = statistics.fmean(
                s.get(step, 0) for s in per_agent[name]
            )
    return model


@dataclass(frozen=True)
class CostCorrelation:
    """Predicted against measured cost over the executed records of a log."""

    executions: int
    pearson: dict[str, float]
    """Pearson correlation by measure: calls, tokens, critical_path_calls (NaN when a
    side does not vary)."""
    spearman: dict[str, float]
    """Spearman (rank) correlation by measure."""
    mean_predicted: dict[str, float]
    mean_measured: dict[str, float]


MEASURES = ("calls", "tokens", "critical_path_calls")
"""The cost measures `PredictedCost` and `MeasuredCost` share."""


def cost_correlation(
    records: Iterable[dict], run_config: RunConfig | None = None, model: CostModel | None = None
) -> CostCorrelation:
    """How well `predict_cost` tracks the measured cost of the executed records."""
    from orchrm.parse import from_dict

    predicted: dict[str, list[float]] = {m: [] for m in MEASURES}
    measured: dict[str, list[float]] = {m: [] for m in MEASURES}
    for r in records:
        spent = measured_cost(r)
        if spent is None:
            continue
        guess = predict_cost(from_dict(r["orchestration"]), run_config, model)
        for m in MEASURES:
            predicted[m].append(float(getattr(guess, m)))
            measured[m].append(float(getattr(spent, m)))
    count = len(measured["calls"])
    return CostCorrelation(
        count,
        {m: _pearson(predicted[m], measured[m]) for m in MEASURES},
        {m: _pearson(_ranks(predicted[m]), _ranks(measured[m])) for m in MEASURES},
        {m: statistics.fmean(predicted[m]) if count else math.nan for m in MEASURES},
        {m: statistics.fmean(measured[m]) if count else math.nan for m in MEASURES},
    )


def _pearson(xs: list[float], ys: list[float]) -> float:
    if len(xs) < 2:
        return math.nan
    try:
        return statistics.correlation(xs, ys)
    except statistics.StatisticsError:  # a constant side
        return math.nan


def _ranks(values: list[float]) -> list[float]:
    """Ranks from 1, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks

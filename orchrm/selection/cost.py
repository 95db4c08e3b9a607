"""What executing an orchestration will cost, predicted from the plan alone, before
anything runs; and how well the prediction tracks the measured cost of run logs.

Each sub-agent type has a call pattern (`orchrm.runtime.agents`, bounded by `RunConfig`):
CoT 1 call; SC `sc_samples` calls at once; Debate `roles x debate_rounds` calls (the
roles of a round at once) + 1 final decision; Reflexion 1 answer, then critic and
refinement rounds until the critic accepts (at most `reflexion_rounds`); WebSearch search
turns until it has what it needs (at most `search_iterations`) + 1 summary. A `CostModel`
holds what the pattern leaves open: the mean prompt and completion tokens of each kind
of call, and how many rounds Reflexion and WebSearch go on average. `fit_cost_model`
learns them from `orchrm.run/1` logs; the defaults are typical of the world's logs.

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

from orchrm.orchestration import Agent, Orchestration
from orchrm.runtime.config import RunConfig

DEFAULT_CALL_TOKENS: dict[tuple[str, str], tuple[float, float]] = {
    ("CoTAgent", "answer"): (90.0, 480.0),
    ("SCAgent", "answer"): (65.0, 470.0),
    ("DebateAgent", "debate"): (600.0, 276.0),
    ("DebateAgent", "decide"): (700.0, 178.0),
    ("ReflexionAgent", "answer"): (65.0, 484.0),
    ("ReflexionAgent", "critic"): (550.0, 132.0),
    ("ReflexionAgent", "refine"): (560.0, 440.0),
    ("WebSearchAgent", "search"): (107.0, 27.0),
    ("WebSearchAgent", "summary"): (105.0, 212.0),
}
"""(prompt, completion) tokens of one call of each (sub-agent type, step), for a call
that reads no upstream output: rounded `fit_cost_model` means of world logs (math, search
and multihop)."""
FALLBACK_CALL_TOKENS = (300.0, 300.0)
"""A call of a kind neither the model nor the defaults know (an unknown agent type)."""
FINAL_STEP = {
    "CoTAgent": "answer",
    "SCAgent": "answer",
    "DebateAgent": "decide",
    "ReflexionAgent": "refine",
    "WebSearchAgent": "summary",
}
"""The call whose text an agent passes downstream."""


@dataclass
class CostModel:
    """What a call pattern leaves open, per kind of call."""

    call_tokens: dict[tuple[str, str], tuple[float, float]] = field(
        default_factory=lambda: dict(DEFAULT_CALL_TOKENS)
    )
    """(prompt, completion) tokens of one call by (sub-agent type, step), for a call
    that reads no upstream output."""
    reflexion_critics: float = 1.25
    """Critic calls of a Reflexion agent on average (1 to `reflexion_rounds`)."""
    reflexion_refines: float = 0.25
    """Refinement calls of a Reflexion agent on average (0 to `reflexion_rounds`)."""
    search_turns: float = 2.2
    """Search-step calls of a WebSearch agent on average (1 to `search_iterations`)."""

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


def agent_calls(agent: Agent, config: RunConfig, model: CostModel) -> dict[str, float]:
    """Expected calls of one agent, by step."""
    if agent.type == "CoTAgent":
        return {"answer": 1.0}
    if agent.type == "SCAgent":
        return {"answer": float(config.sc_samples)}
    if agent.type == "DebateAgent":
        roles = max(2, len(agent.debate_roles or ()))
        return {"debate": float(roles * config.debate_rounds), "decide": 1.0}
    if agent.type == "ReflexionAgent":
        rounds = config.reflexion_rounds
        return {
            "answer": 1.0,
            "critic": min(max(model.reflexion_critics, 1.0), rounds) if rounds else 0.0,
            "refine": min(max(model.reflexion_refines, 0.0), rounds),
        }
    if agent.type == "WebSearchAgent":
        turns = min(max(model.search_turns, 1.0), config.search_iterations)
        return {"search": turns if config.search_iterations else 0.0, "summary": 1.0}
    return {"answer": 1.0}


def agent_depth(agent: Agent, calls: dict[str, float], config: RunConfig) -> float:
    """Sequential calls of one agent: the calls it waits for one after another (SC's
    samples and a Debate round's roles run at once)."""
    if agent.type == "SCAgent":
        return 1.0
    if agent.type == "DebateAgent":
        return float(config.debate_rounds) + 1.0
    return sum(calls.values())


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
        finish[agent_id] = start + agent_depth(agent, pattern, config)
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
        depth = _measured_depth(agent, steps) if steps else 0.0
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


def _measured_depth(agent: Agent, steps: dict[str, int]) -> float:
    if agent.type == "SCAgent":
        return 1.0
    if agent.type == "DebateAgent":
        roles = max(2, len(agent.debate_roles or ()))
        return math.ceil(steps.get("debate", 0) / roles) + steps.get("decide", 0)
    return float(sum(steps.values()))


def fit_cost_model(records: Iterable[dict]) -> CostModel:
    """A `CostModel` from executed `orchrm.run/1` records: mean tokens of each kind of
    call, over calls of agents that read no upstream output (the kinds no such call
    shows keep their defaults), and the mean Reflexion and WebSearch rounds."""
    from orchrm.parse import from_dict

    tokens: dict[tuple[str, str], list[tuple[int, int]]] = {}
    per_agent: dict[str, list[dict[str, int]]] = {"ReflexionAgent": [], "WebSearchAgent": []}
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
    if per_agent["ReflexionAgent"]:
        model.reflexion_critics = statistics.fmean(
            s.get("critic", 0) for s in per_agent["ReflexionAgent"]
        )
        model.reflexion_refines = statistics.fmean(
            s.get("refine", 0) for s in per_agent["ReflexionAgent"]
        )
    if per_agent["WebSearchAgent"]:
        model.search_turns = statistics.fmean(
            s.get("search", 0) for s in per_agent["WebSearchAgent"]
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

"""The world's success model: what decides each sub-agent call, and the exact success
probability of any (task, orchestration).

One function, `call_logit`, gives the log-odds that a call of an agent is right, from
what the agent is (`AgentView`: type, debate roles, sub-task) and how many of its inputs
were right. The simulated backend plays every call from it; `success_probability`
composes the same numbers in closed form over the graph (every joint outcome of the
agents is enumerated, so shared ancestors are exact), with each sub-agent type's
aggregation written out in `SUCCESS`: SC's vote, Reflexion's critic loop, WebSearch's
fact finding.

Beside it, `PRIORS`: how much the world's orchestrators favour each type as a plan's
main solver. These two tables and the registry are the world's only per-type data keyed
by a type's name; everything else reads the registry's entries.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from orchrm.orchestration import (
    AGENT_REGISTRY,
    Orchestration,
    replace_references,
    require_every_type,
    validate,
)
from orchrm.runtime.config import RunConfig
from orchrm.world.tasks import TOPICS, WorldTask

INPUT_GAIN = 0.5
"""Log-odds gained by an agent whose inputs were all right."""
MISLEAD = 2.0
"""Log-odds lost by an agent when all its inputs were wrong (pro rata when some were)."""
KNOWLEDGE_GAP = 0.8
"""Log-odds lost per fact that must be searched for, by an agent that does not search
and got no correct input."""
FOUND_GAIN = 2.0
"""Log-odds a WebSearch summary gains once the facts it needs are found."""
NOT_FOUND = -2.5
"""Log-odds shift of a WebSearch summary that lacks some needed fact."""
FOCUS_BONUS = 0.2
"""Added to the per-turn search success when the sub-task names the facts to find."""
ACCEPT_CORRECT = 0.9
"""Chance a Reflexion critic accepts a right attempt."""
BREAK = 0.3
"""Chance a refinement turns a wrongly rejected right attempt into a wrong one."""


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


@dataclass(frozen=True)
class AgentView:
    """What decides an agent's calls: its type, debate roles, its sub-task with the
    `${...}` references removed ('' when it works on the original question), how many
    inputs it reads."""

    type: str
    roles: tuple[str, ...] = ()
    sub_task: str = ""
    n_inputs: int = 0


def views(o: Orchestration) -> dict[str, AgentView]:
    """The `AgentView` of each agent of a parsed orchestration."""
    return {
        a.id: AgentView(
            a.type,
            tuple(a.debate_roles or ()),
            " ".join(replace_references(a.input, lambda _: " ").split()),
            sum(1 for e in set(o.edges) if e.target == a.id),
        )
        for a in o.agents
    }


def roles_match(task: WorldTask, roles: tuple[str, ...]) -> bool:
    """Whether a debate has an expert of the task's topic among its roles."""
    experts = TOPICS.get(task.topic, {}).get("experts", ())
    return any(e in r.lower() for r in roles for e in experts)


def needed_facts(task: WorldTask, sub_task: str) -> tuple[int, bool]:
    """(facts a search agent must find, whether its sub-task names them)."""
    named = [e for e in task.hop_entities if re.search(rf"\b{re.escape(e)}\b", sub_task, re.I)]
    return (len(named), True) if named else (task.hops, False)


def call_logit(task: WorldTask, view: AgentView, inputs_right: int) -> float:
    """Log-odds that one answering call of this agent is right."""
    z = task.skill + task.affinity.get(view.type, -2.0)
    if view.sub_task or view.n_inputs:
        z += task.decomposition  # the work was split: decomposable tasks gain, others lose
    all_right = view.n_inputs > 0 and inputs_right == view.n_inputs
    if view.n_inputs:
        z += INPUT_GAIN if all_right else -MISLEAD * (1 - inputs_right / view.n_inputs)
    kind = AGENT_REGISTRY.get(view.type)
    if kind is not None and kind.min_roles:
        z += task.role_gain if roles_match(task, view.roles) else -task.role_gain / 2
    if task.hops and not (kind is not None and kind.searches) and not all_right:
        z -= KNOWLEDGE_GAP * task.hops
    return z


def search_rate(task: WorldTask, view: AgentView) -> float:
    """Chance that one search turn of this agent finds the next fact it needs."""
    _, focused = needed_facts(task, view.sub_task)
    return min(0.95, task.search_rate + (FOCUS_BONUS if focused else 0.0))


Success = Callable[[WorldTask, AgentView, float, RunConfig], float]
"""(task, agent, log-odds of one answering call, run policy) -> P(the agent's final
answer is right)."""


def one_call(task: WorldTask, view: AgentView, z: float, config: RunConfig) -> float:
    """The final answer is one call's: a chain of thought, a debate's final decision."""
    return sigmoid(z)


def vote(task: WorldTask, view: AgentView, z: float, config: RunConfig) -> float:
    """`sc_samples` calls vote (`sc_success`)."""
    return sc_success(sigmoid(z), task.distractor_weights, config.sc_samples)


def critic_loop(task: WorldTask, view: AgentView, z: float, config: RunConfig) -> float:
    """An answer, then critic and refinement rounds (`reflexion_success`)."""
    return reflexion_success(sigmoid(z), task.checkable, config.reflexion_rounds)


def search_then_answer(task: WorldTask, view: AgentView, z: float, config: RunConfig) -> float:
    """Search turns for the facts the agent needs, then a summary that gains when they
    were all found and loses when not; one call when there is nothing to find."""
    if not task.hops:
        return sigmoid(z)
    need, _ = needed_facts(task, view.sub_task)
    found = prob_at_least(need, config.search_iterations, search_rate(task, view))
    return found * sigmoid(z + FOUND_GAIN) + (1 - found) * sigmoid(z + NOT_FOUND)


SUCCESS: dict[str, Success] = {
    "CoTAgent": one_call,
    "SCAgent": vote,
    "DebateAgent": one_call,
    "ReflexionAgent": critic_loop,
    "WebSearchAgent": search_then_answer,
}
"""How each registered sub-agent type's calls make its final answer, in the world."""
require_every_type(SUCCESS, "orchrm.world.model.SUCCESS")


@dataclass(frozen=True)
class Priors:
    """How much the world's orchestrators (`orchrm.world.orchestrators`) favour one
    sub-agent type as a plan's main solver."""

    base: float
    """The base orchestrator's weight on the type."""
    specialized: float
    """The specialized orchestrator's weight on it when no cue decides (a type that
    `searches` gets `NO_FACTS_PRIOR` instead on a task with nothing to look up)."""


PRIORS: dict[str, Priors] = {
    "CoTAgent": Priors(base=4, specialized=2),
    "SCAgent": Priors(base=2, specialized=3),
    "DebateAgent": Priors(base=2, specialized=2),
    "ReflexionAgent": Priors(base=2, specialized=3),
    "WebSearchAgent": Priors(base=1, specialized=3),
}
"""Each registered sub-agent type's weights as the world's orchestrators draw a solver."""
require_every_type(PRIORS, "orchrm.world.model.PRIORS")
NO_FACTS_PRIOR = 0.5
"""The specialized orchestrator's weight on a type that searches, for a task with no
facts to look up."""


def agent_success(task: WorldTask, view: AgentView, inputs_right: int, config: RunConfig) -> float:
    """Probability that the agent's final answer is right, given its inputs (an unknown
    type's is one call's)."""
    z = call_logit(task, view, inputs_right)
    return SUCCESS.get(view.type, one_call)(task, view, z, config)


def prob_at_least(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) >= k)."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


def reflexion_success(q: float, checkable: float, rounds: int) -> float:
    """Answer (right with `q`), then up to `rounds` of critic and refinement. The critic
    accepts a right attempt with ACCEPT_CORRECT and a wrong one with 1 - 0.8 checkable; a
    refinement fixes a wrong attempt with 0.6 checkable and breaks a right one with BREAK."""
    accept_wrong, fix = 1 - 0.8 * checkable, 0.6 * checkable
    right, wrong, final = q, 1 - q, 0.0
    for _ in range(rounds):
        final += right * ACCEPT_CORRECT
        rejected_right, rejected_wrong = right * (1 - ACCEPT_CORRECT), wrong * (1 - accept_wrong)
        right = rejected_right * (1 - BREAK) + rejected_wrong * fix
        wrong = rejected_right * BREAK + rejected_wrong * (1 - fix)
    return final + right  # the last refinement stands when the rounds run out


def sc_success(q: float, weights: tuple[float, ...], samples: int) -> float:
    """P(the vote of `samples` answers is right), each right with `q`, a wrong one landing
    on distractor i with `weights[i]`; ties go to the answer seen first (as `majority`)."""
    coefficients = _sc_coefficients(tuple(round(w, 9) for w in weights), samples)
    return sum(c * q**a * (1 - q) ** (samples - a) for a, c in enumerate(coefficients))


@lru_cache(maxsize=4096)
def _sc_coefficients(weights: tuple[float, ...], samples: int) -> tuple[float, ...]:
    """For each number a of right samples: the total weight of the sample sequences
    with a right answers whose vote is right (0 = right, i = distractor i)."""
    coefficients = [0.0] * (samples + 1)
    for seq in itertools.product(range(len(weights) + 1), repeat=samples):
        counts = [seq.count(v) for v in range(len(weights) + 1)]
        top = max(counts)
        winner = next(v for v in seq if counts[v] == top)
        if winner == 0:
            coefficients[counts[0]] += math.prod(weights[v - 1] for v in seq if v)
    return tuple(coefficients)


def success_probability(
    task: WorldTask, o: Orchestration, config: RunConfig | None = None
) -> float:
    """The exact probability that executing `o` on `task` gives the right answer.

    An invalid orchestration is not executed (0); a direct answer is right or not.
    """
    config = config or RunConfig()
    if validate(o):
        return 0.0
    if not o.agents:
        return 1.0 if (o.direct_answer or "").strip() == task.answer else 0.0
    agent_views = views(o)
    order = o.topological_order() or []
    inputs = {i: [e.source for e in set(o.edges) if e.target == i] for i in order}
    position = {agent_id: n for n, agent_id in enumerate(order)}
    states: dict[tuple[bool, ...], float] = {(): 1.0}
    for agent_id in order:
        view = agent_views[agent_id]
        grown: dict[tuple[bool, ...], float] = {}
        for state, p in states.items():
            right_inputs = sum(state[position[s]] for s in inputs[agent_id])
            q = agent_success(task, view, right_inputs, config)
            grown[(*state, True)] = grown.get((*state, True), 0.0) + p * q
            grown[(*state, False)] = grown.get((*state, False), 0.0) + p * (1 - q)
        states = grown
    sink = position[o.sink]
    return sum(p for state, p in states.items() if state[sink])

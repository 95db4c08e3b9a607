"""Edits of an orchestration that keep it valid: the moves a search over plans makes.

Each kind of edit is a function from a valid `Orchestration` to every plan one such
edit makes of it (an empty list when the kind does not apply), registered once in
`EDITS` under its name. Every plan an edit returns obeys the graph rules (`validate`):
edges and `${id}` references are rewired together, the single sink and the answer
follow the graph, debate agents get roles, and a low-DoM plan that grows a second agent
becomes a high-DoM graph. The thinking is left as the orchestrator wrote it.

- `retype`: one sub-agent becomes another type;
- `add_checker`: a new final agent checks the sink's answer (a chain of thought,
  self-consistency, debate or reflexion);
- `insert_step`: a self-consistency, debate or reflexion step reviews an inner agent's
  output before the agents that read it (it wraps the agent);
- `remove`: one agent goes, the agents that read it read its inputs instead;
- `split`: an agent gets a parallel twin of another type on the same inputs, read by
  its readers too (the sink's twin meets it in a new reconciling agent);
- `merge`: of two inner agents on the same inputs, one goes and its readers read the
  other.

`neighbours(o)` applies every kind and keeps the distinct plans within a size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from orchrm.orchestration.agent_types import AGENT_REGISTRY, AGENT_TYPES, RECONCILER
from orchrm.orchestration.model import (
    Agent,
    DoM,
    Edge,
    Orchestration,
    replace_references,
)
from orchrm.orchestration.validation import validate


@dataclass(frozen=True)
class Edit:
    """One edited plan and how it was made."""

    kind: str
    """The edit's name in `EDITS`."""
    what: str
    """The edit in words, naming the agents it touched ("Solve: <old type> -> <new type>")."""
    plan: Orchestration


EditKind = Callable[[Orchestration], list[Edit]]
"""Every plan one edit of a kind makes of a valid orchestration."""

EDITS: dict[str, EditKind] = {}
"""Every kind of edit by name, each registered once."""

CHECKER_TYPES = tuple(t for t in AGENT_TYPES if AGENT_REGISTRY[t].checks)
"""The types `add_checker` adds (registry entries with `checks`)."""
STEP_TYPES = tuple(t for t in AGENT_TYPES if AGENT_REGISTRY[t].reviews)
"""The types `insert_step` inserts (registry entries with `reviews`)."""
MAX_AGENTS = 8
"""`neighbours` leaves out plans with more agents than this."""


def _register(name: str) -> Callable[[EditKind], EditKind]:
    def add(kind: EditKind) -> EditKind:
        if name in EDITS:
            raise ValueError(f"edit kind {name!r} is registered twice")
        EDITS[name] = kind
        return kind

    return add


def neighbours(
    o: Orchestration, kinds: tuple[str, ...] | None = None, max_agents: int = MAX_AGENTS
) -> list[Edit]:
    """Every plan one edit of `kinds` (all of `EDITS` when None) makes of `o`, in
    registry order, each plan once, none equal to `o` and none with more than
    `max_agents` agents. A plan that breaks a graph rule, answers directly or already
    has more than `max_agents` agents has none (so the work stays small whatever the
    plan's size)."""
    if not o.agents or len(o.agents) > max_agents or validate(o):
        return []
    seen = {o}
    out = []
    for name in kinds or tuple(EDITS):
        for edit in EDITS[name](o):
            if edit.plan not in seen and len(edit.plan.agents) <= max_agents:
                seen.add(edit.plan)
                out.append(edit)
    return out


# --------------------------------------------------------------------------- graph helpers


def _fresh_id(o: Orchestration, base: str) -> str:
    """`base`, or `base_2`, `base_3`, ...: the first that no agent of `o` has."""
    taken = {a.id for a in o.agents} | {a.output_id for a in o.agents if a.output_id}
    if base not in taken:
        return base
    n = 2
    while f"{base}_{n}" in taken:
        n += 1
    return f"{base}_{n}"


def _inputs(o: Orchestration, agent_id: str) -> list[str]:
    """The agents with an edge into `agent_id`, in declaration order."""
    sources = {e.source for e in o.edges if e.target == agent_id}
    return [a.id for a in o.agents if a.id in sources]


def _readers(o: Orchestration, agent_id: str) -> list[str]:
    """The agents `agent_id` has an edge into, in declaration order."""
    targets = {e.target for e in o.edges if e.source == agent_id}
    return [a.id for a in o.agents if a.id in targets]


def _roles(o: Orchestration, agent_type: str) -> tuple[str, ...] | None:
    """The debate roles an agent of `agent_type` gets: None for a type that takes none,
    else the roles of the plan's first agent with two or more, else the type's `roles`."""
    kind = AGENT_REGISTRY[agent_type]
    if not kind.min_roles:
        return None
    return next(
        (a.debate_roles for a in o.agents if a.debate_roles and len(a.debate_roles) >= 2),
        kind.roles,
    )


def _description(agent_type: str) -> str:
    """The description an edited or added agent of `agent_type` gets."""
    return AGENT_REGISTRY[agent_type].descriptions[0]


def _new_agent(o: Orchestration, agent_id: str, agent_type: str, text: str) -> Agent:
    return Agent(agent_id, agent_type, _description(agent_type), text, _roles(o, agent_type))


def _ref(agent_id: str) -> str:
    return "${" + agent_id + "}"


def _rewrite(agent: Agent, old: str, new: str) -> Agent:
    """`agent` with each `${old}` in its input replaced by the text `new`."""
    return replace(
        agent, input=replace_references(agent.input, lambda n: new if n == old else None)
    )


def _graph(o: Orchestration, agents: list[Agent], edges: list[Edge], sink: str) -> Orchestration:
    """`o` with these agents and edges (duplicates dropped), as a high-DoM graph whose
    answer, when `o` names one, is `sink`. A low-DoM agent keeps its id and drops its
    output id (a graph names agents by id)."""
    if o.dom == DoM.LOW:
        agents = [replace(a, output_id=None) for a in agents]
    return Orchestration(
        tuple(agents),
        tuple(dict.fromkeys(edges)),
        DoM.HIGH,
        o.thinking,
        None if o.answer is None else sink,
    )


# --------------------------------------------------------------------------- the kinds


@_register("retype")
def retype(o: Orchestration) -> list[Edit]:
    """Each agent as each other type (a debate gets the plan's roles)."""
    out = []
    for n, a in enumerate(o.agents):
        for t in AGENT_TYPES:
            if t == a.type:
                continue
            roles = _roles(o, t)
            agents = list(o.agents)
            agents[n] = replace(a, type=t, description=_description(t), debate_roles=roles)
            out.append(Edit("retype", f"{a.id}: {a.type} -> {t}", replace(o, agents=tuple(agents))))
    return out


@_register("add_checker")
def add_checker(o: Orchestration) -> list[Edit]:
    """A checker of each of `CHECKER_TYPES` reads the sink's answer and gives the final one."""
    sink = o.sink
    out = []
    for t in CHECKER_TYPES:
        new = _fresh_id(o, "Check")
        text = f"Check {_ref(sink)} and give the final answer."
        plan = _graph(o, [*o.agents, _new_agent(o, new, t, text)], [*o.edges, Edge(sink, new)], new)
        out.append(Edit("add_checker", f"{t} {new} checks {sink}", plan))
    return out


@_register("insert_step")
def insert_step(o: Orchestration) -> list[Edit]:
    """A step of each of `STEP_TYPES` after each inner agent X: it reviews X's output and
    the agents that read X read the step instead."""
    sink = o.sink
    out = []
    for a in o.agents:
        if a.id == sink:
            continue
        readers = set(_readers(o, a.id))
        for t in STEP_TYPES:
            new = _fresh_id(o, f"{a.id}_review")
            step = _new_agent(o, new, t, f"Review {_ref(a.id)} and give a corrected result.")
            agents = [_rewrite(b, a.id, _ref(new)) if b.id in readers else b for b in o.agents]
            edges = [Edge(new, e.target) if e.source == a.id else e for e in o.edges]
            plan = _graph(o, [*agents, step], [*edges, Edge(a.id, new)], sink)
            out.append(Edit("insert_step", f"{t} {new} reviews {a.id}", plan))
    return out


@_register("remove")
def remove(o: Orchestration) -> list[Edit]:
    """Each agent removed, when another remains: its readers read its inputs instead
    (the question, when it had none); the sink only when it reads exactly one agent,
    which becomes the sink."""
    if len(o.agents) < 2:
        return []
    sink = o.sink
    out = []
    for a in o.agents:
        sources = _inputs(o, a.id)
        if a.id == sink and len(sources) != 1:
            continue
        readers = set(_readers(o, a.id))
        text = " and ".join(map(_ref, sources)) if sources else "the question"
        agents = [
            _rewrite(b, a.id, text) if b.id in readers else b for b in o.agents if b.id != a.id
        ]
        edges = [e for e in o.edges if a.id not in (e.source, e.target)]
        edges += [Edge(s, r) for r in sorted(readers) for s in sources]
        new_sink = sources[0] if a.id == sink else sink
        out.append(Edit("remove", f"{a.id} removed", _graph(o, agents, edges, new_sink)))
    return out


@_register("split")
def split(o: Orchestration) -> list[Edit]:
    """Each agent X with a parallel twin of each other type on X's inputs: X's readers
    read both; the sink's twin and the sink meet in a new chain of thought that
    reconciles them (a `RECONCILER`)."""
    sink = o.sink
    out = []
    for a in o.agents:
        sources = _inputs(o, a.id)
        readers = set(_readers(o, a.id))
        for t in AGENT_TYPES:
            if t == a.type:
                continue
            twin = _fresh_id(o, f"{a.id}_alt")
            added = [_new_agent(o, twin, t, a.input)]
            edges = [*o.edges, *(Edge(s, twin) for s in sources)]
            both = f"{_ref(a.id)} and {_ref(twin)}"
            agents = [_rewrite(b, a.id, both) if b.id in readers else b for b in o.agents]
            edges += [Edge(twin, r) for r in sorted(readers)]
            new_sink = sink
            if a.id == sink:
                new_sink = _fresh_id(o, "Reconcile")
                text = f"Compare {_ref(a.id)} with {_ref(twin)} and settle the answer."
                added.append(_new_agent(o, new_sink, RECONCILER, text))
                edges += [Edge(a.id, new_sink), Edge(twin, new_sink)]
            plan = _graph(o, [*agents, *added], edges, new_sink)
            out.append(Edit("split", f"{a.id} split with {t} {twin}", plan))
    return out


@_register("merge")
def merge(o: Orchestration) -> list[Edit]:
    """For two inner agents A and B on the same inputs, B removed and its readers read A
    (each ordered pair once)."""
    sink = o.sink
    inner = [a for a in o.agents if a.id != sink]
    out = []
    for a in inner:
        for b in inner:
            if a is b or set(_inputs(o, a.id)) != set(_inputs(o, b.id)):
                continue
            readers = set(_readers(o, b.id))
            agents = [_rewrite(c, b.id, _ref(a.id)) if c.id in readers else c for c in o.agents]
            agents = [c for c in agents if c.id != b.id]
            edges = [e for e in o.edges if b.id not in (e.source, e.target)]
            edges += [Edge(a.id, r) for r in sorted(readers)]
            out.append(Edit("merge", f"{b.id} merged into {a.id}", _graph(o, agents, edges, sink)))
    return out

"""Graph validation: every rule an orchestration breaks, each named with its agents."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import StrEnum

from orchrm.orchestration.agent_types import AGENT_REGISTRY
from orchrm.orchestration.model import ID_PATTERN, DoM, Edge, Orchestration


class Rule(StrEnum):
    """The graph rules of docs/formats.md#graph-rules, one value per way to break them."""

    EMPTY = "empty"  # no agent and no direct answer
    UNKNOWN_AGENT_TYPE = "unknown_agent_type"
    INVALID_AGENT_ID = "invalid_agent_id"  # ids are letters, digits and _
    DUPLICATE_AGENT_ID = "duplicate_agent_id"
    LOW_DOM_AGENT_COUNT = "low_dom_agent_count"  # low DoM allows at most one agent
    EDGE_UNKNOWN_AGENT = "edge_unknown_agent"  # <from>/<to> names an undeclared agent
    DUPLICATE_EDGE = "duplicate_edge"
    SELF_LOOP = "self_loop"
    CYCLE = "cycle"
    NO_START_NODE = "no_start_node"
    SINK_COUNT = "sink_count"  # exactly one agent may have no outgoing edge
    DISCONNECTED = "disconnected"  # an agent outside the main flow
    UNKNOWN_REFERENCE = "unknown_reference"  # ${X} where X is not an agent
    REFERENCE_WITHOUT_EDGE = "reference_without_edge"  # ${X} in Y's input, no edge X->Y
    EDGE_WITHOUT_REFERENCE = "edge_without_reference"  # edge X->Y, no ${X} in Y's input
    DEBATE_ROLES = "debate_roles"  # fewer debate roles than the type's `min_roles`
    ANSWER_MISMATCH = "answer_mismatch"  # <answer> names no agent output, or not the sink


@dataclass(frozen=True)
class Violation:
    """One broken rule: which, the agents involved, and a sentence for people."""

    rule: Rule
    agents: tuple[str, ...]
    message: str


def validate(o: Orchestration) -> list[Violation]:
    """Every rule of docs/formats.md#graph-rules this orchestration breaks (empty list: valid).

    All violations are collected, not just the first, so a report can say, for example,
    that a graph has both a cycle and an unknown agent type. Time is linear in the size
    of the orchestration (plus sorting its edges).
    """
    if not o.agents:
        if o.answer is None or not o.answer.strip():
            return [Violation(Rule.EMPTY, (), "no agent and no direct answer")]
        return []
    found = _agent_violations(o)
    known = {a.id for a in o.agents}
    graph_edges = _edge_violations(o, known, found)
    sinks = o.sinks()
    found += _graph_violations(o, graph_edges, sinks)
    found += _reference_violations(o, graph_edges)
    found += _answer_violations(o, sinks)
    return found


def _violation(rule: Rule, agents: list[str] | tuple[str, ...], message: str) -> Violation:
    return Violation(rule, tuple(agents), message)


def _agent_violations(o: Orchestration) -> list[Violation]:
    """Types, ids, debate roles, duplicates and the low-DoM agent count."""
    found = []
    for a in o.agents:
        kind = AGENT_REGISTRY.get(a.type)
        if kind is None:
            found.append(
                _violation(
                    Rule.UNKNOWN_AGENT_TYPE, [a.id], f"agent {a.id!r} has unknown type {a.type!r}"
                )
            )
        if not ID_PATTERN.fullmatch(a.id):
            found.append(
                _violation(
                    Rule.INVALID_AGENT_ID, [a.id], f"agent id {a.id!r} is not letters, digits, _"
                )
            )
        if kind is not None and len(a.debate_roles or ()) < kind.min_roles:
            n = len(a.debate_roles or ())
            message = f"{a.type} {a.id!r} has {n} role(s), needs {kind.min_roles}+"
            found.append(_violation(Rule.DEBATE_ROLES, [a.id], message))
    ids = [a.id for a in o.agents]
    declared = Counter(ids)
    for dup in sorted(i for i, n in declared.items() if n > 1):
        message = f"agent id {dup!r} is declared {declared[dup]} times"
        found.append(_violation(Rule.DUPLICATE_AGENT_ID, [dup], message))
    if o.dom == DoM.LOW and len(o.agents) > 1:
        message = f"low DoM allows one agent, found {len(ids)}"
        found.append(_violation(Rule.LOW_DOM_AGENT_COUNT, ids, message))
    return found


def _edge_violations(o: Orchestration, known: set[str], found: list[Violation]) -> set[Edge]:
    """Adds to `found` what is wrong with single edges; returns the distinct edges
    between declared agents (the graph the other rules look at)."""
    seen_edges: set[Edge] = set()
    for e in o.edges:
        missing = [x for x in (e.source, e.target) if x not in known]
        if missing:
            found.append(
                _violation(
                    Rule.EDGE_UNKNOWN_AGENT,
                    missing,
                    f"edge {e.source}->{e.target} names "
                    f"undeclared agent(s) {', '.join(map(repr, missing))}",
                )
            )
        if e.source == e.target:
            message = f"edge {e.source}->{e.target} is a self-loop"
            found.append(_violation(Rule.SELF_LOOP, [e.source], message))
        if e in seen_edges:
            message = f"edge {e.source}->{e.target} repeats"
            found.append(_violation(Rule.DUPLICATE_EDGE, [e.source, e.target], message))
        seen_edges.add(e)
    return {e for e in seen_edges if e.source in known and e.target in known}


def _graph_violations(
    o: Orchestration, graph_edges: set[Edge], sinks: list[str]
) -> list[Violation]:
    """Cycles, start node, the single sink and connectedness."""
    found = []
    ids = [a.id for a in o.agents]
    cycle = _find_cycle(ids, graph_edges)
    if cycle:
        found.append(_violation(Rule.CYCLE, cycle, "cycle " + " -> ".join([*cycle, cycle[0]])))
    has_incoming = {e.target for e in graph_edges}
    if all(i in has_incoming for i in ids):
        message = "every agent has an incoming edge: no start node"
        found.append(_violation(Rule.NO_START_NODE, [], message))
    if len(sinks) != 1:
        message = (
            f"{len(sinks)} sinks ({', '.join(sinks) or 'none'}); "
            "exactly one agent may have no outgoing edge"
        )
        found.append(_violation(Rule.SINK_COUNT, sinks, message))
    if len(set(ids)) > 1:
        outside = _outside_main_flow(ids, graph_edges)
        if outside:
            message = "not connected to the main flow: " + ", ".join(outside)
            found.append(_violation(Rule.DISCONNECTED, outside, message))
    return found


def _reference_violations(o: Orchestration, graph_edges: set[Edge]) -> list[Violation]:
    """Data flow (`${X}` in inputs) and edges must agree both ways."""
    found = []
    ids = [a.id for a in o.agents]
    known = set(ids)
    for a in o.agents:
        for ref in a.references():
            if ref not in known:
                message = f"agent {a.id!r} input refers to ${{{ref}}}, which is not an agent"
                found.append(_violation(Rule.UNKNOWN_REFERENCE, [a.id, ref], message))
            elif Edge(ref, a.id) not in graph_edges:
                message = f"agent {a.id!r} input uses ${{{ref}}} but there is no edge {ref}->{a.id}"
                found.append(_violation(Rule.REFERENCE_WITHOUT_EDGE, [ref, a.id], message))
    # Per id: where it is first declared, and what the input of that first agent uses.
    position: dict[str, int] = {}
    refs: dict[str, set[str]] = {}
    for n, a in enumerate(o.agents):
        if a.id not in position:
            position[a.id] = n
            refs[a.id] = set(a.references())
    for e in sorted(graph_edges, key=lambda e: (position[e.source], position[e.target])):
        if e.source != e.target and e.source not in refs[e.target]:
            message = f"edge {e.source}->{e.target} but {e.target!r} input has no ${{{e.source}}}"
            found.append(_violation(Rule.EDGE_WITHOUT_REFERENCE, [e.source, e.target], message))
    return found


def _answer_violations(o: Orchestration, sinks: list[str]) -> list[Violation]:
    """`<answer>` must name an agent output, and that agent must be the sink."""
    if o.answer is None or not o.answer.strip():
        return []
    answer = o.answer.strip()
    named = [a.id for a in o.agents if answer in (a.id, a.output_id)]
    if not named:
        return [_violation(Rule.ANSWER_MISMATCH, [], f"<answer> {answer!r} names no agent output")]
    if len(sinks) == 1 and named[0] != sinks[0]:
        message = f"<answer> names {named[0]!r} but the sink is {sinks[0]!r}"
        return [_violation(Rule.ANSWER_MISMATCH, [named[0], sinks[0]], message)]
    return []


def _find_cycle(ids: list[str], edges: set[Edge]) -> list[str]:
    """One cycle (agent ids in order) if the graph has any, else []. Iterative DFS."""
    successors: dict[str, list[str]] = {i: [] for i in ids}
    for e in sorted(edges, key=lambda e: (e.source, e.target)):
        if e.source != e.target:  # self-loops have their own rule
            successors[e.source].append(e.target)
    state = dict.fromkeys(ids, 0)  # 0 new, 1 on the stack, 2 done
    for root in ids:
        if state[root]:
            continue
        stack = [(root, iter(successors[root]))]
        path = [root]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                state[node] = 2
            elif state[child] == 1:
                return path[path.index(child) :]
            elif state[child] == 0:
                state[child] = 1
                stack.append((child, iter(successors[child])))
                path.append(child)
    return []


def _outside_main_flow(ids: list[str], edges: set[Edge]) -> list[str]:
    """Agents not in the largest weakly connected component (ties: the one holding the
    first-declared agent), in declaration order."""
    neighbours: dict[str, set[str]] = {i: set() for i in ids}
    for e in edges:
        neighbours[e.source].add(e.target)
        neighbours[e.target].add(e.source)
    components: list[set[str]] = []
    unseen = list(dict.fromkeys(ids))
    assigned: set[str] = set()
    for start in unseen:
        if start in assigned:
            continue
        component, frontier = {start}, [start]
        while frontier:
            for n in neighbours[frontier.pop()]:
                if n not in component:
                    component.add(n)
                    frontier.append(n)
        assigned |= component
        components.append(component)
    if len(components) == 1:
        return []
    main = max(components, key=len)  # max keeps the first of equal sizes
    return [i for i in dict.fromkeys(ids) if i not in main]

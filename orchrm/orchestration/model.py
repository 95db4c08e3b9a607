"""The orchestration types: `Orchestration`, `Agent`, `Edge`, the degree of MAS, and
the `${id}` references that wire an agent's input to other agents' outputs."""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum

LOW_DOM_DEFAULT_ID = "agent"
"""The id a low-DoM agent gets when it declares no `<agent_output_id>`."""

ID_PATTERN = re.compile(r"[A-Za-z0-9_]+")


def reference_spans(text: str) -> Iterator[tuple[int, int, str]]:
    """`(start, end, id)` of each `${id}` in `text`, left to right, in one pass.

    `${id}` in an agent input means the output of agent `id` flows into this agent. The
    id is what the braces hold, stripped of whitespace; a `${` whose next brace is `{`
    starts no reference.
    """
    close = -1  # the first "}" at or after the current body; found once, reused
    start = text.find("${")
    while start >= 0:
        body = start + 2
        if close < body:
            close = text.find("}", body)
            if close < 0:
                return
        opener = text.find("{", body, close)
        if opener >= 0:  # "${a{b}": no reference here; a later "${" may still start one
            start = text.find("${", opener - 1)
            continue
        yield start, close + 1, text[body:close].strip()
        start = text.find("${", close + 1)


def replace_references(text: str, value: Callable[[str], str | None]) -> str:
    """`text` with each `${id}` replaced by `value(id)`, or kept as written when that is
    None."""
    parts: list[str] = []
    done = 0
    for start, end, name in reference_spans(text):
        new = value(name)
        if new is not None:
            parts += [text[done:start], new]
            done = end
    return "".join(parts) + text[done:] if parts else text


class DoM(StrEnum):
    """Degree of MAS: `low` is one agent or a direct answer, `high` is a graph."""

    LOW = "low"
    HIGH = "high"


@dataclass(frozen=True)
class Agent:
    """One sub-agent of an orchestration.

    `input` is the agent's `<agent_input>` template: empty means "the original
    question"; `${X}` stands for the output of agent X. `debate_roles` is None when the
    orchestrator gave none (only a type whose `AGENT_REGISTRY` entry has `min_roles`
    needs them). `output_id` is the low-DoM `<agent_output_id>`; in a low-DoM
    orchestration the agent's `id` equals it (or `LOW_DOM_DEFAULT_ID` when absent).
    """

    id: str
    type: str
    description: str = ""
    input: str = ""
    debate_roles: tuple[str, ...] | None = None
    output_id: str | None = None

    def references(self) -> list[str]:
        """The agent ids this agent's input refers to with `${id}`, in order, unique."""
        return list(dict.fromkeys(name for _, _, name in reference_spans(self.input)))


@dataclass(frozen=True)
class Edge:
    """Data flows from agent `source` into agent `target`."""

    source: str
    target: str


@dataclass(frozen=True)
class Orchestration:
    """A parsed orchestration: agents, edges, degree of MAS, thinking and answer.

    `answer` is the content of `<answer>`: a direct final answer when there is no agent,
    otherwise the id (or output id) of the agent whose output is the answer. Nothing here
    is checked on construction; `validate` reports every rule the graph breaks.
    """

    agents: tuple[Agent, ...] = ()
    edges: tuple[Edge, ...] = ()
    dom: DoM = DoM.HIGH
    thinking: str = ""
    answer: str | None = None

    @property
    def direct_answer(self) -> str | None:
        """The final answer written without any agent, or None when agents are used."""
        return self.answer if not self.agents else None

    def agent(self, agent_id: str) -> Agent | None:
        """The agent with this id, or None."""
        return next((a for a in self.agents if a.id == agent_id), None)

    def sinks(self) -> list[str]:
        """Ids of the agents with no outgoing edge, in declaration order."""
        sources = {e.source for e in self.edges}
        return [a.id for a in self.agents if a.id not in sources]

    @property
    def sink(self) -> str | None:
        """The id of the agent whose output is the final answer, if exactly one exists."""
        sinks = self.sinks()
        return sinks[0] if len(sinks) == 1 else None

    def topological_order(self) -> list[str] | None:
        """Agent ids in an order where every edge points forward; None if there is a cycle.

        Ties keep declaration order, so the order is deterministic. Edges that name an
        unknown agent are ignored here (validation reports them).
        """
        ids = list(dict.fromkeys(a.id for a in self.agents))
        known = set(ids)
        indegree = dict.fromkeys(ids, 0)
        successors: dict[str, list[str]] = {i: [] for i in ids}
        for e in set(self.edges):
            if e.source in known and e.target in known:
                successors[e.source].append(e.target)
                indegree[e.target] += 1
        order: list[str] = []
        position = {agent_id: n for n, agent_id in enumerate(ids)}
        ready = [n for n, i in enumerate(ids) if indegree[i] == 0]  # a heap of positions
        while ready:
            current = ids[heapq.heappop(ready)]
            order.append(current)
            for nxt in successors[current]:
                indegree[nxt] -= 1
                if indegree[nxt] == 0:
                    heapq.heappush(ready, position[nxt])
        return order if len(order) == len(ids) else None

    def to_dict(self) -> dict:
        """orchrm's own JSON form: lossless (`from_dict(to_dict(x)) == x`)."""
        return {
            "format": ORCHRM_JSON_FORMAT,
            "dom": self.dom.value,
            "thinking": self.thinking,
            "answer": self.answer,
            "agents": [
                {
                    "id": a.id,
                    "type": a.type,
                    "description": a.description,
                    "input": a.input,
                    "debate_roles": None if a.debate_roles is None else list(a.debate_roles),
                    "output_id": a.output_id,
                }
                for a in self.agents
            ],
            "edges": [[e.source, e.target] for e in self.edges],
        }


ORCHRM_JSON_FORMAT = "orchrm.orchestration/1"

"""The orchestration model: types, graph validation and the two renderings.

An orchestration is the plan an orchestrator LLM writes for one task: sub-agents
(chain-of-thought, self-consistency, debate, reflexion, web search) wired into a
directed graph whose single sink produces the final answer. Everything downstream of
`orchrm.parse` sees the `Orchestration` type defined here.

Two renderings live here and nowhere else:
- `to_harmony(o)`: the harmony XML an orchestrator writes (`parse_harmony` reads it back
  to an equal object);
- `render_for_rm(question, o)`: the one text the reward model reads, in training,
  scoring, serving and GRPO alike. Its layout is versioned by `RM_RENDER_VERSION`, which
  reward-model checkpoints record and check at load time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

AGENT_TYPES: tuple[str, ...] = (
    "CoTAgent",
    "SCAgent",
    "DebateAgent",
    "ReflexionAgent",
    "WebSearchAgent",
)
"""The sub-agent types MAS-Orchestra defines (FORMAT.md section 1)."""

LOW_DOM_DEFAULT_ID = "agent"
"""The id a low-DoM agent gets when it declares no `<agent_output_id>`."""

ID_PATTERN = re.compile(r"[A-Za-z0-9_]+")
REFERENCE_PATTERN = re.compile(r"\$\{\s*([^{}]*?)\s*\}")
"""`${id}` in an agent input: the output of agent `id` flows into this agent."""

HARMONY_TAGS: tuple[str, ...] = (
    "thinking",
    "agent",
    "agent_name",
    "agent_id",
    "agent_description",
    "required_arguments",
    "agent_input",
    "debate_roles",
    "agent_output_id",
    "answer",
    "edge",
    "from",
    "to",
)
_HARMONY_TAG_RE = re.compile(r"<\s*/?\s*(" + "|".join(HARMONY_TAGS) + r")\s*>", re.IGNORECASE)
_THINKING_END_RE = re.compile(r"<\s*/\s*thinking\s*>", re.IGNORECASE)
FINAL_MARKERS: tuple[str, ...] = ("assistantfinal", "<|channel|>final<|message|>")
"""Where a gpt-oss final channel starts: with special tokens stripped (as in logs) or kept.
Harmony text is read from after the last one."""


class DoM(StrEnum):
    """Degree of MAS: `low` is one agent or a direct answer, `high` is a graph."""

    LOW = "low"
    HIGH = "high"


@dataclass(frozen=True)
class Agent:
    """One sub-agent of an orchestration.

    `input` is the agent's `<agent_input>` template: empty means "the original
    question"; `${X}` stands for the output of agent X. `debate_roles` is None when the
    orchestrator gave none (only `DebateAgent` needs them). `output_id` is the low-DoM
    `<agent_output_id>`; in a low-DoM orchestration the agent's `id` equals it (or
    `LOW_DOM_DEFAULT_ID` when absent).
    """

    id: str
    type: str
    description: str = ""
    input: str = ""
    debate_roles: tuple[str, ...] | None = None
    output_id: str | None = None

    def references(self) -> list[str]:
        """The agent ids this agent's input refers to with `${id}`, in order, unique."""
        seen: list[str] = []
        for name in REFERENCE_PATTERN.findall(self.input):
            if name not in seen:
                seen.append(name)
        return seen


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
        ready = [i for i in ids if indegree[i] == 0]
        position = {agent_id: n for n, agent_id in enumerate(ids)}
        while ready:
            current = ready.pop(0)
            order.append(current)
            for nxt in successors[current]:
                indegree[nxt] -= 1
                if indegree[nxt] == 0:
                    ready.append(nxt)
            ready.sort(key=position.__getitem__)
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


# --------------------------------------------------------------------------- validation


class Rule(StrEnum):
    """The graph rules of FORMAT.md section 1, one value per way to break them."""

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
    DEBATE_ROLES = "debate_roles"  # DebateAgent needs two or more roles
    ANSWER_MISMATCH = "answer_mismatch"  # <answer> names no agent output, or not the sink


@dataclass(frozen=True)
class Violation:
    """One broken rule: which, the agents involved, and a sentence for people."""

    rule: Rule
    agents: tuple[str, ...]
    message: str


def validate(o: Orchestration) -> list[Violation]:
    """Every rule of FORMAT.md section 1 this orchestration breaks (empty list: valid).

    All violations are collected, not just the first, so a report can say, for example,
    that a graph has both a cycle and an unknown agent type.
    """
    found: list[Violation] = []

    def add(rule: Rule, agents: list[str] | tuple[str, ...], message: str) -> None:
        found.append(Violation(rule, tuple(agents), message))

    if not o.agents:
        if o.answer is None or not o.answer.strip():
            add(Rule.EMPTY, [], "no agent and no direct answer")
        return found

    ids = [a.id for a in o.agents]
    known = set(ids)
    for a in o.agents:
        if a.type not in AGENT_TYPES:
            add(Rule.UNKNOWN_AGENT_TYPE, [a.id], f"agent {a.id!r} has unknown type {a.type!r}")
        if not ID_PATTERN.fullmatch(a.id):
            add(Rule.INVALID_AGENT_ID, [a.id], f"agent id {a.id!r} is not letters, digits, _")
        if a.type == "DebateAgent" and len(a.debate_roles or ()) < 2:
            n = len(a.debate_roles or ())
            add(Rule.DEBATE_ROLES, [a.id], f"DebateAgent {a.id!r} has {n} role(s), needs 2+")
    for dup in sorted({i for i in ids if ids.count(i) > 1}):
        add(Rule.DUPLICATE_AGENT_ID, [dup], f"agent id {dup!r} is declared {ids.count(dup)} times")
    if o.dom == DoM.LOW and len(o.agents) > 1:
        add(Rule.LOW_DOM_AGENT_COUNT, ids, f"low DoM allows one agent, found {len(ids)}")

    seen_edges: set[Edge] = set()
    for e in o.edges:
        missing = [x for x in (e.source, e.target) if x not in known]
        if missing:
            add(
                Rule.EDGE_UNKNOWN_AGENT,
                missing,
                f"edge {e.source}->{e.target} names "
                f"undeclared agent(s) {', '.join(map(repr, missing))}",
            )
        if e.source == e.target:
            add(Rule.SELF_LOOP, [e.source], f"edge {e.source}->{e.target} is a self-loop")
        if e in seen_edges:
            add(Rule.DUPLICATE_EDGE, [e.source, e.target], f"edge {e.source}->{e.target} repeats")
        seen_edges.add(e)
    graph_edges = {e for e in seen_edges if e.source in known and e.target in known}

    cycle = _find_cycle(ids, graph_edges)
    if cycle:
        add(Rule.CYCLE, cycle, "cycle " + " -> ".join([*cycle, cycle[0]]))
    has_incoming = {e.target for e in graph_edges}
    if not [i for i in ids if i not in has_incoming]:
        add(Rule.NO_START_NODE, [], "every agent has an incoming edge: no start node")
    sinks = o.sinks()
    if len(sinks) != 1:
        add(
            Rule.SINK_COUNT,
            sinks,
            f"{len(sinks)} sinks ({', '.join(sinks) or 'none'}); "
            "exactly one agent may have no outgoing edge",
        )
    if len(known) > 1:
        outside = _outside_main_flow(ids, graph_edges)
        if outside:
            add(Rule.DISCONNECTED, outside, "not connected to the main flow: " + ", ".join(outside))

    for a in o.agents:
        for ref in a.references():
            if ref not in known:
                add(
                    Rule.UNKNOWN_REFERENCE,
                    [a.id, ref],
                    f"agent {a.id!r} input refers to ${{{ref}}}, which is not an agent",
                )
            elif Edge(ref, a.id) not in graph_edges:
                add(
                    Rule.REFERENCE_WITHOUT_EDGE,
                    [ref, a.id],
                    f"agent {a.id!r} input uses ${{{ref}}} but there is no edge {ref}->{a.id}",
                )
    for e in sorted(graph_edges, key=lambda e: (ids.index(e.source), ids.index(e.target))):
        target = o.agent(e.target)
        if target is not None and e.source != e.target and e.source not in target.references():
            add(
                Rule.EDGE_WITHOUT_REFERENCE,
                [e.source, e.target],
                f"edge {e.source}->{e.target} but {e.target!r} input has no ${{{e.source}}}",
            )

    if o.answer is not None and o.answer.strip():
        named = [a.id for a in o.agents if o.answer.strip() in (a.id, a.output_id)]
        if not named:
            add(Rule.ANSWER_MISMATCH, [], f"<answer> {o.answer.strip()!r} names no agent output")
        elif len(sinks) == 1 and named[0] != sinks[0]:
            add(
                Rule.ANSWER_MISMATCH,
                [named[0], sinks[0]],
                f"<answer> names {named[0]!r} but the sink is {sinks[0]!r}",
            )
    return found


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


# --------------------------------------------------------------------------- harmony XML


def to_harmony(o: Orchestration) -> str:
    """Render as the harmony XML an orchestrator writes; `parse_harmony` reads it back.

    High DoM always writes `<agent_id>` and one `<edge>` block (empty for a single
    agent); low DoM writes neither. Raises ValueError when a field holds what would
    make the result read back differently: a harmony tag (in the thinking, only
    `</thinking>`) or a final-channel marker.
    """
    # The thinking may mention tags (parsing skips to its closing tag); other fields may
    # not. No field may hold a final-channel marker: parsing starts after the last one.
    checks = [(o.thinking, _THINKING_END_RE)] + [(t, _HARMONY_TAG_RE) for t in _texts(o)]
    for text, forbidden in checks:
        if forbidden.search(text) or any(m in text for m in FINAL_MARKERS):
            raise ValueError(f"text cannot be rendered as harmony XML: {text[:200]!r}")
    parts: list[str] = []
    if o.thinking:
        parts.append(f"<thinking>\n{o.thinking}\n</thinking>")
    for a in o.agents:
        lines = ["<agent>"]
        if o.dom == DoM.HIGH:
            lines.append(f"  <agent_id>{a.id}</agent_id>")
        lines.append(f"  <agent_name>{a.type}</agent_name>")
        lines.append(f"  <agent_description>{a.description}</agent_description>")
        lines.append("  <required_arguments>")
        lines.append(f"    <agent_input>{a.input}</agent_input>")
        if a.debate_roles is not None:
            lines.append(f"    <debate_roles>{_json_list(a.debate_roles)}</debate_roles>")
        lines.append("  </required_arguments>")
        if a.output_id is not None:
            lines.append(f"  <agent_output_id>{a.output_id}</agent_output_id>")
        lines.append("</agent>")
        parts.append("\n".join(lines))
    if o.dom == DoM.HIGH:
        pairs = "".join(f"\n  <from>{e.source}</from><to>{e.target}</to>" for e in o.edges)
        parts.append(f"<edge>{pairs}\n</edge>")
    if o.answer is not None:
        parts.append(f"<answer>{o.answer}</answer>")
    return "\n".join(parts) + "\n"


def _texts(o: Orchestration) -> list[str]:
    texts = [o.answer or ""]
    for a in o.agents:
        texts += [a.id, a.type, a.description, a.input, a.output_id or "", *(a.debate_roles or ())]
    for e in o.edges:
        texts += [e.source, e.target]
    return texts


def _json_list(items: tuple[str, ...]) -> str:
    return json.dumps(list(items), ensure_ascii=False)


# --------------------------------------------------------------------------- reward-model text

RM_RENDER_VERSION = "orchrm-rm-text/3"
"""Version of `render_for_rm`'s layout. Checkpoints record it; a change to the layout
must bump it, because a model trained on one layout misreads another."""

QUESTION_SHARE = 0.5
"""The question may take at most this share of the reward-model budget."""

TYPE_NAMES = {
    "CoTAgent": "step-by-step chain of thought",
    "SCAgent": "self-consistency: several tries vote",
    "DebateAgent": "debate between experts",
    "ReflexionAgent": "reflexion: critique and refine",
    "WebSearchAgent": "web search",
}
"""What each sub-agent type does, in words, after its class name in the reward model's
text: a pretrained backbone knows "debate" and "critique" but not "SCAgent"."""

TokenCounter = Callable[[str], int]
_APPROX_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


def approx_token_count(text: str) -> int:
    """Word pieces and punctuation marks: a tokenizer-free stand-in for token counts.

    Sub-word tokenizers produce about this many tokens or more for English; pass a real
    tokenizer's counter to `render_for_rm` wherever the exact budget matters.
    """
    return len(_APPROX_TOKEN_RE.findall(text))


def render_for_rm(
    question: str,
    o: Orchestration,
    max_tokens: int = 512,
    count_tokens: TokenCounter | None = None,
) -> str:
    """The text the reward model reads for (question, orchestration). Deterministic.

    It is `rm_prompt(question)` followed by `rm_completion(o)`, so preference data can
    store the shared question part once (`prompt`) and the orchestration part per side
    (`chosen`, `rejected`); their concatenation is exactly this text. Layout (version
    `RM_RENDER_VERSION`), structure first and thinking last:

        question: <question>
        orchestration: dom=<low|high> agents=<n> edges=<m> sink=<id|none>
        agent <id> = <type> (<what it does: TYPE_NAMES>) [roles: r1 | r2]
          input: <input, or "(original question)">
          about: <description>
        edges: a->b, b->c
        answer: <direct answer or answer id>
        thinking: <thinking>

    Agents appear in topological order (declaration order when the graph has a cycle).
    Budget (`max_tokens` by `count_tokens`, default `approx_token_count`): the question
    keeps its head within `QUESTION_SHARE` of it; the orchestration part gets the rest
    and, when over, is cut in this order: thinking, agent descriptions, agent inputs. A
    cut part ends in "..."; agent types, roles and edges are never cut.
    """
    count = count_tokens or approx_token_count
    prompt = rm_prompt(question, max_tokens, count)
    return prompt + rm_completion(o, max_tokens - count(prompt), count)


def rm_prompt(
    question: str, max_tokens: int = 512, count_tokens: TokenCounter | None = None
) -> str:
    """The question part of `render_for_rm`: `question: <question>` and a line break,
    the question cut to `QUESTION_SHARE` of `max_tokens`."""
    count = count_tokens or approx_token_count
    text = _clean(question)
    cap = int(max_tokens * QUESTION_SHARE)
    if count(f"question: {text}") > cap:
        text = _shorten(text, cap - count("question:"), count)
    return f"question: {text}\n"


def rm_completion(
    o: Orchestration, max_tokens: int = 512, count_tokens: TokenCounter | None = None
) -> str:
    """The orchestration part of `render_for_rm`, cut to `max_tokens`."""
    count = count_tokens or approx_token_count
    order = o.topological_order() or [a.id for a in o.agents]
    rank = {agent_id: n for n, agent_id in reversed(list(enumerate(order)))}
    agents = sorted(o.agents, key=lambda a: rank[a.id])  # stable: duplicates all stay

    # Each cuttable piece is a mutable slot; the layout is rebuilt after every cut.
    slots = {
        "thinking": _clean(o.thinking),
        **{f"about{n}": _clean(a.description) for n, a in enumerate(agents)},
        **{f"input{n}": _clean(a.input) for n, a in enumerate(agents)},
    }

    def layout() -> str:
        lines = [
            f"orchestration: dom={o.dom.value} agents={len(o.agents)} edges={len(o.edges)} "
            f"sink={o.sink or 'none'}"
        ]
        for n, a in enumerate(agents):
            roles = f" [roles: {' | '.join(map(_clean, a.debate_roles))}]" if a.debate_roles else ""
            named = f" ({TYPE_NAMES[a.type]})" if a.type in TYPE_NAMES else ""
            lines.append(f"agent {a.id} = {a.type}{named}{roles}")
            lines.append(f"  input: {slots[f'input{n}'] or '(original question)'}")
            if slots[f"about{n}"]:
                lines.append(f"  about: {slots[f'about{n}']}")
        if o.edges:
            lines.append("edges: " + ", ".join(f"{e.source}->{e.target}" for e in o.edges))
        if o.answer is not None:
            lines.append(f"answer: {_clean(o.answer)}")
        if slots["thinking"]:
            lines.append(f"thinking: {slots['thinking']}")
        return "\n".join(lines)

    text = layout()
    cut_order = ["thinking", *[f"about{n}" for n in range(len(agents))]]
    cut_order += [f"input{n}" for n in range(len(agents))]
    for key in cut_order:
        excess = count(text) - max_tokens
        if excess <= 0:
            break
        slots[key] = _shorten(slots[key], count(slots[key]) - excess, count)
        text = layout()
    return text


def _clean(text: str) -> str:
    """Collapse whitespace runs so layout is independent of the writer's line breaks."""
    return " ".join(text.split())


def _shorten(text: str, budget: int, count: TokenCounter) -> str:
    """The longest word-boundary prefix of `text` (plus "...") within `budget` tokens;
    "..." alone when nothing fits, so a cut text never reads as an empty one."""
    if not text:
        return ""
    words = text.split(" ")
    lo, hi = 0, len(words)  # invariant: prefix of `lo` words fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(" ".join(words[:mid]) + " ...") <= budget:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo]) + " ..." if lo else "..."


__all__ = [
    "AGENT_TYPES",
    "FINAL_MARKERS",
    "ORCHRM_JSON_FORMAT",
    "RM_RENDER_VERSION",
    "TYPE_NAMES",
    "Agent",
    "DoM",
    "Edge",
    "Orchestration",
    "Rule",
    "Violation",
    "approx_token_count",
    "render_for_rm",
    "rm_completion",
    "rm_prompt",
    "to_harmony",
    "validate",
]

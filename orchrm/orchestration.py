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

import heapq
import json
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable

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
_HARMONY_TAG_NAMES = frozenset(HARMONY_TAGS)
# `<`, `/` and a tag name, with whitespace allowed around the name. Possessive
# quantifiers never give back what they matched, and none of the classes holds `<`, so a
# failed attempt costs only the characters up to the next `<`: finditer is linear.
_TAG_CANDIDATE_RE = re.compile(r"<\s*+(/?)\s*+([A-Za-z_]++)\s*+>")
FINAL_MARKERS: tuple[str, ...] = ("assistantfinal", "<|channel|>final<|message|>")
"""Where a gpt-oss final channel starts: with special tokens stripped (as in logs) or kept.
Harmony text is read from after the last one."""


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


def harmony_tags(text: str) -> Iterator[tuple[int, int, bool, str]]:
    """`(start, end, closing, name)` of each harmony tag in `text` (`<agent>`, `</ to >`,
    ...), in order; names are matched ignoring ASCII case and returned in lower case.
    Linear in the length of `text`."""
    for m in _TAG_CANDIDATE_RE.finditer(text):
        name = m.group(2).lower()
        if name in _HARMONY_TAG_NAMES:
            yield m.start(), m.end(), bool(m.group(1)), name


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
        if a.type not in AGENT_TYPES:
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
        if a.type == "DebateAgent" and len(a.debate_roles or ()) < 2:
            n = len(a.debate_roles or ())
            message = f"DebateAgent {a.id!r} has {n} role(s), needs 2+"
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
    checks = [(o.thinking, True)] + [(t, False) for t in _texts(o)]
    for text, is_thinking in checks:
        tags = harmony_tags(text)
        if is_thinking:
            tags = (t for t in tags if t[2] and t[3] == "thinking")
        if next(tags, None) is not None or any(m in text for m in FINAL_MARKERS):
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
"""How many tokens a text is: the unit `render_for_rm` budgets in."""


@runtime_checkable
class OffsetTokenCounter(Protocol):
    """A `TokenCounter` that can also say where each token of a text ends, so one
    tokenization of a piece serves both its count and any cut of it (a Hugging Face fast
    tokenizer's `offset_mapping`, or `approx_token_count`'s matches)."""

    def __call__(self, text: str) -> int: ...

    def token_ends(self, text: str) -> list[int]:
        """The character offset just after each token of `text`, in token order."""
        ...


_APPROX_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_ELLIPSIS = "..."


def approx_token_count(text: str) -> int:
    """Word pieces and punctuation marks: a tokenizer-free stand-in for token counts.

    Sub-word tokenizers produce about this many tokens or more for English; pass a real
    tokenizer's counter to `render_for_rm` wherever the exact budget matters.
    """
    return len(_APPROX_TOKEN_RE.findall(text))


class _ApproxCounter:
    """`approx_token_count` with the ends of its tokens (an `OffsetTokenCounter`)."""

    def __call__(self, text: str) -> int:
        return approx_token_count(text)

    def token_ends(self, text: str) -> list[int]:
        return [m.end() for m in _APPROX_TOKEN_RE.finditer(text)]


_APPROX = _ApproxCounter()


def replace_surrogates(text: str) -> str:
    """`text` with each lone surrogate code point replaced by U+FFFD, character for
    character: such text cannot be encoded as UTF-8, and tokenizers reject it."""
    return _SURROGATE_RE.sub("\ufffd", text) if _SURROGATE_RE.search(text) else text


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

    The whole text is tokenized once and each piece that is cut once more, so time is
    linear in the text's length: the total after a cut is the total before it plus the
    change in the piece's own count, which is exact for `approx_token_count` and for
    tokenizers that never merge tokens across whitespace. An `OffsetTokenCounter` cuts by
    its token ends; a plain `TokenCounter` by a binary search over the piece's words.
    Lone surrogates come out as U+FFFD, so a tokenizer always accepts the text.
    """
    count = _counter(count_tokens)
    prompt = rm_prompt(question, max_tokens, count)
    return prompt + rm_completion(o, max_tokens - count(prompt), count)


def rm_prompt(
    question: str, max_tokens: int = 512, count_tokens: TokenCounter | None = None
) -> str:
    """The question part of `render_for_rm`: `question: <question>` and a line break,
    the question cut to `QUESTION_SHARE` of `max_tokens`."""
    count = _counter(count_tokens)
    text = _clean(question)
    cap = int(max_tokens * QUESTION_SHARE)
    if count(f"question: {text}") > cap:
        text = _shorten(_Piece.measure(text, count), cap - count("question:"), count).text
    return f"question: {text}\n"


def rm_completion(
    o: Orchestration, max_tokens: int = 512, count_tokens: TokenCounter | None = None
) -> str:
    """The orchestration part of `render_for_rm`, cut to `max_tokens`."""
    count = _counter(count_tokens)
    order = o.topological_order() or [a.id for a in o.agents]
    rank = {agent_id: n for n, agent_id in reversed(list(enumerate(order)))}
    agents = sorted(o.agents, key=lambda a: rank[a.id])  # stable: duplicates all stay
    slots = {
        "thinking": _clean(o.thinking),
        **{f"about{n}": _clean(a.description) for n, a in enumerate(agents)},
        **{f"input{n}": _clean(a.input) for n, a in enumerate(agents)},
    }
    text = _layout(o, agents, slots)
    total = count(text)
    cut_order = ["thinking", *[f"about{n}" for n in range(len(agents))]]
    cut_order += [f"input{n}" for n in range(len(agents))]
    cut = False
    for key in cut_order:
        excess = total - max_tokens
        if excess <= 0:
            break
        piece = _Piece.measure(slots[key], count)
        shorter = _shorten(piece, piece.tokens - excess, count)
        # Pieces sit between whitespace in the layout, so only this piece's count moves.
        total += shorter.tokens - piece.tokens
        slots[key], cut = shorter.text, True
    return _layout(o, agents, slots) if cut else text


def _layout(o: Orchestration, agents: list[Agent], slots: dict[str, str]) -> str:
    """The orchestration part of `render_for_rm` with these (cleaned) cuttable pieces."""
    plain = replace_surrogates
    lines = [
        f"orchestration: dom={o.dom.value} agents={len(o.agents)} edges={len(o.edges)} "
        f"sink={plain(o.sink or 'none')}"
    ]
    for n, a in enumerate(agents):
        roles = f" [roles: {' | '.join(map(_clean, a.debate_roles))}]" if a.debate_roles else ""
        named = f" ({TYPE_NAMES[a.type]})" if a.type in TYPE_NAMES else ""
        lines.append(f"agent {plain(a.id)} = {plain(a.type)}{named}{roles}")
        lines.append(f"  input: {slots[f'input{n}'] or '(original question)'}")
        if slots[f"about{n}"]:
            lines.append(f"  about: {slots[f'about{n}']}")
    if o.edges:
        edges = ", ".join(f"{e.source}->{e.target}" for e in o.edges)
        lines.append("edges: " + plain(edges))
    if o.answer is not None:
        lines.append(f"answer: {_clean(o.answer)}")
    if slots["thinking"]:
        lines.append(f"thinking: {slots['thinking']}")
    return "\n".join(lines)


def _counter(count_tokens: TokenCounter | None) -> TokenCounter:
    """The counter to render with: `approx_token_count` (with its token ends) by default."""
    if count_tokens is None or count_tokens is approx_token_count:
        return _APPROX
    return count_tokens


@dataclass(frozen=True)
class _Piece:
    """A cleaned piece of text, its token count and, when the counter gives them, the
    end offset of each of its tokens."""

    text: str
    tokens: int
    ends: list[int] | None = None

    @classmethod
    def measure(cls, text: str, count: TokenCounter) -> _Piece:
        """One tokenization of `text`."""
        if not isinstance(count, OffsetTokenCounter):
            return cls(text, count(text))
        ends, last = [], 0
        for end in count.token_ends(text):
            last = max(last, end)  # sorted, even where a tokenizer's offsets step back
            ends.append(last)
        return cls(text, len(ends), ends)


def _clean(text: str) -> str:
    """Collapse whitespace runs so layout is independent of the writer's line breaks;
    replace lone surrogates."""
    return " ".join(replace_surrogates(text).split())


def _shorten(piece: _Piece, budget: int, count: TokenCounter) -> _Piece:
    """The longest word-boundary prefix of `piece` (plus " ...") within `budget` tokens;
    "..." alone when nothing fits, so a cut text never reads as an empty one."""
    text, ends = piece.text, piece.ends
    if not text:
        return piece
    if ends is None:
        return _shorten_by_search(text, budget, count)
    tail = count(" " + _ELLIPSIS)
    room = budget - tail  # tokens the kept words may take
    if room >= len(ends):
        return _Piece(f"{text} {_ELLIPSIS}", len(ends) + tail)
    # Keep the words before the space that precedes the end of token number room + 1.
    cut = text.rfind(" ", 0, ends[room]) if room >= 0 else -1
    if cut < 0:
        return _Piece(_ELLIPSIS, count(_ELLIPSIS))
    return _Piece(f"{text[:cut]} {_ELLIPSIS}", bisect_right(ends, cut) + tail)


def _shorten_by_search(text: str, budget: int, count: TokenCounter) -> _Piece:
    """`_shorten` for a counter without token ends: a binary search over word prefixes,
    one count of the piece's prefix per probe."""
    words = text.split(" ")
    lo, hi = 0, len(words)  # invariant: prefix of `lo` words fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(" ".join(words[:mid]) + " " + _ELLIPSIS) <= budget:
            lo = mid
        else:
            hi = mid - 1
    short = " ".join(words[:lo]) + " " + _ELLIPSIS if lo else _ELLIPSIS
    return _Piece(short, count(short))


__all__ = [
    "AGENT_TYPES",
    "FINAL_MARKERS",
    "HARMONY_TAGS",
    "ORCHRM_JSON_FORMAT",
    "RM_RENDER_VERSION",
    "TYPE_NAMES",
    "Agent",
    "DoM",
    "Edge",
    "OffsetTokenCounter",
    "Orchestration",
    "Rule",
    "TokenCounter",
    "Violation",
    "approx_token_count",
    "harmony_tags",
    "reference_spans",
    "render_for_rm",
    "replace_references",
    "replace_surrogates",
    "rm_completion",
    "rm_prompt",
    "to_harmony",
    "validate",
]

"""Harmony XML as orchestrator LLMs really write it -> `Orchestration`.

Handles prose around the XML, code fences, the gpt-oss `analysis ... assistantfinal`
prefix (the XML after the last marker is read), missing closing tags, ids padded with
whitespace, an empty or missing `<edge>` block for a single agent, and debate roles as a
JSON, Python or comma-separated list. The text is scanned once for the known tags, and
each block's end is looked up rather than searched for, so parsing is linear in its
length whatever an LLM wrote; text over `MAX_ORCHESTRATION_CHARS` is refused unread.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from bisect import bisect_left
from dataclasses import dataclass, field, replace

from orchrm.orchestration import (
    FINAL_MARKERS,
    LOW_DOM_DEFAULT_ID,
    Agent,
    DoM,
    Edge,
    Orchestration,
    harmony_tags,
    replace_surrogates,
)
from orchrm.parse.error import ParseError

FINAL_MARKER = FINAL_MARKERS[0]
_ANALYSIS_STARTS = ("analysis", "<|channel|>analysis")
_FENCE_RE = re.compile(r"```[A-Za-z]*")
_BRACKET_RE = re.compile(r"[\[\](){}]")
_AGENT_FIELDS = (
    "agent_name",
    "agent_id",
    "agent_description",
    "agent_input",
    "debate_roles",
    "agent_output_id",
)
_BLOCK_STARTS = {"agent", "edge", "answer", "thinking"}

MAX_ORCHESTRATION_CHARS = 2_000_000
"""Longest text `parse_harmony` and `parse_mas_code` read, in characters; longer text is
a `ParseError` (`too_long`) before any work. Real orchestrator outputs, reasoning trace
included, are tens of thousands of characters."""

MAX_LITERAL_DEPTH = 100
"""Deepest nesting of brackets a debate-role list (or a `mas_code` literal) may have;
deeper is a `ParseError`, so reading it never exhausts the interpreter's stack."""


@dataclass(frozen=True)
class _Tag:
    start: int  # offset of "<" in the parsed text
    end: int  # offset just after ">"
    closing: bool
    name: str


def parse_harmony(text: str) -> Orchestration:
    """Parse an orchestrator's harmony XML output (low or high DoM).

    Only the part after the last `assistantfinal` marker is read when the marker is
    present. Raises `ParseError` with the offset in `text` of what was wrong.
    """
    check_text(text, "harmony", "the text is empty")
    if _final_start(text) is None and text.lstrip().startswith(_ANALYSIS_STARTS):
        # A gpt-oss reasoning trace cut before its final channel: any XML in it is a
        # draft the model was still thinking about, not its orchestration.
        raise ParseError(
            "no_final_channel",
            "gpt-oss 'analysis' trace with no "
            f"'{FINAL_MARKER}' marker: the output ends before the final channel",
            len(text),
            "harmony",
        )
    scan = _scan(text)
    if not scan.agents and scan.answer is None:
        if scan.thinking:
            raise ParseError(
                "no_agents",
                "a <thinking> block but no <agent> or <answer> (output truncated?)",
                scan.first_tag,
                "harmony",
            )
        raise ParseError(
            "no_orchestration", "no <agent> or <answer> block found", scan.first_tag, "harmony"
        )
    high = len(scan.agents) > 1 or scan.edge_blocks > 0 or any(i is not None for i in scan.ids)
    agents = []
    for agent, agent_id, at in zip(scan.agents, scan.ids, scan.offsets, strict=True):
        if agent_id is None and high and len(scan.agents) > 1:
            raise ParseError(
                "missing_agent_id",
                f"agent of type {agent.type!r} has no <agent_id> in a multi-agent graph",
                at,
                "harmony",
            )
        new_id = agent_id if agent_id is not None else agent.output_id or LOW_DOM_DEFAULT_ID
        agents.append(replace(agent, id=new_id))
    return Orchestration(
        agents=tuple(agents),
        edges=tuple(scan.edges),
        dom=DoM.HIGH if high else DoM.LOW,
        thinking=scan.thinking,
        answer=scan.answer,
    )


def extract_thinking(text: str) -> str:
    """The `<thinking>` channel of harmony output, even when truncated; '' if absent."""
    if not isinstance(text, str):
        return ""
    try:
        return _scan(text).thinking
    except ParseError:
        return ""


@dataclass
class _Scan:
    """What one pass over harmony text found, before any decision about its DoM."""

    thinking: str = ""
    answer: str | None = None
    agents: list[Agent] = field(default_factory=list)
    ids: list[str | None] = field(default_factory=list)  # the <agent_id>, if written
    offsets: list[int] = field(default_factory=list)  # where each <agent> starts
    edges: list[Edge] = field(default_factory=list)
    edge_blocks: int = 0
    first_tag: int = 0


def check_text(text: object, source: str, empty: str) -> None:
    """Raise `ParseError` unless `text` is a string (`not_text`), at most
    `MAX_ORCHESTRATION_CHARS` long (`too_long`) and not blank (`empty`, with the message
    `empty`): what every parser checks before reading."""
    if not isinstance(text, str):
        raise ParseError("not_text", f"expected a string, got {type(text).__name__}", None, source)
    if len(text) > MAX_ORCHESTRATION_CHARS:
        raise ParseError(
            "too_long",
            f"{len(text):,} characters, over the {MAX_ORCHESTRATION_CHARS:,} an orchestration "
            "may have",
            MAX_ORCHESTRATION_CHARS,
            source,
        )
    if not text.strip():
        raise ParseError("empty", empty, 0, source)


def _final_start(text: str) -> int | None:
    """Offset just after the last final-channel marker, or None when there is none."""
    ends = [text.rfind(m) + len(m) for m in FINAL_MARKERS if m in text]
    return max(ends) if ends else None


def _scan(text: str) -> _Scan:
    base = _final_start(text) or 0
    # Code fences are replaced by spaces of the same length so offsets stay true.
    body = _FENCE_RE.sub(lambda m: " " * len(m.group(0)), text[base:])
    tags = [
        _Tag(start + base, end + base, closing, name)
        for start, end, closing, name in harmony_tags(body)
    ]
    # Where each <thinking> ends is looked up in these, not searched for from every opening.
    thinking_ends = [j for j, t in enumerate(tags) if t.closing and t.name == "thinking"]
    agent_starts = [j for j, t in enumerate(tags) if not t.closing and t.name == "agent"]
    scan = _Scan(first_tag=tags[0].start if tags else base)
    i = 0
    while i < len(tags):
        tag = tags[i]
        if tag.closing or tag.name not in _BLOCK_STARTS:
            i += 1  # a stray tag between blocks is prose
            continue
        if tag.name == "thinking":
            # Prose inside thinking may mention "<edge>" or "<agent_input>"; without a
            # closing tag, thinking runs to the first <agent> (or the end).
            end = _next_index(thinking_ends, i + 1)
            if end is None:
                end = _next_index(agent_starts, i + 1)
                stop = tags[end].start if end is not None else len(text)
                i = end if end is not None else len(tags)
            else:
                stop = tags[end].start
                i = end + 1
            scan.thinking = text[tag.end : stop].strip()
            continue
        i = _block(text, tags, i, scan)
    return scan


def _block(text: str, tags: list[_Tag], i: int, scan: _Scan) -> int:
    """Read the <answer>, <agent> or <edge> block opened by tags[i] into `scan`; the
    index of the first tag after it."""
    tag = tags[i]
    end = _block_end(tags, i, tag.name)
    stop = tags[end].start if end < len(tags) else len(text)
    inner = tags[i + 1 : end]
    if tag.name == "answer":
        if scan.answer is not None:
            raise ParseError(
                "duplicate_answer", "more than one <answer> block", tag.start, "harmony"
            )
        scan.answer = text[tag.end : stop].strip()
    elif tag.name == "agent":
        agent, agent_id = _agent(text, tag, inner, stop)
        scan.agents.append(agent)
        scan.ids.append(agent_id)
        scan.offsets.append(tag.start)
    else:
        scan.edge_blocks += 1
        if scan.edge_blocks > 1:
            raise ParseError(
                "duplicate_edge_block", "more than one <edge> block", tag.start, "harmony"
            )
        scan.edges = _edges(text, inner, stop)
    closes = end < len(tags) and tags[end].closing and tags[end].name == tag.name
    return end + 1 if closes else end


def _next_index(indices: list[int], start: int) -> int | None:
    """The first of the sorted `indices` at or after `start`, or None."""
    k = bisect_left(indices, start)
    return indices[k] if k < len(indices) else None


def _block_end(tags: list[_Tag], i: int, name: str) -> int:
    """Index of the tag closing block `name` opened at i: its closing tag, else the next
    tag that opens a new block, else len(tags) (the block runs to the end)."""
    for j in range(i + 1, len(tags)):
        t = tags[j]
        if t.closing and t.name == name:
            return j
        if not t.closing and t.name in _BLOCK_STARTS:
            return j
    return len(tags)


def _agent(text: str, open_tag: _Tag, inner: list[_Tag], stop: int) -> tuple[Agent, str | None]:
    values: dict[str, tuple[str, int]] = {}
    for j, t in enumerate(inner):
        if t.closing or t.name not in _AGENT_FIELDS:
            continue
        nxt = inner[j + 1].start if j + 1 < len(inner) else stop
        if t.name in values:
            raise ParseError(
                "duplicate_field", f"<{t.name}> appears twice in one <agent>", t.start, "harmony"
            )
        values[t.name] = (text[t.end : nxt], t.start)
    if "agent_name" not in values:
        raise ParseError(
            "missing_agent_name", "<agent> block has no <agent_name>", open_tag.start, "harmony"
        )
    roles = None
    if "debate_roles" in values:
        raw, at = values["debate_roles"]
        roles = parse_roles(raw, at)
    agent_id = values.get("agent_id", (None, 0))[0]
    output_id = values.get("agent_output_id", (None, 0))[0]
    agent = Agent(
        id="",
        type=values["agent_name"][0].strip(),
        description=values.get("agent_description", ("", 0))[0].strip(),
        input=values.get("agent_input", ("", 0))[0].strip(),
        debate_roles=roles,
        output_id=output_id.strip() if output_id is not None else None,
    )
    return agent, agent_id.strip() if agent_id is not None else None


def _edges(text: str, inner: list[_Tag], stop: int) -> list[Edge]:
    ends: list[tuple[str, str, int]] = []
    for j, t in enumerate(inner):
        if t.closing:
            continue
        if t.name not in ("from", "to"):
            raise ParseError("unexpected_tag", f"<{t.name}> inside <edge>", t.start, "harmony")
        nxt = inner[j + 1].start if j + 1 < len(inner) else stop
        ends.append((t.name, text[t.end : nxt].strip(), t.start))
    edges = []
    for k in range(0, len(ends), 2):
        first = ends[k]
        second = ends[k + 1] if k + 1 < len(ends) else None
        if first[0] != "from" or second is None or second[0] != "to":
            raise ParseError(
                "unpaired_edge",
                f"<{first[0]}>{first[1]} is not part of a <from>..</from><to>..</to> pair",
                first[2],
                "harmony",
            )
        edges.append(Edge(first[1], second[1]))
    return edges


def parse_roles(raw: str, offset: int = 0) -> tuple[str, ...]:
    """Debate roles written as a JSON list, a Python list, or comma/newline separated."""
    body = raw.strip()
    if not body:
        return ()
    if body.startswith("["):
        depth = literal_depth(body)
        if depth > MAX_LITERAL_DEPTH:
            raise ParseError(
                "bad_debate_roles",
                f"debate roles nest brackets {depth} deep (at most {MAX_LITERAL_DEPTH})",
                offset,
                "harmony",
            )
        value = None
        try:
            value = json.loads(body)
        except ValueError:
            value = safe_literal(body)
        if not isinstance(value, list) or not all(isinstance(r, str) for r in value):
            raise ParseError(
                "bad_debate_roles",
                f"debate roles {body[:80]!r} are not a list of strings",
                offset,
                "harmony",
            )
        return tuple(r.strip() for r in value)
    return tuple(r.strip().strip("\"'") for r in re.split(r"[,\n]", body) if r.strip())


def literal_depth(text: str) -> int:
    """How deep brackets (`[`, `(`, `{`) nest in `text`, quotes not considered: an upper
    bound on the nesting of any literal written in it."""
    depth = deepest = 0
    for m in _BRACKET_RE.finditer(text):
        if m.group() in "[({":
            depth += 1
            deepest = max(deepest, depth)
        elif depth:
            depth -= 1
    return deepest


def safe_literal(source: str | ast.AST):
    """`ast.literal_eval` of text or a node; None for anything it cannot read. It only
    reads literals and never executes anything; lone surrogates in text read as U+FFFD.
    Callers bound the nesting first (`MAX_LITERAL_DEPTH`)."""
    if isinstance(source, str):
        source = replace_surrogates(source)
    try:
        with warnings.catch_warnings():  # e.g. invalid escapes in data, not our code
            warnings.simplefilter("ignore")
            return ast.literal_eval(source)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None

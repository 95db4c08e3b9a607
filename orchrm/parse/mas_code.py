"""MAS-Orchestra `mas_code` -> `Orchestration`, read with `ast`, never executed.

MAS-Orchestra turns an orchestration into a Python `forward` function. Single-agent code
assigns `agent_calls` (plus `agent_id` under the high-DoM prompt, `agent_output_id` under
the low-DoM one); multi-agent code assigns `agents_config` and `edges`. Only those
literal assignments are read, with `ast.literal_eval`. Code over
`MAX_ORCHESTRATION_CHARS` is refused unread; a literal nested deeper than
`MAX_LITERAL_DEPTH` is a `ParseError`, as is code Python's own parser finds too deep.
"""

from __future__ import annotations

import ast
import gc
import warnings
from collections import deque
from contextlib import contextmanager

from orchrm.orchestration import (
    LOW_DOM_DEFAULT_ID,
    Agent,
    DoM,
    Edge,
    Orchestration,
    replace_surrogates,
)
from orchrm.parse.error import ParseError
from orchrm.parse.harmony import MAX_LITERAL_DEPTH, check_text, parse_roles, safe_literal

_MAS_CODE_NAMES = {
    "agents_config",
    "edges",
    "agent_calls",
    "agent_name",
    "agent_description",
    "agent_id",
    "agent_output_id",
}


def parse_mas_code(code: str) -> Orchestration:
    """Read the orchestration from a MAS-Orchestra `forward` function, never running it.

    Single-agent code carries `agent_calls` (plus `agent_id` for the high-DoM prompt or
    `agent_output_id` for the low-DoM one); multi-agent code carries `agents_config` and
    `edges`. Only literal assignments are read, with `ast.literal_eval`.
    """
    check_text(code, "mas_code", "mas_code is empty")
    try:
        with warnings.catch_warnings(), _collection_paused():
            warnings.simplefilter("ignore")  # e.g. invalid escapes in data, not our code
            # Python cannot parse lone surrogates; U+FFFD keeps every offset in place.
            tree = ast.parse(replace_surrogates(code))
    except (SyntaxError, ValueError, MemoryError, RecursionError) as err:
        offset = _line_offset(code, getattr(err, "lineno", None))
        raise ParseError("mas_code_syntax", f"not Python: {err}", offset, "mas_code") from None
    found: dict[str, tuple[object, int]] = {}
    for node in _statements(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            wanted = isinstance(target, ast.Name) and target.id in _MAS_CODE_NAMES
            if wanted and target.id not in found:  # the first assignment is the literal
                offset = _line_offset(code, node.lineno)
                _check_depth(node.value, target.id, offset)
                found[target.id] = (safe_literal(node.value), offset)
    if "agents_config" in found:
        return _mas_graph(found)
    if "agent_calls" in found:
        return _mas_single(found)
    raise ParseError(
        "mas_code_no_agents",
        "no agent_calls or agents_config assignment (a direct answer, or not MAS-Orchestra code)",
        0,
        "mas_code",
    )


@contextmanager
def _collection_paused():
    """The cyclic garbage collector paused while `ast.parse` builds a tree: the tree's
    nodes hold no cycles, and the collections its allocations trigger would each walk the
    whole heap (half of a long text's parse time)."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)


def _statements(tree: ast.AST):
    """The statements of `tree` in `ast.walk`'s order (breadth first), without walking
    into expressions, which hold no statement: on code of many short lines most nodes are
    expressions."""
    todo = deque([tree])
    while todo:
        node = todo.popleft()
        todo.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, _BLOCKS))
        yield node


def _check_depth(node: ast.AST, name: str, offset: int) -> None:
    """Raise `ParseError` when the expression assigned to `name` nests deeper than
    `MAX_LITERAL_DEPTH` (walked without recursion)."""
    stack = [(node, 1)]
    while stack:
        current, depth = stack.pop()
        if depth > MAX_LITERAL_DEPTH:
            raise ParseError(
                "mas_code_too_deep",
                f"{name} nests more than {MAX_LITERAL_DEPTH} levels deep",
                offset,
                "mas_code",
            )
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(current))


def _line_offset(code: str, lineno: int | None) -> int:
    if not lineno or lineno < 1:
        return 0
    offset = 0
    for _ in range(lineno - 1):
        nl = code.find("\n", offset)
        if nl < 0:
            break
        offset = nl + 1
    return offset


def _mas_agent(call: object, offset: int, id_key: str | None) -> Agent:
    if not isinstance(call, dict):
        raise ParseError(
            "mas_code_bad_agent",
            f"agent entry is {type(call).__name__}, not a dict",
            offset,
            "mas_code",
        )
    name = call.get("agent_name", call.get("name"))
    args = call.get("required_arguments", {})
    if not isinstance(name, str) or not isinstance(args, dict):
        raise ParseError(
            "mas_code_bad_agent",
            "agent entry needs a string name and a required_arguments dict",
            offset,
            "mas_code",
        )
    agent_input = args.get("agent_input") or ""
    if not isinstance(agent_input, str):
        raise ParseError(
            "mas_code_bad_agent", f"agent_input of {name!r} is not a string", offset, "mas_code"
        )
    roles = args.get("debate_roles")
    if isinstance(roles, str):
        roles = parse_roles(roles, offset)
    elif roles is not None:
        if not isinstance(roles, list | tuple) or not all(isinstance(r, str) for r in roles):
            raise ParseError(
                "bad_debate_roles", f"debate_roles of {name!r} are not strings", offset, "mas_code"
            )
        roles = tuple(r.strip() for r in roles)
    agent_id = call.get(id_key) if id_key else None
    description = call.get("agent_description", "")
    return Agent(
        id=str(agent_id).strip() if agent_id is not None else "",
        type=name.strip(),
        description=description.strip() if isinstance(description, str) else "",
        input=agent_input.strip(),
        debate_roles=roles,
    )


def _mas_graph(found: dict[str, tuple[object, int]]) -> Orchestration:
    config, offset = found["agents_config"]
    if not isinstance(config, list) or not config:
        raise ParseError(
            "mas_code_bad_agent",
            "agents_config is not a non-empty literal list",
            offset,
            "mas_code",
        )
    agents = []
    for entry in config:
        agent = _mas_agent(entry, offset, "agent_id")
        if not agent.id:
            raise ParseError(
                "missing_agent_id",
                f"agents_config entry {agent.type!r} has no agent_id",
                offset,
                "mas_code",
            )
        agents.append(agent)
    raw_edges, edge_offset = found.get("edges", ([], offset))
    if not isinstance(raw_edges, list):
        raise ParseError(
            "mas_code_bad_edges", "edges is not a literal list", edge_offset, "mas_code"
        )
    edges = []
    for pair in raw_edges:
        if not (
            isinstance(pair, list | tuple)
            and len(pair) == 2
            and all(isinstance(x, str) for x in pair)
        ):
            raise ParseError(
                "mas_code_bad_edges",
                f"edge {pair!r} is not a [from, to] pair",
                edge_offset,
                "mas_code",
            )
        edges.append(Edge(pair[0].strip(), pair[1].strip()))
    return Orchestration(agents=tuple(agents), edges=tuple(edges), dom=DoM.HIGH)


def _mas_single(found: dict[str, tuple[object, int]]) -> Orchestration:
    calls, offset = found["agent_calls"]
    if not isinstance(calls, list) or not calls:
        raise ParseError(
            "mas_code_bad_agent", "agent_calls is not a non-empty literal list", offset, "mas_code"
        )
    agent = _mas_agent(calls[0], offset, None)
    description = found.get("agent_description", ("", 0))[0]
    agent_id = found.get("agent_id", (None, 0))[0]
    output_id = found.get("agent_output_id", (None, 0))[0]
    description = description.strip() if isinstance(description, str) else agent.description
    if isinstance(agent_id, str):  # the high-DoM prompt's single-agent graph
        agent = Agent(agent_id.strip(), agent.type, description, agent.input, agent.debate_roles)
        return Orchestration(agents=(agent,), dom=DoM.HIGH)
    out = output_id.strip() if isinstance(output_id, str) else None
    agent = Agent(
        out or LOW_DOM_DEFAULT_ID, agent.type, description, agent.input, agent.debate_roles, out
    )
    return Orchestration(agents=(agent,), dom=DoM.LOW)

"""An orchestration drawn as an inline SVG graph for `orchrm view`.

Agents sit in topological layers (a layer is the longest path from a start node), left to
right, as boxes coloured by sub-agent type; edges are curves with arrowheads; the sink,
whose output is the final answer, has a thick border and a "sink" tag. Every text comes
from a log and is escaped (`esc`); an agent's description, input and debate roles are in
its SVG `<title>`, which the browser shows on hover.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from orchrm.orchestration import AGENT_REGISTRY, Orchestration

TYPE_COLOURS: dict[str, str] = {name: kind.colour for name, kind in AGENT_REGISTRY.items()}
"""Box colour of each sub-agent type (its registry `colour`); any other type gets
`OTHER_TYPE_COLOUR`."""
OTHER_TYPE_COLOUR = "#9c755f"

NODE_W, NODE_H = 132, 48
GAP_X, GAP_Y, PAD = 34, 16, 8
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def esc(text: object, limit: int | None = None) -> str:
    """`text` made safe for HTML text and attribute values: lone surrogates and control
    characters replaced, `& < > " '` escaped, cut to `limit` characters (with "…")."""
    value = "" if text is None else str(text)
    value = value.encode("utf-8", "replace").decode("utf-8")
    value = _CONTROL.sub("\ufffd", value)
    if limit is not None and len(value) > limit:
        value = value[: max(0, limit - 1)] + "…"
    return html.escape(value, quote=True)


@dataclass(frozen=True)
class Placed:
    """One agent's box: its top-left corner and layer."""

    agent_id: str
    x: float
    y: float
    layer: int


@dataclass(frozen=True)
class Layout:
    """Where every agent of an orchestration goes, and the drawing's size."""

    nodes: dict[str, Placed]
    edges: tuple[tuple[str, str], ...]
    """Edges between known agents, each once, in declaration order."""
    width: float
    height: float


def layers(o: Orchestration) -> dict[str, int]:
    """Each agent's layer: 0 for a start node, else one more than its deepest
    predecessor's. A graph with a cycle has no topological order: its agents go one a
    layer in declaration order."""
    order = o.topological_order()
    ids = list(dict.fromkeys(a.id for a in o.agents))
    if order is None:
        return {agent_id: n for n, agent_id in enumerate(ids)}
    known = set(ids)
    incoming: dict[str, list[str]] = {i: [] for i in ids}
    for e in o.edges:
        if e.source in known and e.target in known:
            incoming[e.target].append(e.source)
    depth: dict[str, int] = {}
    for agent_id in order:
        depth[agent_id] = max((depth[s] + 1 for s in incoming[agent_id]), default=0)
    return depth


def layout(o: Orchestration) -> Layout:
    """Boxes in columns by layer, in declaration order within a column, each column
    centred vertically."""
    depth = layers(o)
    columns: dict[int, list[str]] = {}
    for agent_id, layer in depth.items():
        columns.setdefault(layer, []).append(agent_id)
    tallest = max((len(c) for c in columns.values()), default=1)
    height = PAD * 2 + tallest * NODE_H + (tallest - 1) * GAP_Y
    nodes = {}
    for layer, members in columns.items():
        span = len(members) * NODE_H + (len(members) - 1) * GAP_Y
        top = (height - span) / 2
        for row, agent_id in enumerate(members):
            x = PAD + layer * (NODE_W + GAP_X)
            nodes[agent_id] = Placed(agent_id, x, top + row * (NODE_H + GAP_Y), layer)
    width = PAD * 2 + max(1, len(columns)) * NODE_W + max(0, len(columns) - 1) * GAP_X
    edges = tuple(
        dict.fromkeys(
            (e.source, e.target)
            for e in o.edges
            if e.source in nodes and e.target in nodes and e.source != e.target
        )
    )
    return Layout(nodes, edges, width, height)


def short_type(agent_type: str) -> str:
    """The type as a box has room for it: its registry `label`, or an unknown type's name
    without an `Agent` suffix."""
    kind = AGENT_REGISTRY.get(agent_type)
    return kind.label if kind else agent_type.removesuffix("Agent") or agent_type


def _tooltip(agent) -> str:
    lines = [f"{agent.id} ({agent.type})"]
    if agent.description:
        lines.append(f"description: {agent.description}")
    lines.append(f"input: {agent.input or '(the original question)'}")
    if agent.debate_roles:
        lines.append("debate roles: " + ", ".join(agent.debate_roles))
    return esc("\n".join(lines), 2000)


def _node(agent, place: Placed, sink: bool) -> str:
    colour = TYPE_COLOURS.get(agent.type, OTHER_TYPE_COLOUR)
    roles = ", ".join(agent.debate_roles or ())
    second = short_type(agent.type) + (f": {roles}" if roles else "")
    cx = place.x + NODE_W / 2
    parts = [
        f'<g class="node{" sink" if sink else ""}" data-agent="{esc(agent.id)}" '
        f'data-type="{esc(agent.type)}" tabindex="0">',
        f"<title>{_tooltip(agent)}</title>",
        f'<rect x="{place.x:.1f}" y="{place.y:.1f}" width="{NODE_W}" height="{NODE_H}" rx="6" '
        f'fill="{colour}" stroke="#222" stroke-width="{3 if sink else 1}"/>',
        f'<text x="{cx:.1f}" y="{place.y + 19:.1f}" class="id">{esc(agent.id, 18)}</text>',
        f'<text x="{cx:.1f}" y="{place.y + 36:.1f}" class="ty">{esc(second, 23)}</text>',
    ]
    if sink:
        parts.append(
            f'<text x="{place.x + NODE_W - 4:.1f}" y="{place.y + 11:.1f}" class="sinktag">'
            "sink</text>"
        )
    parts.append("</g>")
    return "".join(parts)


def _edge(source: Placed, target: Placed) -> str:
    x1, y1 = source.x + NODE_W, source.y + NODE_H / 2
    x2, y2 = target.x - 2, target.y + NODE_H / 2
    if target.layer <= source.layer:  # a back or same-layer edge (only in a cyclic graph)
        x1, x2 = source.x + NODE_W / 2, target.x + NODE_W / 2
        y1, y2 = source.y + NODE_H, target.y + NODE_H
        mid = max(y1, y2) + GAP_Y
        path = f"M{x1:.1f},{y1:.1f} C{x1:.1f},{mid:.1f} {x2:.1f},{mid:.1f} {x2:.1f},{y2:.1f}"
    else:
        bend = (x2 - x1) / 2
        path = (
            f"M{x1:.1f},{y1:.1f} C{x1 + bend:.1f},{y1:.1f} {x2 - bend:.1f},{y2:.1f} "
            f"{x2:.1f},{y2:.1f}"
        )
    return (
        f'<path class="edge" data-from="{esc(source.agent_id)}" data-to="{esc(target.agent_id)}" '
        f'd="{path}" marker-end="url(#orchrm-arrow)"/>'
    )


ARROW_DEFS = (
    '<svg width="0" height="0" style="position:absolute" aria-hidden="true"><defs>'
    '<marker id="orchrm-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
    'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#333"/>'
    "</marker></defs></svg>"
)
"""The arrowhead every edge points with; the page holds it once."""


def drawn_width(o: Orchestration) -> float:
    """The width `svg` draws `o` at, in pixels (its text is 12 and 10 px at this size)."""
    return layout(o).width if o.agents else NODE_W + 2 * PAD


def svg(o: Orchestration) -> str:
    """The orchestration as one `<svg>`: a box per agent (the sink marked), a path per
    edge; an orchestration without agents is its direct answer in a box."""
    if not o.agents:
        return (
            f'<svg class="graph" viewBox="0 0 {NODE_W + 2 * PAD} {NODE_H + 2 * PAD}" '
            f'width="{NODE_W + 2 * PAD}" height="{NODE_H + 2 * PAD}" role="img">'
            f'<g class="node direct"><title>direct answer: {esc(o.answer, 2000)}</title>'
            f'<rect x="{PAD}" y="{PAD}" width="{NODE_W}" height="{NODE_H}" rx="6" fill="#eee" '
            f'stroke="#222"/><text x="{PAD + NODE_W / 2}" y="{PAD + 19}" class="id dark">'
            f'direct answer</text><text x="{PAD + NODE_W / 2}" y="{PAD + 36}" class="ty dark">'
            f"{esc(o.answer, 20)}</text></g></svg>"
        )
    placed = layout(o)
    sink = o.sink
    agents = {a.id: a for a in reversed(o.agents)}  # the first declaration of an id wins
    body = [_edge(placed.nodes[s], placed.nodes[t]) for s, t in placed.edges]
    body += [_node(agents[i], p, i == sink) for i, p in placed.nodes.items()]
    w, h = placed.width, placed.height + (GAP_Y if _has_back_edge(placed) else 0)
    return (
        f'<svg class="graph" viewBox="0 0 {w:.0f} {h:.0f}" width="{w:.0f}" height="{h:.0f}" '
        f'role="img">{"".join(body)}</svg>'
    )


def _has_back_edge(placed: Layout) -> bool:
    return any(placed.nodes[t].layer <= placed.nodes[s].layer for s, t in placed.edges)

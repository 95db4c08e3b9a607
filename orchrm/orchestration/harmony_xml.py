"""Harmony XML, the form orchestrators write: the tag scanner `orchrm.parse` reads it
with, and `to_harmony`, which writes an `Orchestration` back as XML."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from orchrm.orchestration.model import DoM, Orchestration

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


def harmony_tags(text: str) -> Iterator[tuple[int, int, bool, str]]:
    """`(start, end, closing, name)` of each harmony tag in `text` (`<agent>`, `</ to >`,
    ...), in order; names are matched ignoring ASCII case and returned in lower case.
    Linear in the length of `text`."""
    for m in _TAG_CANDIDATE_RE.finditer(text):
        name = m.group(2).lower()
        if name in _HARMONY_TAG_NAMES:
            yield m.start(), m.end(), bool(m.group(1)), name


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

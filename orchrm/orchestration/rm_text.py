"""The reward-model text: `render_for_rm`, the one rendering the reward model reads in
training, scoring, serving and GRPO alike, cut to a token budget."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from orchrm.orchestration.agent_types import AGENT_REGISTRY
from orchrm.orchestration.model import Agent, Orchestration

RM_RENDER_VERSION = "orchrm-rm-text/4"
"""Version of `render_for_rm`'s layout. Checkpoints record it; a change to the layout
must bump it, because a model trained on one layout misreads another."""

DOMAIN_PREFIX = "domain: "
"""How the optional first line naming the task's domain starts; a model trained on texts
with it (`domain_in_text` in its `orchrm.json`) is given it at scoring time too."""

QUESTION_SHARE = 0.5
"""The question may take at most this share of the reward-model budget."""

TYPE_NAMES = {name: kind.words for name, kind in AGENT_REGISTRY.items()}
"""What each sub-agent type does, in words (its registry entry's `words`), after its
class name in the reward model's text: a pretrained backbone knows "debate" and
"critique" but not a class name."""

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
    domain: str = "",
) -> str:
    """The text the reward model reads for (question, orchestration). Deterministic.

    It is `rm_prompt(question)` followed by `rm_completion(o)`, so preference data can
    store the shared question part once (`prompt`) and the orchestration part per side
    (`chosen`, `rejected`); their concatenation is exactly this text. Layout (version
    `RM_RENDER_VERSION`), structure first and thinking last:

        domain: <domain>          (only when `domain` is given)
        question: <question>
        orchestration: dom=<low|high> agents=<n> edges=<m> sink=<id|none>
        agent <id> = <type> (<what it does: TYPE_NAMES>) [roles: r1 | r2]
          input: <input, or "(original question)">
          about: <description>
        edges: a->b, b->c
        answer: <direct answer or answer id>
        thinking: <thinking>

    The domain line lets one model serve every domain: it learns what suits each one
    instead of averaging them. Agents appear in topological order (declaration order when
    the graph has a cycle).
    Budget (`max_tokens` by `count_tokens`, default `approx_token_count`): the question
    keeps its head within `QUESTION_SHARE` of it; the orchestration part gets the rest
    and, when over, is cut in this order: thinking, agent descriptions, agent inputs. A
    cut part ends in "..."; a part no longer than that stays whole; agent ids, types,
    roles and edges are never cut. The question line is within its share as `count_tokens`
    counts it, whether or not the counter counts the space after "question:".

    The whole text is tokenized once and each piece that is cut once more, so time is
    linear in the text's length: the total after a cut is the total before it plus the
    change in the piece's own count, which is exact for `approx_token_count` and for
    tokenizers that never merge tokens across whitespace. An `OffsetTokenCounter` cuts by
    its token ends; a plain `TokenCounter` by a binary search over the piece's words.
    Lone surrogates come out as U+FFFD, so a tokenizer always accepts the text.
    """
    count = _counter(count_tokens)
    prompt = rm_prompt(question, max_tokens, count, domain)
    return prompt + rm_completion(o, max_tokens - count(prompt), count)


def rm_prompt(
    question: str,
    max_tokens: int = 512,
    count_tokens: TokenCounter | None = None,
    domain: str = "",
) -> str:
    """The question part of `render_for_rm`: the domain line when `domain` is given, then
    `question: <question>` and a line break, the question cut to `QUESTION_SHARE` of
    `max_tokens`."""
    head = f"{DOMAIN_PREFIX}{_clean(domain)[:64]}\n" if domain else ""
    return head + _question_line(question, max_tokens, _counter(count_tokens))


def _question_line(question: str, max_tokens: int, count: TokenCounter) -> str:
    text = _clean(question)
    cap = int(max_tokens * QUESTION_SHARE)
    if count(f"question: {text}") > cap:
        piece, head = _Piece.measure(text, count), count("question:")
        short = _shorten(piece, cap - head, count)
        # A counter that counts the space after the colon (characters) sees one more.
        over = count(f"question: {short.text}") - cap
        text = (_shorten(piece, cap - head - over, count) if over > 0 else short).text
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
        if shorter.tokens >= piece.tokens:  # "..." outweighs a piece of a token or two
            continue
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

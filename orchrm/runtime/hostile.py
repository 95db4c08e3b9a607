"""Hostile and degenerate text, and orchestrations of thousands of agents, by size, for
holding the text stages to linear time: `TEXT_GENERATORS` (long runs of every kind of
whitespace after `${`, `<` and `Answer:`, brackets, unclosed and repeated tags, deep
nesting, lone surrogates, huge literals) and `GRAPH_GENERATORS` (chains, fan-ins, graphs
breaking every rule); the stages they go through (`STAGES`: both parsers, validation,
reward-model rendering and the sub-agent answer extractor; `GRAPH_STAGES` for the
orchestrations); `timed`, which stops a stage that runs past `HARD_CAP_S`; and
`worst_times`, the worst time of each stage over every generator, per size.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

from orchrm.orchestration import (
    AGENT_REGISTRY,
    AGENT_TYPES,
    Agent,
    DoM,
    Edge,
    Orchestration,
    render_for_rm,
    to_harmony,
    validate,
)
from orchrm.parse import ParseError, parse_harmony, parse_mas_code
from orchrm.runtime.prompts import extract_answer

HARD_CAP_S = 20.0
"""The longest one call of a stage may run before `timed` stops it with `TooSlow`."""

WHITESPACE = {
    "space": " ",
    "tab": "\t",
    "newline": "\n",
    "cr": "\r",
    "crlf": "\r\n",
    "vtab": "\x0b",
    "formfeed": "\x0c",
    "nel": "\x85",
    "nbsp": "\u00a0",
    "line-sep": "\u2028",
    "para-sep": "\u2029",
    "ideographic": "\u3000",
}
PLAIN_TYPE, OTHER_TYPE = [t for t in AGENT_TYPES if not AGENT_REGISTRY[t].min_roles][:2]
"""Two types an agent without debate roles may take: the first two the registry lists."""
DEBATE_TYPE = next(t for t in AGENT_TYPES if AGENT_REGISTRY[t].min_roles)
"""The first registered type whose agents take debate roles."""
AGENT_OPEN = f"<agent><agent_id>a</agent_id><agent_name>{PLAIN_TYPE}</agent_name>"
DEBATE_OPEN = f"<agent><agent_name>{DEBATE_TYPE}</agent_name><debate_roles>"
CHAIN_AGENT = 220  # characters of harmony text per agent of `chain`, about


def repeat(prefix: str, unit: str, suffix: str = "") -> Callable[[int], str]:
    """A generator: `prefix`, then `unit` repeated to `size` characters, then `suffix`."""

    def make(size: int) -> str:
        return prefix + unit * max(1, (size - len(prefix) - len(suffix)) // len(unit)) + suffix

    return make


def _whitespace_runs(ws: str) -> Callable[[int], str]:
    """Three long runs of `ws`: after `Answer:`, after `${` in an agent input, after `<`."""

    def make(size: int) -> str:
        run = ws * max(1, size // 3 // len(ws))
        return f"Answer:{run}\n{AGENT_OPEN}<agent_input>${{{run}<{run}"

    return make


def _text_generators() -> dict[str, Callable[[int], str]]:
    gens: dict[str, Callable[[int], str]] = {}
    for name, ws in WHITESPACE.items():
        gens[f"runs-of-{name}"] = _whitespace_runs(ws)
    gens |= {
        "lt-slash-spaces": repeat("</", " "),
        "lt-spaces-tag": repeat("<", " ", "agent"),
        "lt-run": repeat("", "<"),
        "tag-name-run": repeat("<", "a"),
        "close-run": repeat("", "</"),
        "ref-run": repeat("", "${"),
        "ref-space-run": repeat("", "${ "),
        "ref-open-brace-run": repeat("", "${ {", "}"),
        "ref-unclosed-names": repeat("<agent_input>", "${a "),
        "brackets-square": repeat(DEBATE_OPEN, "["),
        "brackets-curly": repeat("agents_config = ", "{"),
        "brackets-mixed": repeat(DEBATE_OPEN, "[{("),
        "thinking-unclosed": repeat("", "<thinking>x "),
        "thinking-then-agent": repeat(
            "", f"<thinking>x<agent><agent_name>{PLAIN_TYPE}</agent_name></agent>"
        ),
        "agent-input-unclosed": repeat(AGENT_OPEN, "<agent_input>"),
        "agent-fields-open": repeat(AGENT_OPEN, "<agent_input>x</agent_input></agent>"),
        "edge-pairs-open": repeat(AGENT_OPEN + "</agent><edge>", "<from>a<to>a"),
        "answer-lines": repeat("", "Answer: 1\n"),
        "answer-label-blank": repeat("", "**Answer:**\n \n"),
        "boxed-open": repeat("", "\\boxed{"),
        "fences": repeat("", "```"),
        "final-markers": repeat("", "assistantfinal"),
        "surrogates": repeat("<thinking>", "\ud800"),
        "surrogates-mixed": repeat(AGENT_OPEN + "<agent_input>", "a\udc00 ${\ud83d}"),
        "mas-unary": repeat("agents_config = ", "-", "1"),
        "mas-sum": repeat("agents_config = 1", "+1"),
        "mas-big-literal": repeat("agent_calls = [", "'a', ", "]"),
    }
    return gens


TEXT_GENERATORS = _text_generators()
"""Hostile text of a given size, by name."""


def chain(size: int) -> Orchestration:
    """A valid chain of about size / CHAIN_AGENT agents, each reading its predecessor."""
    n = max(2, size // CHAIN_AGENT)
    agents = tuple(
        Agent(
            f"a{i}",
            DEBATE_TYPE if i % 3 == 0 else PLAIN_TYPE,
            description=f"step {i} of the plan, checked twice",
            input=f"use ${{a{i - 1}}} and go on" if i else "",
            debate_roles=("Algebraist", "Geometer") if i % 3 == 0 else None,
        )
        for i in range(n)
    )
    edges = tuple(Edge(f"a{i - 1}", f"a{i}") for i in range(1, n))
    return Orchestration(agents, edges, DoM.HIGH, " ".join(["why"] * n), f"a{n - 1}")


def fan_in(size: int) -> Orchestration:
    """Thousands of start agents feeding one sink whose input names them all."""
    n = max(2, size // 120)
    starts = [Agent(f"s{i}", PLAIN_TYPE, description="look it up") for i in range(n)]
    sink = Agent("sink", OTHER_TYPE, input=" ".join(f"${{s{i}}}" for i in range(n)))
    edges = tuple(Edge(f"s{i}", "sink") for i in range(n))
    return Orchestration((*starts, sink), edges, DoM.HIGH, "", "sink")


def broken(size: int) -> Orchestration:
    """Thousands of agents breaking every rule: duplicate ids, cycles, unknown references."""
    n = max(2, size // 100)
    agents = tuple(
        Agent(f"a{i % 50}", "PlannerAgent", input=f"${{a{i + 1}}} ${{zz}}") for i in range(n)
    )
    edges = tuple(Edge(f"a{i % 50}", f"a{(i + 1) % 50}") for i in range(n))
    return Orchestration(agents, edges, DoM.LOW, "", "nobody")


GRAPH_GENERATORS: dict[str, Callable[[int], Orchestration]] = {
    "chain": chain,
    "fan-in": fan_in,
    "broken": broken,
}
"""Orchestrations whose harmony text is about a given size, by name."""


def text_plan(text: str) -> Orchestration:
    """An orchestration carrying hostile text in its thinking, description and input (the
    parts rendering cuts), and its head in a debate role and the answer."""
    agent = Agent("a", DEBATE_TYPE, text, text, (text[:100], "b"))
    return Orchestration((agent,), (), DoM.HIGH, text, text[:100])


def _render(text: str) -> str:
    """The reward-model text of a question and an orchestration that share `text`: a
    quarter each in the question, thinking, description and input."""
    q = len(text) // 4
    parts = [text[:q], text[q : 2 * q], text[2 * q : 3 * q], text[3 * q :]]
    agent = Agent("a", DEBATE_TYPE, parts[2], parts[3], (text[:100], "b"))
    return render_for_rm(parts[0], Orchestration((agent,), (), DoM.HIGH, parts[1], text[:100]))


def parse_both(text: str) -> None:
    """`text` through both parsers; a `ParseError` is an answer, not a failure."""
    for parser in (parse_harmony, parse_mas_code):
        with suppress(ParseError):
            parser(text)


STAGES: dict[str, Callable[[str], object]] = {
    "parse": parse_both,
    "validate": lambda text: validate(text_plan(text)),
    "render": _render,
    "extract": extract_answer,
}
"""What is timed on hostile text: the parsers, validation of an orchestration holding the
text, the reward-model rendering of a question and orchestration made of it, and the
sub-agent answer extractor."""


def _graph_parse(o: Orchestration) -> None:
    with suppress(ParseError):  # a low-DoM text of many agents has no ids to read back
        parse_harmony(to_harmony(o))


GRAPH_STAGES: dict[str, Callable[[Orchestration], object]] = {
    "parse": _graph_parse,
    "validate": validate,
    "render": lambda o: render_for_rm("What is the plan?", o),
}


class TooSlow(Exception):
    """A stage ran past `HARD_CAP_S`."""


@contextmanager
def hard_cap(seconds: float) -> Iterator[None]:
    """Stop the block with `TooSlow` after `seconds` (SIGALRM reaches into regex matching
    too); an outer alarm (pytest-timeout's) is put back afterwards."""

    def stop(*_):
        raise TooSlow(f"over {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 0.01))


def timed(fn: Callable[[object], object], arg: object, repeats: int = 1) -> float:
    """Best wall time of `repeats` calls of `fn(arg)`, each under `hard_cap`."""
    best = float("inf")
    for _ in range(repeats):
        with hard_cap(HARD_CAP_S):
            start = time.perf_counter()
            fn(arg)
            best = min(best, time.perf_counter() - start)
    return best


def worst_times(sizes: list[int]) -> dict[tuple[str, int], tuple[float, str]]:
    """(stage, size) -> (worst seconds, generator name) over all generators, each
    generator's subject timed once per stage; graph stages are named `graph STAGE`. A
    stage that raises anything but `ParseError` (or `TooSlow`) stops the run."""
    worst: dict[tuple[str, int], tuple[float, str]] = {}
    runs = [(STAGES, TEXT_GENERATORS, ""), (GRAPH_STAGES, GRAPH_GENERATORS, "graph ")]
    for stages, generators, prefix in runs:
        for name, make in generators.items():
            for size in sizes:
                subject = make(size)
                for stage, fn in stages.items():
                    seconds = timed(fn, subject)
                    key = (f"{prefix}{stage}", size)
                    if seconds > worst.get(key, (-1.0, ""))[0]:
                        worst[key] = (seconds, name)
    return worst

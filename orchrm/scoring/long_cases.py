"""Long (question, orchestration) cases at the paper's scale of 4k-16k tokens, made from
MAS-Orchestra record files (JSONL, as `orchrm.parse.read_records` reads them): each parsed
record with a long thinking made of the files' real gpt-oss reasoning traces, a chain of
agents per task and per file, and one long question (`long_cases`); the two counters
they are measured by, a tokenizer's tokens and characters (`budget_of`, `count_many`);
and what rendering them at a budget costs and keeps (`render_stats`).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, replace
from pathlib import Path

from orchrm.orchestration import Agent, DoM, Edge, Orchestration, render_for_rm
from orchrm.orchestration.rm_text import TokenCounter
from orchrm.parse import ParseError, parse_record, read_records

COUNTERS = ("minilm", "chars")
"""The counters `budget_of` and `count_many` know: the tokenizer's tokens, characters."""
WIDTHS = (1, 2, 5, 17)
"""How many reasoning traces make one record's long thinking, in turn over the records:
about 1k, 2k, 5k and 17k MiniLM tokens, so each budget sees texts below and above it."""
LONG_QUESTION_TRACES = 20
"""Traces appended to one question to make it longer than half of the largest budget."""
WHOLE = 10**9
"""A budget nothing reaches: the text as it is before any cut."""


@dataclass(frozen=True)
class LongCase:
    """One (question, orchestration) to render; `record` and `orchestrator` (the file's
    name) are set for a case made from one record."""

    name: str
    question: str
    orchestration: Orchestration
    record: dict | None = None
    orchestrator: str = ""


def _parsed(record: object) -> Orchestration | None:
    try:
        return parse_record(record)
    except ParseError:
        return None


def _chain(question: str, group: list[tuple[dict, Orchestration]]) -> Orchestration:
    """One graph of every agent of `group`, in a chain: each checks the one before it
    against the question, so inputs are as long as the question; the thinking is every
    record's trace."""
    agents: list[Agent] = []
    for k, (_, o) in enumerate(group):
        a = o.agents[0]
        wired = f"Check ${{{agents[-1].id}}} against the task: {question}" if agents else ""
        agents.append(Agent(f"{a.id}_{k}", a.type, a.description, wired, a.debate_roles))
    edges = tuple(Edge(x.id, y.id) for x, y in itertools.pairwise(agents))
    thinking = "\n\n".join(r.get("thinking") or "" for r, _ in group)
    return Orchestration(tuple(agents), edges, DoM.HIGH, thinking)


def long_cases(data: Path) -> list[LongCase]:
    """From the record files `data/*.jsonl`: every parsed record with a long thinking
    (`WIDTHS`), a chain per task and per file, and one question of
    `LONG_QUESTION_TRACES` traces."""
    cases: list[LongCase] = []
    all_traces: list[str] = []
    for path in sorted(data.glob("*.jsonl")):
        rows = [(line, r, _parsed(r)) for line, r in read_records(path)]
        traces = [r.get("thinking") or "" for _, r, _ in rows]
        all_traces += traces
        for i, (line, r, o) in enumerate(rows):
            if o is None:
                continue
            width = WIDTHS[i % len(WIDTHS)]
            thinking = "\n\n".join(traces[(i + k) % len(traces)] for k in range(width))
            long = replace(o, thinking=thinking)
            name = f"{path.stem}:{line} x{width}"
            cases.append(LongCase(name, r["question"], long, r, path.stem))
        parsed = [(r, o) for _, r, o in rows if o is not None]
        tasks: dict[str, list[tuple[dict, Orchestration]]] = {}
        for r, o in parsed:
            tasks.setdefault(r["question"], []).append((r, o))
        for n, (question, group) in enumerate(tasks.items()):
            name = f"{path.stem} task {n}: chain of {len(group)}"
            cases.append(LongCase(name, question, _chain(question, group)))
        question = parsed[0][0]["question"]
        name = f"{path.stem}: chain of all {len(parsed)}"
        cases.append(LongCase(name, question, _chain(question, parsed)))
    first = cases[0]
    question = " ".join([first.question, *all_traces[:LONG_QUESTION_TRACES]])
    cases.append(LongCase("question of 20 traces", question, first.orchestration))
    return cases


def budget_of(name: str, budget: int, tokenizer) -> tuple[int, TokenCounter]:
    """(max_tokens, count_tokens) for `render_for_rm` at `budget`: the tokenizer's budget
    for counter `minilm` (special tokens left out, as the trainer and `OrchRM.render`
    count), or characters for `chars`."""
    from orchrm.rmodel.tokens import render_budget

    return render_budget(tokenizer, budget) if name == "minilm" else (budget, len)


def count_many(name: str, texts: list[str], tokenizer) -> list[int]:
    """Each text's count by counter `name`; the tokenizer's in one batch."""
    if name == "chars":
        return [len(t) for t in texts]
    return [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]


def full_text(case: LongCase) -> str:
    """The text with nothing cut (the layout does not depend on the counter)."""
    return render_for_rm(case.question, case.orchestration, WHOLE)


def thinking_of(text: str) -> str:
    """The thinking a rendered text keeps, without the " ..." that marks a cut."""
    last = text.rsplit("\n", 1)[-1]
    if not last.startswith("thinking: "):
        return ""
    body = last[len("thinking: ") :]
    return "" if body == "..." else body.removesuffix(" ...")


class Reading:
    """A counter that adds up the characters it is given, with token ends when the
    counter it wraps has them (so `render_for_rm` takes the same path)."""

    def __init__(self, count) -> None:
        self.count, self.chars = count, 0
        if hasattr(count, "token_ends"):
            self.token_ends = self._token_ends

    def __call__(self, text: str) -> int:
        self.chars += len(text)
        return self.count(text)

    def _token_ends(self, text: str) -> list[int]:
        self.chars += len(text)
        return self.count.token_ends(text)


@dataclass(frozen=True)
class RenderStats:
    """The cases rendered at one budget by one counter."""

    seconds: float
    """The best wall time of rendering every case."""
    before: list[int]
    """Each case's count with nothing cut."""
    after: list[int]
    """Each case's count as rendered."""
    cut: int
    """Cases whose text was cut."""
    thinking_kept: float
    """The thinking's count after the cut over its count before, over all cases."""
    text_read: float
    """The characters the counter was given over the texts' own length (the work)."""


def render_stats(
    cases: list[LongCase], name: str, budget: int, tokenizer, repeat: int
) -> RenderStats:
    """Every case rendered by `render_for_rm` at `budget` counted by counter `name`: the
    best time of `repeat` runs, counts before and after the cut, the thinking kept and the
    text the counter read."""
    max_tokens, count = budget_of(name, budget, tokenizer)
    best, texts = float("inf"), []
    for _ in range(repeat):
        start = time.perf_counter()
        texts = [render_for_rm(c.question, c.orchestration, max_tokens, count) for c in cases]
        best = min(best, time.perf_counter() - start)
    fulls = [full_text(c) for c in cases]
    reading = Reading(count)
    for c in cases:
        render_for_rm(c.question, c.orchestration, max_tokens, reading)
    kept = sum(count_many(name, [thinking_of(t) for t in texts], tokenizer))
    whole = sum(count_many(name, [thinking_of(t) for t in fulls], tokenizer))
    return RenderStats(
        seconds=best,
        before=count_many(name, fulls, tokenizer),
        after=count_many(name, texts, tokenizer),
        cut=sum(t != f for t, f in zip(texts, fulls, strict=True)),
        thinking_kept=kept / whole,
        text_read=reading.chars / sum(map(len, fulls)),
    )

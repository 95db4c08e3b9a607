"""`render_for_rm` at the paper's scale, 4k-16k tokens, on the real MAS-Orchestra records.

Each parsed record gets a long thinking made of real gpt-oss reasoning traces (its own and
the next ones in its file), so texts run from about a thousand tokens to past 16k; graphs
chain the agents of a task, or of a whole file, so the structure itself competes for the
budget; one question is longer than its share. At budgets of 4096, 8192 and 16384, counted
by the offline MiniLM's fast tokenizer (`render_budget`) and by characters, the text must
fit, stay whole when it fits, lose thinking first and keep the structure and the question
as the rules say; the work is linear in the text; and `orchrm pairs export` cuts texts to
exactly the token counts the trainer (`orchrm.training.data.tokenize`) reads.
The cases and counters live in `orchrm.scoring.long_cases`; `benchmarks/long_render.py`
prints the same renders' speed and sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache

import pytest

from orchrm.orchestration import (
    Agent,
    Orchestration,
    render_for_rm,
    rm_completion,
    rm_prompt,
)
from orchrm.orchestration.rm_text import QUESTION_SHARE, TokenCounter
from orchrm.scoring.long_cases import (
    COUNTERS,
    WHOLE,
    LongCase,
    budget_of,
    count_many,
    full_text,
    long_cases,
)
from tests.samples import DATA

BUDGETS = (4096, 8192, 16384)
RECORD_CASES = 53
"""Records of the two files that `parse_record` reads (22 + 31, as tests/test_parse.py
counts them); the other 31 have no agents to render."""


@dataclass(frozen=True)
class Rendered:
    """One case rendered at one budget, with its count and the text before any cut."""

    case: LongCase
    max_tokens: int
    count: TokenCounter
    text: str
    tokens: int
    full: str
    full_tokens: int


def render_cases(
    cases: list[LongCase], name: str, budget: int, tokenizer, full_tokens: list[int]
) -> list[Rendered]:
    """Every case rendered at `budget` by counter `name`."""
    max_tokens, count = budget_of(name, budget, tokenizer)
    texts = [render_for_rm(c.question, c.orchestration, max_tokens, count) for c in cases]
    tokens = count_many(name, texts, tokenizer)
    return [
        Rendered(c, max_tokens, count, t, n, full_text(c), whole)
        for c, t, n, whole in zip(cases, texts, tokens, full_tokens, strict=True)
    ]


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from orchrm.rmodel.tokens import default_backbone

    return AutoTokenizer.from_pretrained(default_backbone())


@pytest.fixture(scope="module")
def cases() -> list[LongCase]:
    if not DATA.exists():
        pytest.skip(f"{DATA} is absent: the shared data folder is not beside this checkout")
    return long_cases(DATA)


@pytest.fixture(scope="module")
def rendered(cases, tokenizer) -> Callable[[str, int], list[Rendered]]:
    """(counter, budget) -> every case rendered, each pair computed once per module."""

    @cache
    def whole(name: str) -> list[int]:
        return count_many(name, [full_text(c) for c in cases], tokenizer)

    @cache
    def get(name: str, budget: int) -> list[Rendered]:
        return render_cases(cases, name, budget, tokenizer, whole(name))

    return get


GRID = [(name, budget) for name in COUNTERS for budget in BUDGETS]


# --------------------------------------------------------------------------- the budget


def test_the_cases_are_every_record_and_span_each_budget(cases, rendered):
    assert sum(c.record is not None for c in cases) == RECORD_CASES
    for name, budget in GRID:
        renders = rendered(name, budget)
        cut = [r for r in renders if r.full_tokens > r.max_tokens]
        assert cut and len(cut) < len(renders), (name, budget)
        # The longest text is past the budget even at 16k tokens.
        assert max(r.full_tokens for r in renders) > 16384
    # The chains of a whole file do not fit 4k tokens: their structure is cut too.
    lines = [(r.text.split("\n")[1:-1], r.full.split("\n")[1:-1]) for r in rendered("minilm", 4096)]
    assert any(got != want for got, want in lines)


def _core(r: Rendered) -> str:
    """What cutting can never remove: the prompt as rendered, and the orchestration part
    with thinking, descriptions and inputs each cut to "..."."""
    o = r.case.orchestration
    agents = tuple(
        replace(a, description="..." if a.description else "", input="..." if a.input else "")
        for a in o.agents
    )
    prompt = r.text.split("\n", 1)[0] + "\n"
    return prompt + rm_completion(replace(o, agents=agents, thinking="..."), WHOLE)


@pytest.mark.parametrize(("name", "budget"), GRID)
def test_text_fits_the_budget_and_is_whole_when_the_full_text_fits(rendered, name, budget):
    checked = 0
    for r in rendered(name, budget):
        if r.count(_core(r)) <= r.max_tokens:
            assert r.tokens <= r.max_tokens, r.case.name
            checked += 1
        question_line = "question: " + " ".join(r.case.question.split())
        if r.full_tokens <= r.max_tokens and r.count(question_line) <= budget_cap(r):
            assert r.text == r.full, r.case.name
    assert checked >= RECORD_CASES


def budget_cap(r: Rendered) -> int:
    """The most the question line may take."""
    return int(r.max_tokens * QUESTION_SHARE)


# --------------------------------------------------------------------------- the cut order


LABELS = ("orchestration:", "agent ", "  input: ", "  about: ", "edges: ", "answer: ")
CUTTABLE = ("thinking: ", "  about: ", "  input: ")


def _label(line: str) -> str:
    return next(x for x in (*LABELS, "thinking: ") if line.startswith(x))


def _kept(got: str, want: str, label: str) -> str | None:
    """The words `got` keeps of `want` (both lines with `label`) when `got` is a cut of
    it: a word-boundary prefix and " ...", or "..." alone; None when it is not a cut."""
    body, whole = got[len(label) :], want[len(label) :]
    if body == "...":
        return ""
    if body.endswith(" ...") and whole.startswith(body[:-4] + " "):
        return body[:-4]
    return None


def _check_cut(r: Rendered) -> None:
    """Thinking goes first, then descriptions, then inputs; the rest never changes."""
    completion, full = r.text.split("\n")[1:], r.full.split("\n")[1:]
    assert len(completion) == len(full), r.case.name
    lines: dict[str, list[tuple[str, str]]] = {label: [] for label in CUTTABLE}
    for got, want in zip(completion, full, strict=True):
        label = _label(want)
        if label not in CUTTABLE:
            assert got == want, (r.case.name, got[:80])  # ids, types, roles, edges
            continue
        assert got == want or _kept(got, want, label) is not None, (r.case.name, got[:80])
        lines[label].append((got, want))

    def gone(label: str) -> bool:  # cut to "...", or too short for "..." to be shorter
        return all(
            got == label + "..." or (got == want and r.count(got[len(label) :]) <= r.count("..."))
            for got, want in lines[label]
        )

    def touched(label: str) -> bool:
        return any(got != want for got, want in lines[label])

    if touched("  about: ") or touched("  input: "):
        assert gone("thinking: "), r.case.name
    if touched("  input: "):
        assert gone("  about: "), r.case.name


def _check_thinking_kept(r: Rendered) -> None:
    """When only the thinking is cut, it keeps every word that fits: one more would pass
    the budget. (When the structure is cut too, the thinking is "..." by the cut order.)"""
    got, want = r.text.rsplit("\n", 1)[-1], r.full.rsplit("\n", 1)[-1]
    if got == want or not want.startswith("thinking: "):
        return
    if r.text.split("\n")[1:-1] != r.full.split("\n")[1:-1]:
        assert got == "thinking: ...", r.case.name
        return
    kept = _kept(got, want, "thinking: ")
    assert kept is not None, r.case.name
    rest = want[len("thinking: ") + len(kept) :].lstrip(" ")
    following = rest.split(" ", 1)[0]
    assert r.tokens + r.count(" " + following) > r.max_tokens, r.case.name


@pytest.mark.parametrize(("name", "budget"), GRID)
def test_thinking_is_cut_first_and_the_structure_stays_whole(rendered, name, budget):
    whole_structure = 0
    for r in rendered(name, budget):
        _check_cut(r)
        _check_thinking_kept(r)
        o = r.case.orchestration
        if not o.thinking:
            continue
        structure = r.text.split("\n", 1)[0] + "\n" + rm_completion(replace(o, thinking=""), WHOLE)
        if r.count(structure + "\nthinking: ...") <= r.max_tokens:
            # The structure fits beside a cut thinking: all of it is whole.
            assert r.text.split("\n")[1:-1] == r.full.split("\n")[1:-1], r.case.name
            whole_structure += 1
    assert whole_structure >= RECORD_CASES


@pytest.mark.parametrize(("name", "budget"), GRID)
def test_the_question_keeps_its_head_within_its_share(rendered, name, budget):
    cut = 0
    for r in rendered(name, budget):
        question = " ".join(r.case.question.split())
        line = r.text.split("\n", 1)[0]
        if r.count(f"question: {question}") <= budget_cap(r):
            assert line == f"question: {question}", r.case.name
            continue
        cut += 1
        kept = _kept(line, f"question: {question}", "question: ")
        assert kept is not None and r.count(line) <= budget_cap(r), r.case.name
        following = question[len(kept) :].lstrip(" ").split(" ", 1)[0]
        assert r.count(line) + r.count(" " + following) > budget_cap(r), r.case.name
    assert cut >= 1  # the long question


# --------------------------------------------------------------------------- linear work


class _Reading:
    """A plain counter that adds up the characters it is given to read."""

    def __init__(self, count: TokenCounter) -> None:
        self.count, self.chars = count, 0

    def __call__(self, text: str) -> int:
        self.chars += len(text)
        return self.count(text)


class _ReadingWithEnds(_Reading):
    """`_Reading` of a counter that also gives token ends."""

    def token_ends(self, text: str) -> list[int]:
        self.chars += len(text)
        return self.count.token_ends(text)


@pytest.mark.parametrize("name", COUNTERS)
def test_rendering_reads_each_text_a_bounded_number_of_times(cases, tokenizer, name):
    """Work grows with the text, not faster: with token ends each text is read at most
    three times (whole, the piece it cuts, and a cut question's line twice more); a plain
    counter's search over word prefixes reads the cut piece once per halving."""
    max_tokens, count = budget_of(name, 16384, tokenizer)
    for case in [c for c in cases if c.record is None]:  # the graphs and the longest texts
        reading = _Reading(count) if name == "chars" else _ReadingWithEnds(count)
        render_for_rm(case.question, case.orchestration, max_tokens, reading)
        size = len(full_text(case))
        rounds = 3 if name == "minilm" else (size // 2).bit_length() + 3
        assert reading.chars <= rounds * size + 1000, (case.name, reading.chars, size)


# --------------------------------------------------------------------------- short cuts


def test_a_question_cut_by_characters_stays_within_its_share():
    """A character counter counts the space after "question:"; the line still fits."""
    for word in ("a", "ab", "abc", "abcdefg"):
        question = f"{word} " * 3000
        line = rm_prompt(question, 4096, len).rstrip("\n")
        assert len(line) <= 2048 and len(line) + len(word) + 1 > 2048
        assert line.endswith(" ...") and question.startswith(line[len("question: ") : -4])


def test_a_part_shorter_than_the_ellipsis_stays_whole():
    """Cutting "ok" to "..." would lengthen the text: such parts are kept as they are."""
    o = Orchestration(agents=(Agent("A", "CoTAgent", "go", "do"),), thinking="ok")
    full = render_for_rm("Q?", o, WHOLE, len)
    assert render_for_rm("Q?", o, len(full) - 1, len) == full
    longer = replace(o, thinking="ok " * 10)  # this thinking can be cut, and is
    text = render_for_rm("Q?", longer, len(full) - 1, len)
    assert text.endswith("thinking: ...") and len(text) < len(render_for_rm("Q?", longer, WHOLE))


# --------------------------------------------------------------------------- export and trainer


def run_records(cases: list[LongCase]) -> list[dict]:
    """An `orchrm.run/1` record of each one-record case: its long orchestration, its
    file as the orchestrator, and its execution graded against the ground truth."""
    from orchrm.tasks.answers import is_correct
    from orchrm.tasks.run import RUN_SCHEMA

    singles = [c for c in cases if c.record is not None]
    tasks = sorted({c.question for c in singles})
    return [
        {
            "schema": RUN_SCHEMA,
            "task_id": f"masbench-{tasks.index(c.question)}",
            "question": c.question,
            "ground_truth": c.record["ground_truth"],
            "domain": "masbench",
            "orchestrator": c.orchestrator,
            "sample_index": c.record["row"],
            "step": int(c.record["step"]),
            "raw": c.record["thinking"] or "",
            "orchestration": c.orchestration.to_dict(),
            "execution": {"answer": c.record["execution_output"]},
            "answer": c.record["execution_output"],
            "correct": is_correct(c.record["execution_output"], c.record["ground_truth"]),
        }
        for c in singles
    ]


def test_exported_token_counts_are_what_the_trainer_reads(cases, tokenizer, tmp_path):
    """`orchrm pairs export --max-length 4096` (its budget and export, called as the
    command calls them) cuts each text to the count the trainer reads: the tokens without
    special tokens plus the tokenizer's specials, within 4096, so `tokenize` truncates
    nothing; the longest texts were cut to sit at the budget."""
    from orchrm.jsonl import read_jsonl, write_jsonl
    from orchrm.rmodel.tokens import backbone_budget, token_counter
    from orchrm.store.db import Store
    from orchrm.store.ingest import ingest_file
    from orchrm.store.pairs import MineConfig, export, mine
    from orchrm.training.data import tokenize

    log = tmp_path / "long.jsonl"
    write_jsonl(run_records(cases), log)
    with Store(tmp_path / "long.duckdb") as store:
        ingest_file(store, log, strict=True)
        specialized, base = ("masbench_depth2_step180",), ("masbench_depth2_step60",)
        mine(store, MineConfig(specialized=specialized, base=base, cap_per_task=4))
        written = export(store, tmp_path / "pairs", "default", "jsonl", *backbone_budget("", 4096))
    rows = [r for path in written.values() for _, r in read_jsonl(path)]
    assert {r["kind"] for r in rows} == {"sob", "coi"}
    count, specials = token_counter(tokenizer), tokenizer.num_special_tokens_to_add()
    assert specials == 2  # [CLS] and [SEP]: the texts' budget is 4094
    exported = [
        count(r["prompt"]) + count(r[side]) for side in ("chosen", "rejected") for r in rows
    ]
    pairs = tokenize(rows, tokenizer, 4096)
    read = [len(ids) for ids in (*pairs.chosen, *pairs.rejected)]
    assert pairs.truncated == 0
    assert read == [n + specials for n in exported]
    assert max(read) <= 4096 and max(read) > 4096 - 32  # cut ones end near the budget
    assert any(r["chosen"].endswith(" ...") for r in rows)

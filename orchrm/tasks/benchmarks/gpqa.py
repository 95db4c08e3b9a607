"""GPQA: the official CSV, `Question`, `Correct Answer`, `Incorrect Answer 1..3`,
`Record ID`. The four options are shuffled per record and shown as (A)..(D); the answer is
the correct option's letter, and a reply is graded, and votes counted, by the letter it
chooses (`gpqa_letter`)."""

from __future__ import annotations

import csv
import random
import re
from collections.abc import Iterator
from pathlib import Path

from orchrm.errors import InputError
from orchrm.tasks.benchmarks.base import Benchmark
from orchrm.tasks.task import Task

INSTRUCTION = "Give the letter (A, B, C or D) of the correct option as the final answer."
COLUMNS = (
    "Question",
    "Correct Answer",
    "Incorrect Answer 1",
    "Incorrect Answer 2",
    "Incorrect Answer 3",
)


def load(path: Path, seed: int = 0, context: str = "question") -> Iterator[Task]:
    """The questions of `path` in file order, each with its options in the order `seed`
    gives it (`context` does not apply)."""
    for n, row in _rows(path):
        yield _task(path, n, row, seed)


def _rows(path: Path) -> Iterator[tuple[int, dict]]:
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"{path}: not the GPQA CSV: no column {', '.join(map(repr, missing))}")
        for n, row in enumerate(reader, 1):
            if None in row:  # more cells than the header has columns
                raise InputError(f"{path}: row {n} (line {reader.line_num}) has extra cells")
            yield n, row


def gpqa_options(row: dict, seed: int = 0) -> tuple[list[str], str]:
    """The four options of a GPQA row in the order shown, and the correct one's letter.
    The order depends only on `seed` and the row's `Record ID` (or question), so a run
    shows every question the same way on every machine."""
    options = [row[c].strip() for c in COLUMNS[1:]]
    key = (row.get("Record ID") or "").strip() or row["Question"]
    order = list(range(4))
    random.Random(f"gpqa:{seed}:{key}").shuffle(order)
    return [options[i] for i in order], "ABCD"[order.index(0)]


def _task(path: Path, n: int, row: dict, seed: int) -> Task:
    record_id = (row.get("Record ID") or "").strip()
    where = f"{path}: row {n}" + (f" (Record ID {record_id!r})" if record_id else "")
    for column in COLUMNS:
        if not (row.get(column) or "").strip():
            raise InputError(f"{where}: column {column!r} is empty")
    options, letter = gpqa_options(row, seed)
    shown = "\n".join(f"({x}) {o}" for x, o in zip("ABCD", options, strict=True))
    question = f"{row['Question'].strip()}\n\n{shown}\n\n{INSTRUCTION}"
    return Task(record_id or f"gpqa-{n}", question, letter, "gpqa")


_MARKUP_RE = re.compile(r"[*_`]")
# "B", "(B)", "B.", "B) text", "(b): text": the reply opens with the option's label.
_LEADING_RE = re.compile(r"^\s*\(?([A-Da-d])(?:\)|\.|:|\s*$)")
# "the answer is (B)", "answer: B", "option B", "choice (c)".
# Possessive runs of whitespace: three adjacent `\s*` would split one long run every way.
_PHRASE_RE = re.compile(
    r"\b(?i:answer|option|choice)\s*+(?:(?i:is|would be)\s*+)?(?::\s*+)?"
    r"\(?([A-D]|(?<=\()[a-d])\)?(?!\w)"
)
_MARKER_RE = re.compile(r"\(([A-D])\)|(?<![\w(])([A-D])\)")
_BARE_RE = re.compile(r"(?<![\w(])([A-D])(?![\w)])")
# Two letters joined as alternatives or a list: "A or B", "(A), (C)", "B/C", "A and D".
_SEVERAL_RE = re.compile(r"(?<![\w])\(?[A-D]\)?\s*(?:,|/|&|\bor\b|\band\b)\s*\(?[A-D]\)?(?![\w])")


def gpqa_letter(answer: str | None) -> str | None:
    """The option letter (A-D) a multiple-choice reply chooses, or None when it names
    none or several. Read in this order: a reply that opens with a label ("B", "(B)",
    "B) 42 kJ"); phrases ("the answer is B", "option (C)") with any "(X)" labels; a lone
    capital A-D. Any other label among them, or letters listed as alternatives ("A or
    B"), gives None: a reply that hedges between options chooses none of them."""
    if answer is None:
        return None
    text = _MARKUP_RE.sub("", str(answer)).strip()
    if _SEVERAL_RE.search(text):
        return None
    markers = {a or b for a, b in _MARKER_RE.findall(text)}
    leading = _LEADING_RE.match(text)
    if leading:
        chosen = {leading.group(1).upper()} | markers
    else:
        chosen = {m.upper() for m in _PHRASE_RE.findall(text)} | markers
        if not chosen:
            chosen = set(_BARE_RE.findall(text))
    return chosen.pop() if len(chosen) == 1 else None


def gpqa_correct(answer: str | None, truth: str | int | float | None) -> bool | None:
    """GPQA: the reply's chosen letter (`gpqa_letter`) is the correct option's letter."""
    if truth is None:
        return None
    gold = gpqa_letter(str(truth))
    return gold is not None and gpqa_letter(answer) == gold


BENCHMARK = Benchmark("gpqa", load, gpqa_correct, answer_key=gpqa_letter)

"""HotpotQA: the distractor-setting dev JSON, a list of `_id`, `question`, `answer`,
`context` [[title, [sentences]], ...]. The paragraphs go into the question (context
`question`, the distractor setting) or into the search corpus (`corpus`, one document per
article title); answers are graded by exact match after SQuAD normalization
(`hotpotqa_correct`; `hotpotqa_f1` for the official F1)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from orchrm.errors import InputError
from orchrm.runtime.retrieval import Document
from orchrm.tasks.answers import normalize_text
from orchrm.tasks.benchmarks.base import Benchmark, required
from orchrm.tasks.task import Task

INSTRUCTION = "Answer with a short span (a name, a date, a number) or yes/no."
_YES_NO = ("yes", "no")


def load(path: Path, seed: int = 0, context: str = "question") -> Iterator[Task]:
    """The questions of `path` in file order, with their paragraphs when `context` is
    `question` (`seed` does not apply)."""
    for index, record in _records(path):
        yield _task(path, index, record, context == "question")


def documents(path: Path, limit: int | None, context: str) -> list[Document] | None:
    """With `context="corpus"`, the paragraphs of the first `limit` questions, one document
    per article title; else None (the paragraphs are in the questions)."""
    if context != "corpus":
        return None
    docs: dict[str, Document] = {}
    for n, (index, record) in enumerate(_records(path)):
        if limit is not None and n >= limit:
            break
        for title, sentences in _paragraphs(path, index, record):
            # A title is one Wikipedia article's lead paragraph in every record.
            docs.setdefault(title, Document(title, "".join(sentences).strip(), title))
    return list(docs.values())


def _records(path: Path) -> Iterator[tuple[int, dict]]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except ValueError as err:
        raise InputError(f"{path}: not JSON ({err}); HotpotQA is one JSON list") from None
    if not isinstance(data, list):
        raise InputError(f"{path}: a JSON {type(data).__name__}, not HotpotQA's list of records")
    for index, record in enumerate(data):
        if not isinstance(record, dict):
            raise InputError(f"{path}: record {index} is not a JSON object")
        yield index, record


def _where(path: Path, index: int, record: dict) -> str:
    return f"{path}: record {index} (_id {record.get('_id')!r})"


def _paragraphs(path: Path, index: int, record: dict) -> list[tuple[str, list[str]]]:
    where = _where(path, index, record)
    context = required(where, record, "context", list)
    for n, paragraph in enumerate(context):
        if not (
            isinstance(paragraph, list)
            and len(paragraph) == 2
            and isinstance(paragraph[0], str)
            and isinstance(paragraph[1], list)
            and all(isinstance(s, str) for s in paragraph[1])
        ):
            raise InputError(f"{where}: context[{n}] is not [title, [sentences...]]")
    return [(title, sentences) for title, sentences in context]


def _task(path: Path, index: int, record: dict, context_in_question: bool) -> Task:
    where = _where(path, index, record)
    question = required(where, record, "question")
    answer = required(where, record, "answer")
    paragraphs = _paragraphs(path, index, record)
    text = question
    if context_in_question:
        shown = "\n\n".join(f"{t}: {''.join(s).strip()}" for t, s in paragraphs)
        text = f"{question}\n\nParagraphs:\n\n{shown}"
    task_id = str(required(where, record, "_id"))
    return Task(task_id, f"{text}\n\n{INSTRUCTION}", answer, "hotpotqa")


def hotpotqa_correct(answer: str | None, truth: str | int | float | None) -> bool | None:
    """HotpotQA's exact match: equal after SQuAD normalization. A yes/no question is
    also answered by a prediction whose first word is yes or no ("Yes, both are
    American"); the official metric would count that wrong, our one concession to
    sub-agents that explain themselves."""
    if truth is None:
        return None
    if answer is None:
        return False
    pred, gold = normalize_text(str(answer)), normalize_text(str(truth))
    first = pred.split()[:1]
    if gold in _YES_NO and first and first[0] in _YES_NO:
        return first[0] == gold
    return pred == gold != ""


def hotpotqa_f1(answer: str | None, truth: str) -> float:
    """HotpotQA's token F1 after SQuAD normalization; a yes/no/noanswer answer scores 0
    against any other answer, as in the official evaluation script."""
    pred = normalize_text(answer or "").split()
    gold = normalize_text(truth).split()
    special = ("yes", "no", "noanswer")
    if (" ".join(pred) in special or " ".join(gold) in special) and pred != gold:
        return 0.0
    common = sum((Counter(pred) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)


BENCHMARK = Benchmark("hotpotqa", load, hotpotqa_correct, documents)

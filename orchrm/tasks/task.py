"""A task (`Task`: id, question, ground-truth answer, domain), what makes two questions
one (`question_key`), and the JSONL files of tasks `orchrm run --tasks` reads
(`load_tasks`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchrm.errors import InputError
from orchrm.jsonl import read_jsonl

QUESTION_FIELDS = ("question", "problem", "prompt")
ANSWER_FIELDS = ("answer", "ground_truth", "solution")


@dataclass(frozen=True)
class Task:
    """One task: its id, question, ground-truth answer (None if unknown) and domain."""

    id: str
    question: str
    answer: str | None = None
    domain: str = ""


def question_key(question: str) -> str:
    """What makes two questions the same question: their text with case and runs of
    white space ignored. Punctuation is kept: "What is 2 + 6?" and "What is 2 * 6?" are
    two questions."""
    return " ".join(question.casefold().split())


def load_tasks(path: str | Path, limit: int | None = None) -> list[Task]:
    """Tasks from JSONL: a question (`question`/`problem`/`prompt`), an optional answer
    (`answer`/`ground_truth`/`solution`), an optional `id` (default `<file>:<line>`) and
    `domain`. A bad line raises InputError naming the file and line."""
    tasks: list[Task] = []
    for line_no, record in read_jsonl(path):
        if not isinstance(record, dict):
            raise InputError(f"{path}:{line_no}: a task must be a JSON object")
        question = next((record[k] for k in QUESTION_FIELDS if k in record), None)
        if not isinstance(question, str) or not question.strip():
            raise InputError(f"{path}:{line_no}: no question (one of {QUESTION_FIELDS})")
        answer = next((record[k] for k in ANSWER_FIELDS if k in record), None)
        tasks.append(
            Task(
                id=str(record.get("id", f"{Path(path).name}:{line_no}")),
                question=question,
                answer=None if answer is None else str(answer),
                domain=str(record.get("domain", "")),
            )
        )
        if limit is not None and len(tasks) >= limit:
            break
    return tasks

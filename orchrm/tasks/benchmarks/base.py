"""What a benchmark is (`Benchmark`: its name, its loader, its grader, its search corpus
and how its votes count), and the readers of official files its loaders share. A bad file
or record raises InputError naming the file, the record and what is wrong."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from orchrm.errors import InputError, MissingInput
from orchrm.jsonl import read_jsonl
from orchrm.runtime.retrieval import Document
from orchrm.tasks.task import Task

Grader = Callable[[str | None, str | int | float | None], bool | None]
"""(answer, truth) -> whether the answer is right; None without a truth to compare with."""


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: `load(path, seed, context)` yields the tasks of its official file in
    file order (domain: `name`); `grade` checks an answer; `documents(path, limit,
    context)`, where the benchmark has a search corpus, gives the documents of the first
    `limit` records (None when `context` puts none there); `answer_key`, where votes need
    more than the default, says which answers count as the same."""

    name: str
    load: Callable[[Path, int, str], Iterator[Task]]
    grade: Grader
    documents: Callable[[Path, int | None, str], list[Document] | None] | None = None
    answer_key: Callable[[str], str | None] | None = None


def existing(path: str | Path) -> Path:
    """`path`, which must exist."""
    path = Path(path)
    if not path.exists():
        raise MissingInput(f"{path}: no such file")
    return path


def check_unique_ids(path: Path, tasks: list[Task]) -> None:
    """No two of `tasks` (read from `path`) share an id."""
    seen: set[str] = set()
    for task in tasks:
        if task.id in seen:
            raise InputError(f"{path}: task id {task.id!r} appears twice")
        seen.add(task.id)


def jsonl_objects(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, record) for each line, which must be a JSON object."""
    for line_no, record in read_jsonl(path):
        if not isinstance(record, dict):
            raise InputError(f"{path}:{line_no}: a record must be a JSON object")
        yield line_no, record


def required(where: str, record: dict, key: str, kind: type | tuple[type, ...] = str):
    """`record[key]`, which must be a non-empty value of `kind`."""
    value = record.get(key)
    if value is None or not isinstance(value, kind) or isinstance(value, bool):
        got = "missing" if value is None else f"a {type(value).__name__}"
        raise InputError(f"{where}: field {key!r} is {got}, not a {_kind_name(kind)}")
    if isinstance(value, str) and not value.strip():
        raise InputError(f"{where}: field {key!r} is empty")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {str: "string", int: "number", float: "number", list: "list", dict: "object"}
    return " or ".join(dict.fromkeys(names.get(k, k.__name__) for k in kinds))

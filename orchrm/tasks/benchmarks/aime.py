"""AIME: MathArena's JSONL, `id`, `problem`, `answer` one problem a line (a file, or a
folder whose `*.jsonl` are read in name order); integer answers, graded by the math
checker (`orchrm.tasks.answers.math_correct`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from orchrm.errors import InputError
from orchrm.tasks.answers import math_correct
from orchrm.tasks.benchmarks.base import Benchmark, jsonl_objects, required
from orchrm.tasks.task import Task


def load(path: Path, seed: int = 0, context: str = "question") -> Iterator[Task]:
    """The problems of `path` in file order (`seed` and `context` do not apply)."""
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    if not files:
        raise InputError(f"{path}: a folder without *.jsonl files")
    for file in files:
        for line_no, record in jsonl_objects(file):
            yield _task(f"{file}:{line_no}", record)


def _task(where: str, record: dict) -> Task:
    answer = required(where, record, "answer", (int, str))
    problem = required(where, record, "problem")
    return Task(str(required(where, record, "id", (str, int))), problem, str(answer), "aime")


BENCHMARK = Benchmark("aime", load, math_correct)

"""Exact-answer tasks generated from a seed: sums, differences, products, "has x, gets y
more" word problems, two-step sums, comparisons and letter counts (`TASK_KINDS`), each at
three levels of difficulty (`LEVELS`). An answer is a whole number, graded by the math
checker (`grade`, `orchrm.tasks.answers.math_correct`); every task's domain is `math`, so
`orchrm.tasks.grading.grade` grades it the same way.

`make_tasks` draws tasks; `save_tasks` writes them as a task file that `orchrm run --tasks`
reads as it is (`id`, `question`, `answer`, `domain`) and that `load` reads back with each
task's kind and level.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchrm.errors import InputError
from orchrm.jsonl import write_jsonl
from orchrm.tasks.answers import math_correct
from orchrm.tasks.benchmarks.base import check_unique_ids, existing, jsonl_objects, required
from orchrm.tasks.task import Task

DOMAIN = "math"
"""Every task's domain: `orchrm.tasks.grading.grade` grades it with `math_correct`."""

grade = math_correct
"""(answer, truth) -> whether the answer is the truth's number."""

NAMES = ("Tom", "Ana", "Sam", "Lea", "Ben", "Mia", "Raj", "Zoe")
THINGS = ("apples", "pens", "books", "coins", "cards", "shells", "stamps", "marbles")
SHORT_WORDS = ("cat", "sun", "tree", "book", "lamp", "fish", "door", "milk")
LONG_WORDS = ("garden", "window", "planet", "bottle", "pencil", "kitchen", "rabbit", "orange")


def _add(rng: random.Random, level: int) -> tuple[str, int]:
    (lo, hi), (lo2, hi2) = (((2, 9), (2, 9)), ((10, 49), (10, 49)), ((100, 499), (10, 99)))[
        level - 1
    ]
    a, b = rng.randint(lo, hi), rng.randint(lo2, hi2)
    return f"What is {a} + {b}?", a + b


def _sub(rng: random.Random, level: int) -> tuple[str, int]:
    a = rng.randint(*((5, 9), (20, 99), (100, 999))[level - 1])
    b = rng.randint(1 if level == 1 else 10, a - 1)
    return f"What is {a} - {b}?", a - b


def _mul(rng: random.Random, level: int) -> tuple[str, int]:
    (lo, hi), (lo2, hi2) = (((2, 5), (2, 5)), ((3, 9), (3, 9)), ((11, 19), (3, 9)))[level - 1]
    a, b = rng.randint(lo, hi), rng.randint(lo2, hi2)
    return f"What is {a} * {b}?", a * b


def _word(rng: random.Random, level: int) -> tuple[str, int]:
    name, thing = rng.choice(NAMES), rng.choice(THINGS)
    if level == 1:
        x, y = rng.randint(2, 9), rng.randint(2, 9)
    else:
        x, y = rng.randint(10, 40), rng.randint(2, 20)
    if level < 3:
        question = f"{name} has {x} {thing} and gets {y} more. How many {thing} does {name} have?"
        return question, x + y
    z = rng.randint(1, x + y - 1)
    question = (
        f"{name} has {x} {thing}, gets {y} more, then gives away {z}. "
        f"How many {thing} does {name} have now?"
    )
    return question, x + y - z


def _two_step(rng: random.Random, level: int) -> tuple[str, int]:
    if level == 1:
        a, b, c = (rng.randint(1, 9) for _ in range(3))
        return f"What is {a} + {b} + {c}?", a + b + c
    a, b, c = rng.randint(2, 9), rng.randint(2, 9), rng.randint(1, 20)
    if level == 2:
        return f"What is {a} * {b} + {c}?", a * b + c
    return f"What is ({a} + {c}) * {b}?", (a + c) * b


def _compare(rng: random.Random, level: int) -> tuple[str, int]:
    if level == 1:
        a, b = rng.sample(range(10, 99), 2)
        return f"Which number is larger, {a} or {b}?", max(a, b)
    numbers = rng.sample(range(10, 99), 3)
    if level == 2:
        return f"Which number is the largest: {', '.join(map(str, numbers))}?", max(numbers)
    return f"Which number is the smallest: {', '.join(map(str, numbers))}?", min(numbers)


def _count(rng: random.Random, level: int) -> tuple[str, int]:
    word = rng.choice(SHORT_WORDS if level == 1 else LONG_WORDS)
    if level < 3:
        return f"How many letters are in the word '{word}'?", len(word)
    letter = rng.choice(sorted(set(word)))
    return f"How many times does the letter '{letter}' appear in '{word}'?", word.count(letter)


TASK_KINDS: dict[str, Callable[[random.Random, int], tuple[str, int]]] = {
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "word": _word,
    "two_step": _two_step,
    "compare": _compare,
    "count": _count,
}
"""Task kind -> (rng, level 1-3) -> (question, exact answer)."""
LEVELS = (1, 2, 3)
EVERY_CELL: tuple[tuple[str, int], ...] = tuple((k, level) for k in TASK_KINDS for level in LEVELS)
"""Every (kind, level), kinds in `TASK_KINDS` order."""


@dataclass(frozen=True)
class GeneratedTask:
    """A generated task and its kind and level."""

    task: Task
    kind: str
    level: int


def make_tasks(
    cells: tuple[tuple[str, int], ...], n: int, seed: int, prefix: str
) -> list[GeneratedTask]:
    """`n` tasks cycling through the (kind, level) `cells`, drawn from `seed` and
        `prefix`, ids `PREFIX-<i>-<kind><level>`. A question already drawn is drawn again, up to
    100 times: a cell with fewer distinct questions than its tasks repeats some."""
    rng = random.Random(f"real-exec:{prefix}:{seed}")
    seen: set[str] = set()
    out = []
    for i in range(n):
        kind, level = cells[i % len(cells)]
        for _ in range(100):
            question, answer = TASK_KINDS[kind](rng, level)
            if question not in seen:
                break
        seen.add(question)
        task = Task(f"{prefix}-{i:03d}-{kind}{level}", question, str(answer), DOMAIN)
        out.append(GeneratedTask(task, kind, level))
    return out


def save_tasks(tasks: list[GeneratedTask], path: str | Path) -> Path:
    """Write `tasks` as JSONL, one `{id, question, answer, domain, kind, level}` a line."""
    rows = [
        {"id": t.task.id, "question": t.task.question, "answer": t.task.answer,
         "domain": t.task.domain, "kind": t.kind, "level": t.level}
        for t in tasks
    ]  # fmt: skip
    write_jsonl(rows, path)
    return Path(path)


def load(path: str | Path) -> list[GeneratedTask]:
    """The tasks of a file `save_tasks` wrote, in file order. A missing file, a record
    without one of its fields, an unknown kind or level, or an id twice raises
    InputError naming the file and line."""
    path = existing(path)
    out = []
    for line_no, record in jsonl_objects(path):
        where = f"{path}:{line_no}"
        kind = required(where, record, "kind")
        level = required(where, record, "level", int)
        if kind not in TASK_KINDS or level not in LEVELS:
            raise InputError(f"{where}: no task kind {kind!r} at level {level}")
        task = Task(
            str(required(where, record, "id", (str, int))),
            required(where, record, "question"),
            str(required(where, record, "answer", (str, int))),
            str(record.get("domain") or DOMAIN),
        )
        out.append(GeneratedTask(task, kind, level))
    check_unique_ids(path, [t.task for t in out])
    return out

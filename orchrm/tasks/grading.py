"""Is an answer correct? Each domain's grader: a benchmark's own checker, math, or text.

Used when a log has no correctness label of its own (`orchrm run`, ingest).
`grade(answer, truth, domain)` picks the grader of a domain (`GRADERS`): a benchmark's
domain (`orchrm.tasks.benchmarks.registry.BENCHMARKS`) its checker, the generated tasks'
domain (`orchrm.tasks.benchmarks.generated`) their grader, the math domains
`math_correct`, any other `is_correct` (`orchrm.tasks.answers`). `answer_key` says which
answers count as the same vote.
"""

from __future__ import annotations

from functools import lru_cache

from orchrm.tasks.answers import as_number, is_correct, math_correct, normalize_text
from orchrm.tasks.benchmarks import generated
from orchrm.tasks.benchmarks.base import Grader
from orchrm.tasks.benchmarks.registry import BENCHMARKS

MATH_DOMAINS = ("math", "masbench", "deepscaler")
"""Domains of math logs without a benchmark module, graded by `math_correct`."""

GRADERS: dict[str, Grader] = {
    **dict.fromkeys(MATH_DOMAINS, math_correct),
    generated.DOMAIN: generated.grade,
    **{name: benchmark.grade for name, benchmark in BENCHMARKS.items()},
}
"""Domain -> grader; any other domain uses `is_correct`."""


def grade(answer: str | None, truth: str | int | float | None, domain: str = "") -> bool | None:
    """Correctness of `answer` against `truth` with the domain's grader."""
    return GRADERS.get(domain, is_correct)(answer, truth)


def answer_key(answer: str | None, domain: str = "") -> str | None:
    """What votes count as the same answer: the benchmark's own key where it has one (the
    chosen letter for multiple choice, `gpqa`), the exact value when the answer is a
    number, else the normalized text. None for no answer (or a multiple-choice reply that
    names no single letter)."""
    if answer is None:
        return None
    if len(answer) <= KEY_CACHE_CHARS:  # votes ask again for the same short answers
        return _cached_key(answer, domain)
    return _key(answer, domain)


KEY_CACHE_CHARS = 200
"""Answers up to this long have their `answer_key` kept (the last `KEY_CACHE_SIZE`):
an evaluation replays each vote on every re-execution, asking for the same few answers
hundreds of thousands of times."""
KEY_CACHE_SIZE = 1 << 14


def _key(answer: str, domain: str) -> str | None:
    benchmark = BENCHMARKS.get(domain)
    if benchmark is not None and benchmark.answer_key is not None:
        return benchmark.answer_key(answer)
    number = as_number(answer)
    if number is not None:
        return f"#{number}"
    return normalize_text(answer)


_cached_key = lru_cache(maxsize=KEY_CACHE_SIZE)(_key)

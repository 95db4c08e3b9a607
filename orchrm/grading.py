"""Is an answer correct? Numbers compare as numbers, math as math, text normalized.

Used when a log has no correctness label of its own (`orchrm run`, ingest). `is_correct`
compares plain numbers exactly and other text after SQuAD-style normalization;
`grade(answer, truth, domain)` picks the grader registered for a domain: math domains use
the `math-verify` package for LaTeX, fractions and expressions. Register more graders in
`GRADERS`.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from fractions import Fraction

_BOXED_RE = re.compile(r"\\boxed\{(.*)\}", re.DOTALL)
_FRAC_RE = re.compile(r"^\\d?frac\{(-?\d+)\}\{(-?\d+)\}$")
_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")


def as_number(text: str) -> Fraction | None:
    """The exact value of a plain numeric answer (`204`, `-3.5`, `1,000`, `3/4`,
    `\\frac{3}{4}`, `$25$`, `\\boxed{25}`), or None when it is not one."""
    t = text.strip()
    boxed = _BOXED_RE.search(t)
    if boxed:
        t = boxed.group(1)
    t = t.strip().strip("$").strip().rstrip(".").replace(",", "").replace(" ", "")
    frac = _FRAC_RE.match(t)
    if frac:
        num, den = int(frac.group(1)), int(frac.group(2))
        return Fraction(num, den) if den else None
    try:
        return Fraction(t)
    except (ValueError, ZeroDivisionError):
        return None


def normalize_text(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces (SQuAD-style)."""
    t = "".join(ch for ch in text.lower() if ch not in string.punctuation)
    # Articles go only when words remain: option "A" is an answer, not an article.
    return " ".join(_ARTICLES_RE.sub(" ", t).split()) or " ".join(t.split())


def is_correct(answer: str | None, truth: str | int | float | None) -> bool | None:
    """Whether `answer` matches `truth`: exact numeric equality when both are numbers,
    else normalized text equality. None when there is no ground truth to compare with."""
    if truth is None:
        return None
    if answer is None:
        return False
    a, t = as_number(str(answer)), as_number(str(truth))
    if a is not None and t is not None:
        return a == t
    return normalize_text(str(answer)) == normalize_text(str(truth)) != ""


def math_correct(answer: str | None, truth: str | int | float | None) -> bool | None:
    """Math answers: `is_correct` first (exact numbers, text), then `math-verify` for
    what that cannot see is equal (LaTeX, fractions, expressions)."""
    plain = is_correct(answer, truth)
    if plain is not False or answer is None:
        return plain
    try:
        from math_verify import parse, verify

        gold = parse(f"${truth}$")
        # A reply may hold its answer in prose ("the answer is $5$") or bare ("\\sqrt{8}").
        return any(
            gold and target and verify(gold, target)
            for target in (parse(str(answer)), parse(f"${answer}$"))
        )
    except Exception:  # math-verify raises on inputs it cannot handle: not shown equal
        return False


Grader = Callable[[str | None, str | int | float | None], bool | None]
GRADERS: dict[str, Grader] = {
    "math": math_correct,
    "aime": math_correct,
    "masbench": math_correct,
    "deepscaler": math_correct,
}
"""Domain -> grader; any other domain uses `is_correct`."""


def grade(answer: str | None, truth: str | int | float | None, domain: str = "") -> bool | None:
    """Correctness of `answer` against `truth` with the domain's grader."""
    return GRADERS.get(domain, is_correct)(answer, truth)

"""How an answer compares with the truth: numbers as numbers, math as math, text normalized.

`is_correct` compares plain numbers exactly (`as_number`) and other text after SQuAD-style
normalization (`normalize_text`); `math_correct` adds the `math-verify` package for
LaTeX, fractions and expressions. The benchmarks' own checkers build on these
(`orchrm.tasks.benchmarks`), and `orchrm.tasks.grading` picks one by domain.

Answers are LLM output: every check runs in time linear in the answer's length. Numbers
with an exponent beyond `MAX_EXPONENT` are compared as text, and `math-verify` only sees
answers of at most `MATH_VERIFY_MAX_CHARS` characters.
"""

from __future__ import annotations

import re
import string
from fractions import Fraction

_BOXED = "\\boxed{"
_EXPONENT_RE = re.compile(r"[eE][-+]?([\d_]+)")

MAX_EXPONENT = 4300
"""Largest decimal exponent (`1e4300`) `as_number` reads: building the exact value of
`1e10000000` takes seconds, so larger ones are not read as numbers."""

MATH_VERIFY_MAX_CHARS = 2000
"""Longest answer (and truth) `math_correct` hands to `math-verify`, whose parsing time
grows quickly with the length and nesting of its input; a final answer is far shorter."""
_FRAC_RE = re.compile(r"^\\d?frac\{(-?\d+)\}\{(-?\d+)\}$")
_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")


def as_number(text: str) -> Fraction | None:
    """The exact value of a plain numeric answer (`204`, `-3.5`, `1,000`, `3/4`,
    `\\frac{3}{4}`, `$25$`, `\\boxed{25}`), or None when it is not one."""
    t = text.strip()
    start, end = t.find(_BOXED), t.rfind("}")
    if start >= 0 and end >= start + len(_BOXED):  # from the first \boxed{ to the last }
        t = t[start + len(_BOXED) : end]
    t = t.strip().strip("$").strip().rstrip(".").replace(",", "").replace(" ", "")
    if _huge_exponent(t):
        return None
    frac = _FRAC_RE.match(t)
    try:  # int() refuses more than 4300 digits with ValueError
        if frac:
            num, den = int(frac.group(1)), int(frac.group(2))
            return Fraction(num, den) if den else None
        return Fraction(t)
    except (ValueError, ZeroDivisionError):
        return None


def _huge_exponent(text: str) -> bool:
    """Whether `text` writes a number with an exponent beyond `MAX_EXPONENT` (`1e9999999`)."""
    return any(_exponent_value(m.group(1)) > MAX_EXPONENT for m in _EXPONENT_RE.finditer(text))


def _exponent_value(digits: str) -> int:
    """The size of a written exponent (`1_000`, `0005`), capped just above `MAX_EXPONENT`
    so a long one is never converted."""
    digits = digits.replace("_", "").lstrip("0")
    return int(digits or "0") if len(digits) <= len(str(MAX_EXPONENT)) else MAX_EXPONENT + 1


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
    if as_number(str(answer)) is not None and as_number(str(truth)) is not None:
        return False  # two plain numbers are compared exactly (and fast: no parsing)
    if any(len(t) > MATH_VERIFY_MAX_CHARS or _huge_exponent(t) for t in (str(answer), str(truth))):
        return False
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

"""Is an answer correct? Numbers compare as numbers, math as math, text normalized.

Used when a log has no correctness label of its own (`orchrm run`, ingest). `is_correct`
compares plain numbers exactly and other text after SQuAD-style normalization;
`grade(answer, truth, domain)` picks the grader registered for a domain: math domains use
the `math-verify` package for LaTeX, fractions and expressions. The real benchmarks'
checkers (`orchrm.tasks.loaders` builds their tasks) are here too: HotpotQA exact match (and
F1), BrowseComp-Plus short-answer match, GPQA option letters. Register more graders in
`GRADERS`.

Answers are LLM output: every grader runs in time linear in the answer's length. Numbers
with an exponent beyond `MAX_EXPONENT` are compared as text, and `math-verify` only sees
answers of at most `MATH_VERIFY_MAX_CHARS` characters.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable
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
    return int(digits) if len(digits) <= len(str(MAX_EXPONENT)) else MAX_EXPONENT + 1


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


_YES_NO = ("yes", "no")


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


def browsecomp_correct(answer: str | None, truth: str | int | float | None) -> bool | None:
    """BrowseComp-Plus short answers: `is_correct` (numbers exactly, text normalized), or
    the normalized gold as a whole-word phrase inside a short prediction (at most 3x the
    gold's words + 5: "Frida Kahlo, the painter" for "Frida Kahlo") that offers no
    alternative (no "or" the gold lacks).
    The official benchmark grades with an LLM judge (gpt-4.1); this rule is offline and
    stricter on paraphrases, so its accuracy is a lower bound of the judge's."""
    plain = is_correct(answer, truth)
    if plain is not False or answer is None:
        return plain
    pred, gold = normalize_text(str(answer)).split(), normalize_text(str(truth)).split()
    if not gold or len(pred) > 3 * len(gold) + 5:
        return False
    if "or" in pred and "or" not in gold:
        return False
    n = len(gold)
    return any(pred[i : i + n] == gold for i in range(len(pred) - n + 1))


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


Grader = Callable[[str | None, str | int | float | None], bool | None]
GRADERS: dict[str, Grader] = {
    "math": math_correct,
    "aime": math_correct,
    "masbench": math_correct,
    "deepscaler": math_correct,
    "hotpotqa": hotpotqa_correct,
    "browsecomp-plus": browsecomp_correct,
    "gpqa": gpqa_correct,
}
"""Domain -> grader; any other domain uses `is_correct`."""


def grade(answer: str | None, truth: str | int | float | None, domain: str = "") -> bool | None:
    """Correctness of `answer` against `truth` with the domain's grader."""
    return GRADERS.get(domain, is_correct)(answer, truth)


def answer_key(answer: str | None, domain: str = "") -> str | None:
    """What votes count as the same answer: the chosen letter for multiple choice
    (`gpqa`), the exact value when the answer is a number, else the normalized text.
    None for no answer (or a multiple-choice reply that names no single letter)."""
    if answer is None:
        return None
    if domain == "gpqa":
        return gpqa_letter(answer)
    number = as_number(answer)
    if number is not None:
        return f"#{number}"
    return normalize_text(answer)

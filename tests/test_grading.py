"""orchrm.tasks.answers and orchrm.tasks.grading: numeric answers compare as numbers, text
answers after normalization."""

from __future__ import annotations

import pytest

from orchrm.tasks.answers import is_correct
from orchrm.tasks.grading import grade


@pytest.mark.parametrize(
    ("answer", "truth", "expected"),
    [
        ("204", 204, True),
        ("$204$", "204", True),
        ("\\boxed{204}", "204", True),
        ("204.0", "204", True),
        ("1,000", "1000", True),
        ("\\frac{3}{4}", "0.75", True),
        ("3/4", "\\dfrac{3}{4}", True),
        ("205", "204", False),
        ("The Eiffel Tower", "eiffel tower", True),
        ("Eiffel Tower.", "the Eiffel tower", True),
        ("Louvre", "Eiffel Tower", False),
        ("A", "A", True),
        ("(a)", "A", True),
        ("B", "A", False),
        (None, "204", False),
        ("anything", None, None),
        ("", "", False),
    ],
)
def test_is_correct(answer, truth, expected):
    assert is_correct(answer, truth) is expected


@pytest.mark.parametrize(
    ("answer", "truth", "expected"),
    [
        ("0.75", "\\frac{3}{4}", True),
        ("\\frac{6}{8}", "\\dfrac{3}{4}", True),
        ("The answer is $\\boxed{2\\sqrt{2}}$", "2\\sqrt{2}", True),
        ("\\sqrt{8}", "2\\sqrt{2}", True),
        ("\\sqrt{9}", "2\\sqrt{2}", False),
        ("x+1", "1+x", True),
    ],
)
def test_math_domain_uses_math_verify(answer, truth, expected):
    assert grade(answer, truth, "math") is expected


def test_text_domains_use_normalized_match():
    assert grade("The Louvre", "louvre", "hotpotqa") is True
    assert grade("\\sqrt{8}", "2\\sqrt{2}", "hotpotqa") is False

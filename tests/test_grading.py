"""orchrm.grading: numeric answers compare as numbers, text answers after normalization."""

from __future__ import annotations

import pytest

from orchrm.grading import is_correct


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

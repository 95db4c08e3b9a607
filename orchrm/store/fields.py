"""Typed reads of untrusted record fields: what reaches the store has its column's type.

Each reader takes a record's raw JSON value and returns it checked, or raises
`FieldError` naming the field, the type expected and what was found. An absent field
(`None`, JSON `null`) reads as None unless the field is required. The rules:

- text: a JSON string. Fields that hold an answer or an id (`text(..., numbers=True)`)
  also take a number, read as its decimal text.
- integers: a JSON integer, a float with an integral value (`3.0`), or a string of
  decimal digits (`"60"`: the MAS-Orchestra pages write `step` so), within the column's
  range: `0 <= n <= INT32_MAX` for steps and sample indices, `0 <= n <= INT64_MAX` for
  token counts. `1e30`, `2.5`, `"12 tokens"` and booleans are refused.
- booleans: `true`/`false`, or the integers 0 and 1. `"yes"` is refused.
- floats: a finite JSON number, optionally within bounds (probabilities in [0, 1]).
  `"abc"`, `NaN` and `Infinity` are refused.
"""

from __future__ import annotations

import math

from orchrm.errors import OrchrmError

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
_MAX_DIGITS = 19  # INT64_MAX has 19 digits: a longer digit string cannot fit


class FieldError(OrchrmError, ValueError):
    """A record field of the wrong type or out of range; `reason` is `bad_field`, or
    `missing_field` for a required field that is absent."""

    def __init__(self, name: str, expected: str, value: object, reason: str = "bad_field"):
        self.name = name
        self.reason = reason
        super().__init__(f"{name}: expected {expected}, found {describe(value)}")


def describe(value: object) -> str:
    """A short, printable description of a JSON value: its type and a bounded preview."""
    if value is None:
        return "nothing"
    kind = {bool: "boolean", int: "integer", float: "number", str: "text"}.get(type(value))
    if kind is None:
        return {dict: "an object", list: "an array"}.get(type(value), type(value).__name__)
    if isinstance(value, bool):
        shown = str(value).lower()
    else:  # a long text is cut before repr copies it
        shown = repr(value[:41] if isinstance(value, str) else value)
    shown = shown.encode("utf-8", "backslashreplace").decode("utf-8")
    return f"{kind} {shown if len(shown) <= 40 else shown[:37] + '...'}"


def text(value: object, name: str, *, required: bool = False, numbers: bool = False) -> str | None:
    """A text field (see the module rules)."""
    if value is None:
        if required:
            raise FieldError(name, "text", value, "missing_field")
        return None
    if isinstance(value, str):
        return value
    finite = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))
    if numbers and finite and not isinstance(value, bool):
        return str(value)
    raise FieldError(name, "text or a number" if numbers else "text", value)


def integer(value: object, name: str, *, high: int = INT32_MAX) -> int | None:
    """A non-negative integer field no larger than `high` (see the module rules)."""
    if value is None:
        return None
    expected = f"an integer from 0 to {high}"
    number: int | None = None
    if isinstance(value, bool):
        raise FieldError(name, expected, value)
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    elif isinstance(value, str):
        digits = value.strip()
        if 0 < len(digits) <= _MAX_DIGITS and digits.isascii() and digits.isdigit():
            number = int(digits)
    if number is None or not 0 <= number <= high:
        raise FieldError(name, expected, value)
    return number


def boolean(value: object, name: str) -> bool | None:
    """A boolean field: true/false, or 0/1."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise FieldError(name, "true or false", value)


def number(
    value: object, name: str, *, low: float = -math.inf, high: float = math.inf
) -> float | None:
    """A finite float field within [`low`, `high`]."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        as_float = float(value) if abs(value) < 2**1023 else math.inf  # huge ints overflow
        if math.isfinite(as_float) and low <= as_float <= high:
            return as_float
    bounds = "" if (low, high) == (-math.inf, math.inf) else f" from {low} to {high}"
    raise FieldError(name, f"a finite number{bounds}", value)


def mapping(value: object, name: str) -> dict:
    """An optional object field: the object, or `{}` when absent."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    raise FieldError(name, "an object", value)

"""Plain-text tables that fit a terminal of a given width (what `orchrm eval`, `demo`,
`cross-validate` and `rl` print; the report files keep their Markdown).

A table is a list of `Column`s, each with a rank: rank 0 columns are always shown, the
others are added in rank order (lower first) while the table still fits, so a narrow
low-value column can stay where a wide one is left out. A footnote names the columns
left out. Cells are never cut: a header wraps onto more lines at its words, and only when
the rank-0 columns alone are wider than the terminal does the first column (the names)
wrap too, at its hyphens and spaces (whole names stay readable across its lines).
"""

from __future__ import annotations

import shutil
import textwrap
from dataclasses import dataclass

GAP = "  "
"""Between two columns."""
NARROWEST_NAMES = 8
"""The first column is never wrapped narrower than this (a narrower terminal gets lines
longer than its width rather than names cut into shards)."""


@dataclass(frozen=True)
class Column:
    """One column of a terminal table."""

    header: str
    cells: tuple[str, ...]
    rank: int = 0
    """0: always shown; higher ranks are added later and so are left out first."""
    right: bool = False
    """Right-aligned (numbers)."""

    @property
    def width(self) -> int:
        """Its widest cell or its longest header word (headers wrap at words)."""
        words = self.header.split() or [""]
        return max(max(map(len, words)), *(len(c) for c in self.cells), 1)


def terminal_width(width: int | None = None) -> int:
    """`width`, or the terminal's columns (80 when it cannot be told)."""
    return width if width else shutil.get_terminal_size((80, 24)).columns


def _span(columns: list[Column]) -> int:
    return sum(c.width for c in columns) + len(GAP) * (len(columns) - 1)


def fit(columns: list[Column], width: int) -> tuple[list[Column], list[Column]]:
    """(shown, left out): the rank-0 columns, then each other one by rank while it fits;
    shown columns keep their order in `columns`."""
    shown = [c for c in columns if c.rank == 0]
    left_out = []
    for c in sorted((c for c in columns if c.rank > 0), key=lambda c: c.rank):
        if _span([*shown, c]) <= width:
            shown.append(c)
        else:
            left_out.append(c)
    order = {id(c): i for i, c in enumerate(columns)}
    return sorted(shown, key=lambda c: order[id(c)]), left_out


def _wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, break_on_hyphens=True) or [""]


def render(
    columns: list[Column], width: int | None = None, *, title: str = "", notes: tuple = ()
) -> str:
    """The title, the table and its footnotes, every line at most `width` columns (the
    terminal's by default; see `NARROWEST_NAMES` for the one exception)."""
    width = terminal_width(width)
    shown, left_out = fit(columns, width)
    widths = [c.width for c in shown]
    spare = width - _span(shown)
    if spare < 0:  # only the rank-0 columns are left: wrap the names
        widths[0] = max(NARROWEST_NAMES, widths[0] + spare)
    lines = [*_wrap(title, width), ""] if title else []
    headers = [_wrap(c.header, w) for c, w in zip(shown, widths, strict=True)]
    lines += _block(headers, widths, [c.right for c in shown])
    lines.append(GAP.join("-" * w for w in widths))
    for row in zip(*(c.cells for c in shown), strict=True):
        cells = [_wrap(row[0], widths[0]) if len(row[0]) > widths[0] else [row[0]]]
        cells += [[cell] for cell in row[1:]]
        lines += _block(cells, widths, [c.right for c in shown])
    if left_out:
        names = ", ".join(c.header for c in left_out)
        notes = (f"not shown at {width} columns: {names}", *notes)
    for note in notes:
        lines += _wrap(note, width)
    return "\n".join(lines) + "\n"


def _block(cells: list[list[str]], widths: list[int], right: list[bool]) -> list[str]:
    """One table row whose cells may take several lines each."""
    height = max(map(len, cells))
    out = []
    for i in range(height):
        parts = []
        for lines, w, r in zip(cells, widths, right, strict=True):
            text = lines[i] if i < len(lines) else ""
            parts.append(text.rjust(w) if r else text.ljust(w))
        out.append(GAP.join(parts).rstrip())
    return out

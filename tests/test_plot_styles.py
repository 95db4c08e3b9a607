"""The report's plots keep every selector distinguishable: a colour far from every other
one and a marker of its own, and no point drawn on top of another's, at N=1 (where every
selector picks the one candidate) or where two selectors cost and score alike."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb

from orchrm.evaluation.metrics import evaluate_selectors
from orchrm.evaluation.plots import figures, spread_apart, styles
from orchrm.selection.registry import REGISTRY
from orchrm.selection.selectors import Selection, majority_selector, oracle_selector
from tests.test_report import _world_tasks

MIN_DELTA_E = 25
"""Least CIELAB distance (ΔE 1976) between two registry colours: at about 2.3 two
colours just differ side by side; 25 tells them apart as separate markers."""
MIN_PX = 8
"""Least distance between two markers' centres in a saved plot (markers are 10 px)."""


def lab(colour: str) -> np.ndarray:
    rgb = np.array(to_rgb(colour))
    rgb = np.where(rgb > 0.04045, ((rgb + 0.055) / 1.055) ** 2.4, rgb / 12.92)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
    xyz = xyz @ rgb / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def test_every_registered_selector_has_its_own_colour_and_marker():
    look = styles(e.name for e in REGISTRY)
    assert len({s.marker for s in look.values()}) == len(REGISTRY)  # a marker each
    assert len({(s.colour, s.marker) for s in look.values()}) == len(REGISTRY)
    close = [
        (a, b, round(float(np.linalg.norm(lab(look[a].colour) - lab(look[b].colour)))))
        for a, b in itertools.combinations(look, 2)
        if np.linalg.norm(lab(look[a].colour) - lab(look[b].colour)) < MIN_DELTA_E
    ]
    assert not close, f"colours too close (ΔE): {close}"


def _alike(k: int, name: str):
    """A selector that picks as majority or the oracle does (so many share every point),
    the reward-model ones paying 100 verification tokens."""
    base = majority_selector if k % 2 else oracle_selector
    paid = 100 if name.startswith("orchrm") else 0

    def choose(task):
        s = base(task)
        return Selection(s.index, verification_tokens=paid, executed=s.executed)

    return choose


@pytest.fixture(scope="module")
def crowded():
    selectors = {e.name: _alike(k, e.name) for k, e in enumerate(REGISTRY[:13])}
    return evaluate_selectors(_world_tasks(12), selectors, [1, 2, 4, 8], draws=1, bootstrap=20)


def _centres(fig) -> list[tuple[str, float, float]]:
    """(series, x px, y px) of every marker of every errorbar series, as saved."""
    fig.set_dpi(120)
    FigureCanvasAgg(fig).draw()
    out = []
    for ax in fig.axes:
        for container in ax.containers:
            line = container.lines[0]
            xy = np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float)
            for x, y in ax.transData.transform(xy):
                out.append((container.get_label(), float(x), float(y)))
    return out


def test_no_marker_is_drawn_on_another_selectors(crowded):
    for name, fig in figures(crowded).items():
        centres = _centres(fig)
        assert len({c[0] for c in centres}) == 13, name
        on_top = [
            (a[0], b[0], round(math.dist(a[1:], b[1:]), 1))
            for a, b in itertools.combinations(centres, 2)
            if a[0] != b[0] and math.dist(a[1:], b[1:]) < MIN_PX
        ]
        assert not on_top, f"{name}: markers on top of each other: {on_top[:5]}"


def test_points_that_would_coincide_are_spread_and_the_others_kept():
    assert spread_apart([(100, 50.0)]) == [100]
    far = [(100, 50.0), (10_000, 50.0), (100, 90.0)]
    assert spread_apart(far) == pytest.approx([100, 10_000, 100])
    same = spread_apart([(1000, 60.0), (1000, 60.0), (1010, 60.2), (50, 10.0)])
    assert same[3] == pytest.approx(50)
    spread = sorted(math.log10(x) for x in same[:3])
    assert min(b - a for a, b in itertools.pairwise(spread)) > 0.02
    assert abs(sum(spread) / 3 - math.log10(1003.3)) < 0.01  # around the group's centre

"""The plots of an evaluation report, one look per selector across all of them: accuracy
against N, against verification tokens, against total tokens (with the Pareto frontier),
and the reliability diagram of the Orch-RM model's calibrated P(correct)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from orchrm.evaluation.metrics import Evaluation
from orchrm.evaluation.reliability import CalibrationReport
from orchrm.selection.registry import REGISTRY, label


@dataclass(frozen=True)
class Style:
    """How a selector looks in every plot of a report."""

    colour: str
    marker: str


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">", "p", "H", "d", "8", "+", "x")
"""Markers by registry position (`orchrm.selection.registry.REGISTRY`), one each, so two
selectors of similar colours still differ in shape; unregistered selectors after them."""
OTHER_COLOURS = ("#aec7e8", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5", "#8c564b")
"""Colours of selectors the registry does not know, in the order of their sorted names."""
DODGE_OCTAVES = 0.06
"""How far apart, along the log2 N axis, the selectors' points at one N are drawn (at
most; a line-up of more than 13 selectors shares 0.72 octave): at N=1 every selector
picks the one candidate, and their points would otherwise sit on one another."""
SPREAD = 0.025
"""Points of a tokens axis closer than this share of the axis (in both directions) are
spread apart along it by this share each: a marker then shows beside the one it would
hide. Their values, and the Pareto frontier, stay the true ones."""


def styles(names) -> dict[str, Style]:
    """One fixed colour and marker per selector name, in legend order: the registered
    ones in registry order, each with its registry colour and the marker of its registry
    position (so it looks the same in every report), then the others sorted, with
    `OTHER_COLOURS` and the markers after the registry's."""
    names = set(names)
    out = {}
    for i, entry in enumerate(REGISTRY):
        if entry.name in names:
            out[entry.name] = Style(entry.colour, MARKERS[i % len(MARKERS)])
    for j, name in enumerate(sorted(names - out.keys())):
        marker = MARKERS[(len(REGISTRY) + j) % len(MARKERS)]
        out[name] = Style(OTHER_COLOURS[j % len(OTHER_COLOURS)], marker)
    return out


def _shown(r, expected: bool) -> tuple[float, tuple[float, float], bool]:
    """(accuracy %, its 95% interval in %, sampled) of one result: its expected accuracy
    when the evaluation has one and this result too, else its sampled accuracy."""
    if expected and r.expected_accuracy is not None:
        value, ci, sampled = r.expected_accuracy, r.expected_accuracy_ci, False
    else:
        value, ci, sampled = r.accuracy, r.accuracy_ci, True
    return 100 * value, (100 * ci[0], 100 * ci[1]), sampled


def _errorbar(ax, xs, shown, name: str, style: Style, expected: bool, line: bool):
    """One selector's points with their intervals; a selector shown with its sampled
    accuracy in a plot of expected accuracy gets an open marker and "(sampled)"."""
    ys = [y for y, _, _ in shown]
    low = [max(0.0, y - lo) for y, (lo, _), _ in shown]
    high = [max(0.0, hi - y) for y, (_, hi), _ in shown]
    sampled = expected and any(s for _, _, s in shown)
    return ax.errorbar(
        xs,
        ys,
        yerr=[low, high],
        label=label(name) + (" (sampled)" if sampled else ""),
        color=style.colour,
        marker=style.marker,
        markerfacecolor="white" if sampled else style.colour,
        linestyle=("--" if sampled else "-") if line else "none",
        capsize=3,
        markersize=6,
        linewidth=1.2,
    )


def _y_label(expected: bool) -> str:
    return "expected accuracy % (95% CI)" if expected else "accuracy % (95% CI)"


def _accuracy_vs_n(ev: Evaluation, look: dict[str, Style], expected: bool):
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullLocator

    fig = Figure(figsize=(8.5, 4.5), layout="constrained")
    ax = fig.subplots()
    names = [s for s in look if any(r.selector == s for r in ev.results)]
    ns = sorted({r.n for r in ev.results})
    step = min(DODGE_OCTAVES, 0.72 / max(1, len(names) - 1))
    for i, name in enumerate(names):
        rows = sorted((r for r in ev.results if r.selector == name), key=lambda r: r.n)
        # dodge each selector along the (log) N axis so points and intervals do not overlap
        shift = 2 ** (step * (i - (len(names) - 1) / 2))
        use = expected and all(r.expected_accuracy is not None for r in rows)
        shown = [_shown(r, use) for r in rows]
        _errorbar(ax, [r.n * shift for r in rows], shown, name, look[name], expected, True)
    ax.set_xscale("log", base=2)
    if ns:  # an evaluation without tasks has no N
        ax.set_xticks(ns, labels=[str(n) for n in ns])
        margin = 2 ** (step * (len(names) - 1) / 2 + 0.2)
        ax.set_xlim(min(ns) / margin, max(ns) * margin)
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set(xlabel="N (candidates)", ylabel=_y_label(expected))
    ax.set_title(f"{ev.domain or 'all'}: accuracy vs N on {ev.tasks} tasks")
    if names:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def _accuracy_vs_tokens(ev: Evaluation, look: dict[str, Style], expected: bool):
    """A broken tokens axis: selectors that read nothing side by side in a narrow "0
    tokens" panel on the left, the others on a log axis on the right (a log axis has no
    0, and drawing them at 1 would claim a token they did not spend)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, NullFormatter

    results = ev.at(ev.n)
    names = [s for s in look if s in results]
    zero = [s for s in names if results[s].verification_tokens <= 0]
    paid = [s for s in names if results[s].verification_tokens > 0]
    panels = [p for p in (zero, paid) if p] or [[]]
    drawn = {}
    fig = Figure(figsize=(8.5, 4.5), layout="constrained")
    ratios = [1 + len(zero) / 4, 4] if len(panels) == 2 else [1]
    axes = fig.subplots(1, len(panels), sharey=True, gridspec_kw={"width_ratios": ratios})
    axes = list(axes) if len(panels) == 2 else [axes]
    if zero:
        ax = axes[0]
        for i, name in enumerate(zero):
            shown = [_shown(results[name], expected)]
            drawn[name] = _errorbar(ax, [i], shown, name, look[name], expected, False)
        ax.set_xlim(-0.7, len(zero) - 0.3)
        ax.set_xticks([(len(zero) - 1) / 2], labels=["0 tokens"])
    if paid:
        ax = axes[-1]
        at = spread_apart(
            [(results[s].verification_tokens, _shown(results[s], expected)[0]) for s in paid]
        )
        for name, x in zip(paid, at, strict=True):
            r = results[name]
            drawn[name] = _errorbar(
                ax,
                [x],
                [_shown(r, expected)],
                name,
                look[name],
                expected,
                False,
            )
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        low, high = (f([results[s].verification_tokens for s in paid]) for f in (min, max))
        ax.set_xlim(low / 2, high * 2)
    if len(panels) == 2:  # the break between the two axes
        axes[0].spines["right"].set_linestyle((0, (2, 3)))
        axes[1].spines["left"].set_visible(False)
        axes[1].tick_params(axis="y", left=False, labelleft=False)
    axes[0].set_ylabel(_y_label(expected))
    fig.supxlabel("verification tokens per task (log scale; 0 on the left)", fontsize=10)
    fig.suptitle(f"{ev.domain or 'all'}: accuracy vs verification cost, N={ev.n}")
    handles = [drawn[s] for s in names]  # legend in registry order, as in accuracy vs N
    if handles:
        labels = [h.get_label() for h in handles]
        fig.legend(handles, labels, fontsize=7, loc="outside right upper")
    return fig


def spread_apart(points: Sequence[tuple[float, float]]) -> list[float]:
    """Where to draw each (tokens, accuracy %) point along a log tokens axis: its own
    tokens, but points that would cover one another (closer than `SPREAD` of the axis in
    log tokens and of the accuracies' range) spread side by side, `SPREAD` apart, around
    their group's centre."""
    if len(points) < 2:
        return [x for x, _ in points]
    logs = [math.log10(x) for x, _ in points]
    ys = [y for _, y in points]
    width = max(max(logs) - min(logs), 1.0) * SPREAD
    height = max(max(ys) - min(ys), 10.0) * SPREAD
    groups: list[list[int]] = []
    for i in sorted(range(len(points)), key=lambda i: (logs[i], ys[i])):
        near = next(
            (
                g
                for g in groups
                if any(abs(logs[j] - logs[i]) < width and abs(ys[j] - ys[i]) < height for j in g)
            ),
            None,
        )
        if near is None:
            groups.append([i])
        else:
            near.append(i)
    out = [float(x) for x, _ in points]
    for g in (g for g in groups if len(g) > 1):
        centre = sum(logs[i] for i in g) / len(g)
        for k, i in enumerate(g):
            out[i] = 10 ** (centre + width * (k - (len(g) - 1) / 2))
    return out


def pareto_frontier(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the non-dominated (cost, value) points, cheapest first. A point is
    dominated when another costs no more and is worth at least as much, and is strictly
    better in one of the two; equal points dominate neither and are all kept."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1]))
    frontier: list[int] = []
    best = -math.inf  # the highest value at a lower (or equal) cost so far
    for i in order:
        if points[i][1] > best or (frontier and points[frontier[-1]] == points[i]):
            frontier.append(i)
            best = max(best, points[i][1])
    return frontier


def log_ticks(low: float, high: float) -> list[float]:
    """Round values in [low, high] for a log axis labelled in plain numbers: 1, 2 and 5
    x 10^k, or every 1..9 x 10^k where those give fewer than three."""
    decades = range(math.floor(math.log10(low)), math.floor(math.log10(high)) + 1)
    ticks: list[float] = []
    for steps in ((1, 2, 5), range(1, 10)):
        ticks = [m * 10.0**k for k in decades for m in steps if low <= m * 10.0**k <= high]
        if len(ticks) >= 3:
            break
    return ticks


GROUND_TRUTH = frozenset({"oracle", "bayes"})
"""Selectors that read the ground truth (correctness, true success probabilities): drawn
in the Pareto plot as references, never on its frontier, which no real selector reaches."""


def _pareto(ev: Evaluation, look: dict[str, Style], expected: bool):
    """Accuracy at the full N against total tokens per task, on a log axis, with the
    frontier of the non-dominated selectors but `GROUND_TRUTH`; in a plot of expected
    accuracy the frontier joins only the selectors that have one (a sampled accuracy is
    noisier, not comparable)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    results = ev.at(ev.n)
    names = [s for s in look if s in results and results[s].total_tokens > 0]
    fig = Figure(figsize=(8.5, 4.5), layout="constrained")
    ax = fig.subplots()
    shown = {s: _shown(results[s], expected) for s in names}
    at = spread_apart([(results[s].total_tokens, shown[s][0]) for s in names])
    for name, x in zip(names, at, strict=True):
        _errorbar(ax, [x], [shown[name]], name, look[name], expected, False)
    real = [s for s in names if s not in GROUND_TRUTH]
    comparable = [s for s in real if not (expected and shown[s][2])]
    points = [(results[s].total_tokens, shown[s][0]) for s in comparable]
    front = [comparable[i] for i in pareto_frontier(points)]
    if front:
        without = [label(s) for s in names if s not in comparable]
        ax.plot(
            [results[s].total_tokens for s in front],
            [shown[s][0] for s in front],
            color="#444444",
            linestyle="--",
            linewidth=1.5,
            zorder=0,
            label="Pareto frontier" + (f"\n(without {', '.join(without)})" if without else ""),
        )
    if names:
        low, high = (f(results[s].total_tokens for s in names) for f in (min, max))
        ax.set_xscale("log")
        ax.set_xlim(low / 2, high * 2)
        ax.xaxis.set_major_locator(FixedLocator(log_ticks(low / 2, high * 2)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))
        ax.xaxis.set_minor_locator(NullLocator())
        fig.legend(fontsize=7, loc="outside right upper")
    unplotted = [label(s) for s in look if s in results and s not in names]
    xlabel = "total tokens per task: orchestrator + verification + execution (log scale)"
    if unplotted:  # a log axis has no 0
        xlabel += f"\nnot drawn (0 total tokens): {', '.join(unplotted)}"
    ax.set(xlabel=xlabel, ylabel=_y_label(expected))
    ax.set_title(f"{ev.domain or 'all'}: accuracy vs total cost, N={ev.n}, {ev.tasks} tasks")
    return fig


def _wilson(successes: float, count: int) -> tuple[float, float]:
    """95% Wilson interval of a share."""
    z, share = 1.96, successes / count
    centre = (share + z * z / (2 * count)) / (1 + z * z / count)
    half = z * math.sqrt(share * (1 - share) / count + z * z / (4 * count * count))
    return centre - half / (1 + z * z / count), centre + half / (1 + z * z / count)


def _reliability_curves(ax, report: CalibrationReport, colour: str) -> None:
    """The diagonal, sigmoid(raw score) in grey, and the calibrated bins with their 95%
    Wilson intervals and (world logs) their mean true success probability."""
    ax.plot(
        [0, 1], [0, 1], color="#aaaaaa", linestyle="--", linewidth=1, label="perfect calibration"
    )
    raw, bins = report.raw_bins, report.bins
    ax.plot(
        [b.confidence for b in raw],
        [b.accuracy for b in raw],
        color="#7f7f7f",
        marker="s",
        markersize=4,
        linewidth=1,
        label="sigmoid(raw score): right executions",
    )
    ys = [b.accuracy for b in bins]
    ci = [_wilson(b.accuracy * b.count, b.count) for b in bins]
    ax.errorbar(
        [b.confidence for b in bins],
        ys,
        yerr=[
            [max(0.0, y - lo) for y, (lo, _) in zip(ys, ci, strict=True)],
            [max(0.0, hi - y) for y, (_, hi) in zip(ys, ci, strict=True)],
        ],
        color=colour,
        marker="o",
        capsize=3,
        label=f"orchrm ({report.method}): right executions, 95% CI",
    )
    if all(b.p_success is not None for b in bins):
        ax.plot(
            [b.confidence for b in bins],
            [b.p_success for b in bins],
            color=colour,
            marker="D",
            markerfacecolor="white",
            linestyle=":",
            label=f"orchrm ({report.method}): mean true P(success)",
        )


def _reliability(ev: Evaluation, colour: str):
    """The reliability diagram of `ev.calibration`: per bin, the mean calibrated P(correct)
    against the share of right executions and, on world logs, the mean true success
    probability; sigmoid(raw score) in grey; candidates per bin below."""
    from matplotlib.figure import Figure

    report = ev.calibration
    fig = Figure(figsize=(8.5, 5.5), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    _reliability_curves(top, report, colour)
    for members, tint, shift in (
        (report.raw_bins, "#7f7f7f", -0.012),
        (report.bins, colour, 0.012),
    ):
        centres = [(b.low + b.high) / 2 + shift for b in members]
        bottom.bar(centres, [b.count for b in members], width=0.024, color=tint)
    top.set(xlim=(0, 1), ylim=(0, 1), ylabel="share of right executions")
    top.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    bottom.set(xlabel="predicted P(correct) (bin mean)", ylabel="candidates")
    title = (
        f"{ev.domain or 'all'}: orchrm's P(correct) on {report.candidates} held-out "
        f"candidates\nECE {report.ece:.3f} calibrated, {report.ece_raw:.3f} raw sigmoid"
    )
    if report.ece_true is not None and report.ece_raw_true is not None:
        title += f"; against true P(success): {report.ece_true:.3f}, {report.ece_raw_true:.3f}"
    fig.suptitle(title, fontsize=10)
    return fig


def figures(ev: Evaluation, look: dict[str, Style] | None = None) -> dict[str, object]:
    """The plots of a domain as matplotlib figures, by file name: accuracy against N,
    against verification tokens and against total tokens (with the Pareto frontier) at
    the full N, and the reliability diagram when the evaluation has a calibration. The
    accuracy plots show expected accuracy when the evaluation has it (a selector without
    one: its sampled accuracy, marked), with 95% intervals, in each selector's `styles`
    colour and marker."""
    look = look or styles(r.selector for r in ev.results)
    expected = any(r.expected_accuracy is not None for r in ev.results)
    stem = ev.domain or "all"
    out = {
        f"{stem}_accuracy_vs_n.png": _accuracy_vs_n(ev, look, expected),
        f"{stem}_accuracy_vs_tokens.png": _accuracy_vs_tokens(ev, look, expected),
        f"{stem}_pareto.png": _pareto(ev, look, expected),
    }
    if ev.calibration is not None:
        orchrm = look.get("orchrm") or styles(["orchrm"])["orchrm"]
        out[f"{stem}_reliability.png"] = _reliability(ev, orchrm.colour)
    return out


def plots(ev: Evaluation, out: Path, look: dict[str, Style] | None = None) -> list[Path]:
    """`figures` as PNGs into OUT (matplotlib's Agg renderer; no display needed)."""
    written = []
    for name, fig in figures(ev, look).items():
        fig.savefig(out / name, dpi=120)
        written.append(out / name)
    return written

"""The evaluation report: a Markdown table per domain, PNG plots, a JSON of every number,
and the same tables as plain text that fits a terminal."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from orchrm.bestofn.metrics import Evaluation
from orchrm.bestofn.registry import REGISTRY, label
from orchrm.terminal import Column, render


def _replayed() -> str:
    """The selectors replayed on re-executions, as a phrase: "a, b and c"."""
    names = [e.label for e in REGISTRY if e.replays_reruns]
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)


DEFINITION = (
    "Normalized advantage = (accuracy - random) / (oracle - random), with random the mean "
    "correctness of the N candidates and oracle pass@N (our definition). Intervals: 95% "
    "bootstrap over tasks. Verification tokens: what a selector reads and writes to choose "
    "(reward model: its input tokens; judges: prompt + completion; votes: the N - 1 extra "
    "executions). Total: verification + the execution that gives the answer. Tokens are "
    "means per task. Expected accuracy (world logs only; far less noisy than the sampled "
    "accuracy): for a selector that executes one candidate, that candidate's true success "
    f"probability; for {_replayed()}, their accuracy averaged over "
    "K re-executions of the same N plans on the world (oracle: expected pass@N); '-' where "
    "neither is known (the trajectory judge, or no re-executions). '... - majority': a "
    "selector's accuracy (expected, where the table has it) minus majority's, in points, "
    "with a paired 95% bootstrap interval (both resampled on the same tasks, which is why "
    "it can exclude 0 while the two accuracy intervals overlap). Rows: best first, by "
    "expected accuracy where the table has it."
)


def points(value: float, ci: tuple[float, float]) -> str:
    """A difference of two shares in signed points, with its interval, e.g. `+5.0 (+1.0
    to +9.0)`."""
    return f"{100 * value:+.1f} ({100 * ci[0]:+.1f} to {100 * ci[1]:+.1f})"


def _versus(r, ev: Evaluation, expected: bool) -> str:
    """The cell of `r` in the '- baseline' column."""
    if r.selector == ev.baseline:
        return "(baseline)"
    value, ci = (
        (r.expected_vs_baseline, r.expected_vs_baseline_ci)
        if expected
        else (r.vs_baseline, r.vs_baseline_ci)
    )
    if value is None:
        return "-"
    return points(value, ci)


def _best_first(results: list) -> list:
    """Best first, by the less noisy column where there is one; rows without it follow."""
    expected = any(r.expected_accuracy is not None for r in results)
    return sorted(
        results,
        key=lambda r: (
            (r.expected_accuracy is None, -(r.expected_accuracy or 0.0), -r.accuracy)
            if expected
            else (-r.accuracy,)
        ),
    )


def markdown(ev: Evaluation, n: int | None = None) -> str:
    """The table of one domain at N (default: the full N)."""
    n = n or ev.n
    results = _best_first(list(ev.at(n).values()))
    expected = any(r.expected_accuracy is not None for r in results)
    versus = any(r.selector == ev.baseline for r in results)
    lines = [
        f"### {ev.domain or 'all'}: best-of-{n} on {ev.tasks} held-out tasks",
        "",
        "| selector | accuracy % (95% CI) | "
        + ("expected accuracy % (95% CI) | " if expected else "")
        + (
            f"{'expected' if expected else 'accuracy'} - {ev.baseline}, points (paired 95% CI) | "
            if versus
            else ""
        )
        + "normalized advantage (95% CI) | verification tokens | total tokens |",
        "| --- | --- | "
        + ("--- | " if expected else "")
        + ("--- | " if versus else "")
        + "--- | ---: | ---: |",
    ]
    for r in results:
        lo, hi = r.accuracy_ci
        alo, ahi = r.normalized_advantage_ci
        p = ""
        if expected:
            p = "- | "
            if r.expected_accuracy is not None:
                plo, phi = r.expected_accuracy_ci
                p = f"{100 * r.expected_accuracy:.1f} ({100 * plo:.1f}-{100 * phi:.1f}) | "
        if versus:
            p += _versus(r, ev, expected) + " | "
        lines.append(
            f"| {label(r.selector)} | {100 * r.accuracy:.1f} ({100 * lo:.1f}-{100 * hi:.1f}) | {p}"
            f"{r.normalized_advantage:.2f} ({alo:.2f}-{ahi:.2f}) | {r.verification_tokens:,.0f} "
            f"| {r.total_tokens:,.0f} |"
        )
    for key, value in ev.notes.items():
        lines.append(f"\n{key}: {value}")
    return "\n".join(lines) + "\n"


def _pct(value: float, ci: tuple[float, float]) -> str:
    return f"{100 * value:.1f} ({100 * ci[0]:.1f}-{100 * ci[1]:.1f})"


def _expected_cell(r) -> str:
    if r.expected_accuracy is None:
        return _pct(r.accuracy, r.accuracy_ci) + "*"
    return _pct(r.expected_accuracy, r.expected_accuracy_ci)


def _advantage_cell(r) -> str:
    lo, hi = r.normalized_advantage_ci
    return f"{r.normalized_advantage:.2f} ({lo:.2f}-{hi:.2f})"


def terminal_table(ev: Evaluation, width: int | None = None, n: int | None = None) -> str:
    """`markdown`'s table of one domain at N (default: the full N) as plain text for a
    terminal of `width` columns (default: the terminal's). Selector names are never cut.
    The selector and the main accuracy are always shown: expected where the evaluation
    has it (a selector without one shows its sampled accuracy there, marked *); the
    other columns join by value while they fit (`orchrm.terminal.fit`): the gap to
    the baseline, verification tokens, the sampled accuracy, normalized advantage, total
    tokens; a footnote names those left out (report.md has them all)."""
    n = n or ev.n
    rows = _best_first(list(ev.at(n).values()))
    expected = any(r.expected_accuracy is not None for r in rows)
    cells = lambda f: tuple(f(r) for r in rows)  # noqa: E731
    columns = [Column("selector", cells(lambda r: label(r.selector)))]
    if expected:
        columns.append(Column("expected %", cells(_expected_cell)))
    accuracy = cells(lambda r: _pct(r.accuracy, r.accuracy_ci))
    columns.append(Column("accuracy %", accuracy, 3 if expected else 0))
    if any(r.selector == ev.baseline for r in rows):
        versus = f"{'expected' if expected else 'accuracy'} - {ev.baseline}, points"
        columns.append(Column(versus, cells(lambda r: _versus(r, ev, expected)), 1))
    columns += [
        Column("norm. adv.", cells(_advantage_cell), 4),
        Column("verif. tokens", cells(lambda r: f"{r.verification_tokens:,.0f}"), 2, True),
        Column("total tokens", cells(lambda r: f"{r.total_tokens:,.0f}"), 5, True),
    ]
    notes = (
        "In parentheses: 95% intervals (points: paired with "
        f"{ev.baseline} on the same tasks). verif.: verification; norm. adv.: normalized "
        "advantage. report.md has every column and their definitions.",
        *(f"{key}: {value}" for key, value in ev.notes.items()),
    )
    if expected and any(r.expected_accuracy is None for r in rows):
        notes = ("*: no expected accuracy is known; its sampled accuracy", *notes)
    title = f"{ev.domain or 'all'}: best-of-{n} on {ev.tasks} held-out tasks"
    return render(columns, width, title=title, notes=notes)


@dataclass(frozen=True)
class Style:
    """How a selector looks in every plot of a report."""

    colour: str
    marker: str


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">", "p")
"""Markers by registry position (`orchrm.bestofn.registry.REGISTRY`), unregistered
selectors after them."""
OTHER_COLOURS = ("#17becf", "#aec7e8", "#ffbb78", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d")
"""Colours of selectors the registry does not know, in the order of their sorted names."""


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
    for i, name in enumerate(names):
        rows = sorted((r for r in ev.results if r.selector == name), key=lambda r: r.n)
        # dodge each selector a little along the (log) N axis so intervals do not overlap
        shift = 2 ** (0.03 * (i - (len(names) - 1) / 2))
        use = expected and all(r.expected_accuracy is not None for r in rows)
        shown = [_shown(r, use) for r in rows]
        _errorbar(ax, [r.n * shift for r in rows], shown, name, look[name], expected, True)
    ax.set_xscale("log", base=2)
    if ns:  # an evaluation without tasks has no N
        ax.set_xticks(ns, labels=[str(n) for n in ns])
        ax.set_xlim(min(ns) / 1.3, max(ns) * 1.3)
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
        for name in paid:
            r = results[name]
            drawn[name] = _errorbar(
                ax,
                [r.verification_tokens],
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


def figures(ev: Evaluation, look: dict[str, Style] | None = None) -> dict[str, object]:
    """The two plots of a domain as matplotlib figures, by file name: accuracy against N,
    and accuracy against verification tokens at the full N. Both show expected accuracy
    when the evaluation has it (a selector without one: its sampled accuracy, marked),
    with 95% intervals, in each selector's `styles` colour and marker."""
    look = look or styles(r.selector for r in ev.results)
    expected = any(r.expected_accuracy is not None for r in ev.results)
    stem = ev.domain or "all"
    return {
        f"{stem}_accuracy_vs_n.png": _accuracy_vs_n(ev, look, expected),
        f"{stem}_accuracy_vs_tokens.png": _accuracy_vs_tokens(ev, look, expected),
    }


def plots(ev: Evaluation, out: Path, look: dict[str, Style] | None = None) -> list[Path]:
    """`figures` as PNGs into OUT (matplotlib's Agg renderer; no display needed)."""
    written = []
    for name, fig in figures(ev, look).items():
        fig.savefig(out / name, dpi=120)
        written.append(out / name)
    return written


def write_report(evaluations: list[Evaluation], out: str | Path, extra: dict | None = None) -> Path:
    """report.md, report.json and the PNGs of every domain into OUT."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    text = "# orchrm evaluation\n\n" + DEFINITION + "\n\n" + "\n".join(map(markdown, evaluations))
    look = styles(r.selector for ev in evaluations for r in ev.results)
    for ev in evaluations:
        plots(ev, out, look)
    (out / "report.md").write_text(text)
    (out / "report.json").write_text(
        json.dumps({"evaluations": [ev.to_dict() for ev in evaluations], **(extra or {})}, indent=2)
    )
    return out / "report.md"

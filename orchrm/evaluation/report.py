"""The evaluation report: a Markdown table per domain, PNG plots, a JSON of every number,
and the same tables as plain text that fits a terminal."""

from __future__ import annotations

import json
from pathlib import Path

from orchrm.evaluation.metrics import Evaluation
from orchrm.evaluation.plots import plots, styles
from orchrm.evaluation.reliability import CalibrationReport
from orchrm.selection.registry import REGISTRY, label
from orchrm.terminal import Column, render


def _replayed() -> str:
    """The selectors replayed on re-executions, as a phrase: "a, b and c"."""
    names = [e.label for e in REGISTRY if e.replays_reruns]
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)


DEFINITION = (
    "Normalized advantage = (accuracy - random) / (oracle - random), with random the mean "
    "correctness of the N candidates and oracle pass@N (our definition). Intervals: 95% "
    "BCa bootstrap over tasks (scipy.stats.bootstrap, seeded). Tokens are means per "
    "task. Orchestrator tokens: what the "
    "orchestrator read and wrote to produce the candidates a selector drew (all N, but "
    "fewer for orchrm-adaptive, which stops drawing early; 0 where the logs do not record "
    "them, as in stores). Verification tokens: what a selector reads and writes to choose "
    "(reward model: its input tokens; judges: prompt + completion; votes: the executions "
    "beyond the one that gives the answer, N - 1 for majority, k - 1 for a top-k vote). "
    "Execution tokens: the one execution that gives the answer. Total tokens: "
    "orchestrator + verification + execution. Expected accuracy (world logs only; far "
    "less noisy than the sampled accuracy): for a selector that executes one candidate, "
    f"that candidate's true success probability; for {_replayed()}, their accuracy "
    "averaged over K re-executions of the same N plans on the world (oracle: expected "
    "pass@N); '-' where neither is known (the trajectory judge, or no re-executions). "
    "'... - majority': a selector's accuracy (expected, where the table has it) minus "
    "majority's, in points, with a paired 95% BCa bootstrap interval (both resampled on the "
    "same tasks, which is why it can exclude 0 while the two accuracy intervals overlap). "
    "Rows: best first, by expected accuracy where the table has it."
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
        + "normalized advantage (95% CI) | orchestrator tokens | verification tokens | "
        "total tokens |",
        "| --- | --- | "
        + ("--- | " if expected else "")
        + ("--- | " if versus else "")
        + "--- | ---: | ---: | ---: |",
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
            f"{r.normalized_advantage:.2f} ({alo:.2f}-{ahi:.2f}) | {r.orchestrator_tokens:,.0f} "
            f"| {r.verification_tokens:,.0f} | {r.total_tokens:,.0f} |"
        )
    for key, value in ev.notes.items():
        lines.append(f"\n{key}: {value}")
    if ev.calibration is not None:
        lines.append("\n" + calibration_markdown(ev))
    return "\n".join(lines) + "\n"


def _ece_sentence(report: CalibrationReport) -> str:
    """The ECEs of a calibration report, e.g. `ECE 0.031 (raw sigmoid 0.210)`."""
    text = f"ECE {report.ece:.3f} (raw sigmoid {report.ece_raw:.3f})"
    if report.ece_true is not None and report.ece_raw_true is not None:
        text += (
            f"; against the true P(success) {report.ece_true:.3f} (raw {report.ece_raw_true:.3f})"
        )
    return text


def calibration_markdown(ev: Evaluation) -> str:
    """The calibration of a domain's `orchrm` model (`Evaluation.calibration`): its ECEs
    and the bins of its reliability diagram."""
    report = ev.calibration
    truth = all(b.p_success is not None for b in report.bins)
    lines = [
        f"#### {ev.domain or 'all'}: calibration of orchrm's P(correct)",
        "",
        f"The model's {report.method} calibration on the {report.candidates} held-out "
        f"candidates with a parsed orchestration: {_ece_sentence(report)}. ECE: over 10 "
        "equal-width bins of the predicted P(correct), each bin's share of the candidates "
        "times |share of right executions - mean prediction|, summed (0: perfectly "
        "calibrated); raw sigmoid: sigmoid(raw score), uncalibrated, for comparison"
        + (
            "; against the true P(success): the world's true success probability in "
            "place of the one execution (less noisy)"
            if truth
            else ""
        )
        + f". Reliability diagram: {ev.domain or 'all'}_reliability.png.",
        "",
        "| predicted P(correct) | candidates | mean prediction % | right executions % |"
        + (" mean true P(success) % |" if truth else ""),
        "| --- | ---: | ---: | ---: |" + (" ---: |" if truth else ""),
    ]
    for b in report.bins:
        true = f" {100 * b.p_success:.1f} |" if truth else ""
        lines.append(
            f"| {b.low:.1f}-{b.high:.1f} | {b.count} | {100 * b.confidence:.1f} | "
            f"{100 * b.accuracy:.1f} |{true}"
        )
    return "\n".join(lines)


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
    the baseline, verification, total and orchestrator tokens, the sampled accuracy,
    normalized advantage; a footnote names those left out (report.md has them all)."""
    n = n or ev.n
    rows = _best_first(list(ev.at(n).values()))
    expected = any(r.expected_accuracy is not None for r in rows)
    cells = lambda f: tuple(f(r) for r in rows)  # noqa: E731
    columns = [Column("selector", cells(lambda r: label(r.selector)))]
    if expected:
        columns.append(Column("expected %", cells(_expected_cell)))
    accuracy = cells(lambda r: _pct(r.accuracy, r.accuracy_ci))
    columns.append(Column("accuracy %", accuracy, 5 if expected else 0))
    if any(r.selector == ev.baseline for r in rows):
        versus = f"{'expected' if expected else 'accuracy'} - {ev.baseline}, points"
        columns.append(Column(versus, cells(lambda r: _versus(r, ev, expected)), 1))
    columns += [
        Column("norm. adv.", cells(_advantage_cell), 6),
        Column("orch. tokens", cells(lambda r: f"{r.orchestrator_tokens:,.0f}"), 4, True),
        Column("verif. tokens", cells(lambda r: f"{r.verification_tokens:,.0f}"), 2, True),
        Column("total tokens", cells(lambda r: f"{r.total_tokens:,.0f}"), 3, True),
    ]
    notes = (
        "In parentheses: 95% intervals (points: paired with "
        f"{ev.baseline} on the same tasks). orch.: orchestrator; verif.: verification; total: "
        "orchestrator + verification + execution; norm. adv.: normalized advantage. "
        "report.md has every column and their definitions.",
        *(f"{key}: {value}" for key, value in ev.notes.items()),
    )
    if ev.calibration is not None:
        notes = (*notes, f"orchrm's calibrated P(correct): {_ece_sentence(ev.calibration)}")
    if expected and any(r.expected_accuracy is None for r in rows):
        notes = ("*: no expected accuracy is known; its sampled accuracy", *notes)
    title = f"{ev.domain or 'all'}: best-of-{n} on {ev.tasks} held-out tasks"
    return render(columns, width, title=title, notes=notes)


def write_report(evaluations: list[Evaluation], out: str | Path, extra: dict | None = None) -> Path:
    """report.md, report.json and the PNGs of every domain into OUT."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    text = "# orchrm evaluation\n\n" + DEFINITION + "\n\n" + "\n".join(map(markdown, evaluations))
    look = styles(r.selector for ev in evaluations for r in ev.results)
    for ev in evaluations:
        plots(ev, out, look)
    (out / "report.md").write_text(text, encoding="utf-8")
    (out / "report.json").write_text(
        json.dumps({"evaluations": [ev.to_dict() for ev in evaluations], **(extra or {})}, indent=2)
    )
    return out / "report.md"

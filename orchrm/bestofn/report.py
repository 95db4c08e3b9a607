"""The evaluation report: a Markdown table per domain, PNG plots, a JSON of every number."""

from __future__ import annotations

import json
from pathlib import Path

from orchrm.bestofn.metrics import Evaluation
from orchrm.bestofn.registry import REGISTRY, colour, label


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


def markdown(ev: Evaluation, n: int | None = None) -> str:
    """The table of one domain at N (default: the full N)."""
    n = n or ev.n
    results = list(ev.at(n).values())
    expected = any(r.expected_accuracy is not None for r in results)
    # Best first, by the less noisy column where there is one; rows without it follow.
    results.sort(
        key=lambda r: (
            (r.expected_accuracy is None, -(r.expected_accuracy or 0.0), -r.accuracy)
            if expected
            else (-r.accuracy,)
        )
    )
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


def plots(ev: Evaluation, out: Path) -> list[Path]:
    """accuracy vs N, and accuracy vs verification tokens (log axis) at the full N."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    names = sorted({r.selector for r in ev.results})
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name in names:
        rows = sorted((r for r in ev.results if r.selector == name), key=lambda r: r.n)
        ax.plot(
            [r.n for r in rows],
            [100 * r.accuracy for r in rows],
            marker="o",
            label=label(name),
            color=colour(name),
        )
    ax.set(xlabel="N (candidates)", ylabel="accuracy %", title=f"{ev.domain}: accuracy vs N")
    ax.set_xscale("log", base=2)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path = out / f"{ev.domain or 'all'}_accuracy_vs_n.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    written.append(path)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in ev.at(ev.n).values():
        where = (max(r.verification_tokens, 1), 100 * r.accuracy)
        ax.scatter(*where, color=colour(r.selector))
        ax.annotate(label(r.selector), where, fontsize=7)
    ax.set(
        xlabel="verification tokens per task (log)",
        ylabel="accuracy %",
        title=f"{ev.domain}: accuracy vs verification cost, N={ev.n}",
    )
    ax.set_xscale("log")
    fig.tight_layout()
    path = out / f"{ev.domain or 'all'}_accuracy_vs_tokens.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    written.append(path)
    return written


def write_report(evaluations: list[Evaluation], out: str | Path, extra: dict | None = None) -> Path:
    """report.md, report.json and the PNGs of every domain into OUT."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    text = "# orchrm evaluation\n\n" + DEFINITION + "\n\n" + "\n".join(map(markdown, evaluations))
    for ev in evaluations:
        plots(ev, out)
    (out / "report.md").write_text(text)
    (out / "report.json").write_text(
        json.dumps({"evaluations": [ev.to_dict() for ev in evaluations], **(extra or {})}, indent=2)
    )
    return out / "report.md"

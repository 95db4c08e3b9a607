"""The comparison report of `orchrm rl` (`orchrm.experiments.rl_world.pipeline`): each
run's held-out evaluation (`orchrm.experiments.rl_world.evaluate`), its training tokens
and time, side by side as Markdown, JSON, a table for the terminal and the learning
curve's figure (PNG).
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import asdict, dataclass, field
from pathlib import Path

from orchrm.experiments.rl_world.evaluate import PolicyEval
from orchrm.terminal import Column, render, terminal_width


@dataclass
class RunReport:
    """One trained policy (or the starting one) in the comparison table."""

    name: str
    final: PolicyEval
    curve: list[PolicyEval] = field(default_factory=list)
    tokens: dict[str, int] = field(default_factory=dict)
    """Training tokens by kind (`policy`, `rm`, `execution`)."""
    data_tokens: int = 0
    """One-off sub-agent tokens behind the run's data (the executed world log its reward
    model or DPO pairs were mined from); 0 when it needs none."""
    wall_s: float = 0.0
    """Training time (without the final evaluation)."""
    steps: int = 0
    notes: dict = field(default_factory=dict)

    @property
    def training_tokens(self) -> int:
        return sum(self.tokens.values())


def _pct(x: float, ci) -> str:
    return f"{100 * x:.1f} ({100 * ci[0]:.1f}-{100 * ci[1]:.1f})"


def markdown(runs: list[RunReport], title: str) -> str:
    """The comparison table."""
    first = runs[0].final
    lines = [
        f"### {title}: {first.tasks} held-out tasks x {first.samples} samples",
        "",
        "| policy | expected acc % (95% CI) | executed acc % (95% CI) | majority@"
        f"{first.samples} % (95% CI) | valid % | policy tokens | RM tokens | sub-agent tokens "
        "| training tokens | data tokens (one-off) | steps | wall s |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in runs:
        f = r.final
        vote = _pct(f.majority, f.majority_ci) if f.majority is not None else "-"
        t = r.tokens
        lines.append(
            f"| {r.name} | {_pct(f.expected, f.expected_ci)} | {_pct(f.executed, f.executed_ci)} "
            f"| {vote} | {100 * f.valid:.1f} | {t.get('policy', 0):,} | {t.get('rm', 0):,} | "
            f"{t.get('execution', 0):,} | {r.training_tokens:,} | {r.data_tokens:,} | {r.steps} "
            f"| {r.wall_s:.0f} |"
        )
    return "\n".join(lines) + "\n"


RUN_COLOURS = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2")
"""Trained runs' colours in the order of the report's runs (the start is black)."""
RUN_MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def _start_point(runs: list[RunReport]) -> PolicyEval | None:
    """The starting policy's step-0 evaluation on the curve tasks, where a run has one."""
    return next((p for r in runs for p in r.curve if p.step == 0), None)


def curve_figure(runs: list[RunReport], title: str):
    """The learning curve as a matplotlib figure: expected held-out accuracy with its 95%
    interval over training steps (integer ticks), one line per trained run, each from
    the step-0 evaluation of the starting policy; that evaluation is also drawn on its
    own (a black star and a dotted level across the plot), so the start is never hidden
    under the first points of the others."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(7.5, 4.5), layout="constrained")
    ax = fig.subplots()
    start = _start_point(runs)
    trained = [r for r in runs if any(p.step > 0 for p in r.curve)]
    for i, r in enumerate(trained):
        points = sorted(r.curve, key=lambda p: p.step)
        if start is not None and points[0].step != 0:
            points = [start, *points]
        xs = [p.step for p in points]
        colour = RUN_COLOURS[i % len(RUN_COLOURS)]
        ax.plot(
            xs,
            [100 * p.expected for p in points],
            marker=RUN_MARKERS[i % len(RUN_MARKERS)],
            color=colour,
            label=r.name,
        )
        low = [100 * p.expected_ci[0] for p in points]
        ax.fill_between(xs, low, [100 * p.expected_ci[1] for p in points], color=colour, alpha=0.12)
    if start is not None:
        name = next((r.name for r in runs if r.curve and r.steps == 0), "start")
        ax.axhline(100 * start.expected, color="black", linestyle=":", linewidth=1)
        ax.errorbar(
            [0],
            [100 * start.expected],
            yerr=[
                [100 * (start.expected - start.expected_ci[0])],
                [100 * (start.expected_ci[1] - start.expected)],
            ],
            marker="*",
            markersize=12,
            color="black",
            capsize=4,
            linestyle="none",
            label=f"{name}, step 0",
            zorder=5,
        )
    last = max((p.step for r in runs for p in r.curve), default=0)
    ax.set_xlim(-0.04 * max(last, 1) - 0.2, last + 0.04 * max(last, 1) + 0.2)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(xlabel="training step", ylabel="expected held-out accuracy % (95% CI)", title=title)
    ax.legend(fontsize=8)
    return fig


def terminal_table(runs: list[RunReport], title: str, width: int | None = None) -> str:
    """`markdown`'s comparison table as plain text for a terminal of `width` columns
    (default: the terminal's). Run names are never cut. The name and expected accuracy
    are always shown; the other columns join by value while they fit
    (`orchrm.terminal.fit`): training tokens, executed accuracy, majority, valid share,
    data tokens, steps, wall seconds, then the policy / RM / sub-agent split of the
    training tokens; a footnote names those left out (report.md has them all)."""
    first = runs[0].final
    cells = lambda f: tuple(f(r) for r in runs)  # noqa: E731
    vote = lambda f: _pct(f.majority, f.majority_ci) if f.majority is not None else "-"  # noqa: E731
    tokens = lambda kind: cells(lambda r: f"{r.tokens.get(kind, 0):,}")  # noqa: E731
    columns = [
        Column("policy", cells(lambda r: r.name)),
        Column("expected %", cells(lambda r: _pct(r.final.expected, r.final.expected_ci))),
        Column("executed %", cells(lambda r: _pct(r.final.executed, r.final.executed_ci)), 2),
        Column(f"majority@{first.samples} %", cells(lambda r: vote(r.final)), 3),
        Column("valid %", cells(lambda r: f"{100 * r.final.valid:.1f}"), 4, True),
        Column("training tokens", cells(lambda r: f"{r.training_tokens:,}"), 1, True),
        Column("policy tokens", tokens("policy"), 8, True),
        Column("RM tokens", tokens("rm"), 9, True),
        Column("sub-agent tokens", tokens("execution"), 10, True),
        Column("data tokens", cells(lambda r: f"{r.data_tokens:,}"), 5, True),
        Column("steps", cells(lambda r: str(r.steps)), 6, True),
        Column("wall s", cells(lambda r: f"{r.wall_s:.0f}"), 7, True),
    ]
    notes = (
        "In parentheses: 95% intervals over tasks. Training tokens: policy + reward model + "
        "sub-agents in the training loop; data tokens: the one-off world log behind a run. "
        "report.md has every column.",
    )
    heading = f"{title}: {first.tasks} held-out tasks x {first.samples} samples"
    return render(columns, width, title=heading, notes=notes)


def runs_from_json(payload: dict) -> list[RunReport]:
    """The runs of a comparison report.json (`write_report`)."""
    runs = []
    for r in payload["runs"]:
        fields = {k: v for k, v in r.items() if k != "training_tokens"}
        fields["final"] = PolicyEval(**fields["final"])
        fields["curve"] = [PolicyEval(**p) for p in fields["curve"]]
        runs.append(RunReport(**fields))
    return runs


def terminal_report(report: str | Path, width: int | None = None) -> str:
    """What `orchrm rl` prints for the report.md it wrote, for a terminal of `width`
    columns (default: the terminal's): a comparison report's table by `terminal_table`
    with its one-line notes; another report (training on your own tasks, a narrow table)
    as its Markdown with long lines wrapped."""
    report = Path(report)
    payload = json.loads(report.with_name("report.json").read_text())
    width = terminal_width(width)
    if "runs" not in payload:
        lines = report.read_text().splitlines()
        return "\n".join(w for line in lines for w in (textwrap.wrap(line, width) or [""])) + "\n"
    title = payload.get("title") or report.read_text().splitlines()[0].removeprefix("# orchrm rl: ")
    text = terminal_table(runs_from_json(payload), title, width)
    for key, value in payload.items():
        if key not in ("runs", "title") and not isinstance(value, dict):
            text += "\n".join(textwrap.wrap(f"{key}: {value}", width)) + "\n"
    return text


def plot_curves(runs: list[RunReport], path: Path, title: str) -> Path:
    """`curve_figure` as a PNG at `path` (matplotlib's Agg renderer)."""
    curve_figure(runs, title).savefig(path, dpi=120)
    return path


def write_report(runs: list[RunReport], out: str | Path, title: str, extra: dict) -> Path:
    """report.md, report.json and curve.png into OUT."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    text = (
        f"# orchrm rl: {title}\n\n"
        "Expected accuracy: mean exact success probability of the sampled orchestrations "
        "(no execution noise); executed: each sample run once; majority: the samples vote. "
        "Intervals: 95% BCa bootstrap over tasks. Training tokens = policy tokens generated + "
        "reward-model input tokens + sub-agent tokens executed in the training loop; data "
        "tokens: executing the world log the reward model or the DPO pairs came from "
        "(paid once, shared).\n\n" + markdown(runs, title)
    )
    for key, value in extra.items():
        if not isinstance(value, dict):  # the config and other nested numbers: JSON only
            text += f"\n{key}: {value}\n"
    (out / "report.md").write_text(text, encoding="utf-8")
    payload = {
        "title": title,
        "runs": [{**asdict(r), "training_tokens": r.training_tokens} for r in runs],
        **extra,
    }
    (out / "report.json").write_text(json.dumps(payload, indent=2))
    plot_curves(runs, out / "curve.png", title)
    return out / "report.md"

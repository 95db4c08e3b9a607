"""orchrm.evaluation.report: the Markdown tables, the plots and the JSON of an evaluation."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest
from matplotlib.colors import to_hex
from matplotlib.container import ErrorbarContainer

from orchrm.evaluation.metrics import evaluate_selectors
from orchrm.evaluation.plots import figures, plots
from orchrm.evaluation.report import markdown, terminal_table, write_report
from orchrm.selection.registry import colour, label
from orchrm.selection.selectors import (
    CandidateSet,
    Selection,
    bayes_selector,
    logp_selector,
    majority_selector,
    oracle_selector,
    random_selector,
)
from tests.samples import candidate_set


def test_evaluation_intervals_and_report(tmp_path):
    tasks = [candidate_set(["a", "b"], [i % 2 == 0, i % 3 == 0]) for i in range(30)]
    tasks = [CandidateSet(f"t{i}", t.question, t.candidates) for i, t in enumerate(tasks)]
    ev = evaluate_selectors(
        tasks,
        {
            "oracle": oracle_selector,
            "first": lambda t: oracle_selector(
                CandidateSet(t.task_id, t.question, t.candidates[:1])
            ),
        },
        [2],
        domain="toy",
    )
    first = ev.at(2)["first"]
    assert first.accuracy == pytest.approx(sum(i % 2 == 0 for i in range(30)) / 30)
    assert first.accuracy_ci[0] <= first.accuracy <= first.accuracy_ci[1]
    write_report([ev], tmp_path)
    assert "| first |" in (tmp_path / "report.md").read_text()
    assert json.loads((tmp_path / "report.json").read_text())["evaluations"][0]["domain"] == "toy"
    assert (tmp_path / "toy_accuracy_vs_n.png").stat().st_size > 1000


def test_the_report_names_what_the_registry_says_is_replayed():
    from orchrm.evaluation.report import DEFINITION
    from orchrm.selection.registry import REGISTRY, colour, label

    replayed = [e.label for e in REGISTRY if e.replays_reruns]
    assert f"for {', '.join(replayed[:-1])} and {replayed[-1]}, their accuracy" in DEFINITION
    assert len({e.colour for e in REGISTRY}) == len(REGISTRY)  # one colour per selector
    assert label("not-registered") == "not-registered" and colour("not-registered") is None


def _world_tasks(count: int = 24) -> list[CandidateSet]:
    """Tasks of 8 candidates with true success probabilities and 3 re-executions each,
    as world logs give them (so every selector but a multi-execution one has an
    expected accuracy)."""
    rng = random.Random(0)
    tasks = []
    for i in range(count):
        ps = [rng.random() for _ in range(8)]
        correct = [rng.random() < p for p in ps]
        answers = ["42" if c else f"w{rng.randrange(3)}" for c in correct]
        logprobs = [-rng.random() for _ in range(8)]
        t = candidate_set(answers, correct, tokens=100, logprobs=logprobs, ps=ps)
        candidates = []
        for c in t.candidates:
            runs = [rng.random() < c.p_success for _ in range(3)]
            reruns = tuple(("42" if ok else f"w{rng.randrange(3)}", ok) for ok in runs)
            candidates.append(replace(c, reruns=reruns))
        tasks.append(CandidateSet(f"t{i}", t.question, tuple(candidates), "toy"))
    return tasks


def _pair_vote(task: CandidateSet) -> Selection:
    """An unregistered selector that executes the first two candidates (so it has no
    expected accuracy) and pays 50 tokens to choose."""
    pair = tuple(range(min(2, len(task.candidates))))
    index = 0 if task.candidates[0].correct else pair[-1]
    return Selection(index, verification_tokens=50, executed=pair)


SELECTORS = {
    "majority": majority_selector,
    "random": random_selector(0),
    "logp": logp_selector,
    "oracle": oracle_selector,
    "bayes": bayes_selector,
    "pair-vote": _pair_vote,
}


@pytest.fixture(scope="module")
def world_eval():
    return evaluate_selectors(
        _world_tasks(), SELECTORS, [1, 2, 4, 8], domain="toy", draws=2, bootstrap=200
    )


def _series(fig) -> dict[str, tuple]:
    """label -> (colour, marker, x data) of every errorbar series in a figure."""
    out = {}
    for ax in fig.axes:
        for container in ax.containers:
            assert isinstance(container, ErrorbarContainer) and container.has_yerr
            line = container.lines[0]
            out[container.get_label()] = (line.get_color(), line.get_marker(), ax, line.get_xdata())
    return out


def test_plots_show_expected_accuracy_with_intervals_in_fixed_styles(world_eval, tmp_path):
    figs = figures(world_eval)
    by_n = _series(figs["toy_accuracy_vs_n.png"])
    by_tokens = _series(figs["toy_accuracy_vs_tokens.png"])
    labels = {label(s) for s in SELECTORS} - {"pair-vote"} | {"pair-vote (sampled)"}
    assert set(by_n) == set(by_tokens) == labels
    for name in labels:  # one colour and marker per selector across both plots
        assert by_n[name][:2] == by_tokens[name][:2]
    assert len({v[:2] for v in by_n.values()}) == len(labels)
    assert to_hex(by_n["oracle"][0]) == colour("oracle")
    ax = figs["toy_accuracy_vs_n.png"].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4", "8"]
    assert not list(ax.xaxis.get_minorticklocs())
    assert ax.get_ylabel().startswith("expected accuracy %")
    # the oracle's plotted values are its expected accuracies, not the sampled ones
    oracle = sorted((r for r in world_eval.results if r.selector == "oracle"), key=lambda r: r.n)
    line = ax.containers[[c.get_label() for c in ax.containers].index("oracle")].lines[0]
    assert list(line.get_ydata()) == pytest.approx([100 * r.expected_accuracy for r in oracle])
    # tokens: the selectors that read nothing sit in a "0 tokens" panel, never at x=1
    results = world_eval.at(8)
    for name, (_, _, axis, xs) in by_tokens.items():
        spent = results[name.removesuffix(" (sampled)")].verification_tokens
        if spent == 0:
            assert [t.get_text() for t in axis.get_xticklabels()] == ["0 tokens"]
        else:
            assert axis.get_xscale() == "log" and list(xs) == [spent]
    assert {results[s].verification_tokens == 0 for s in SELECTORS} == {True, False}
    written = plots(world_eval, tmp_path)
    assert [p.name for p in written] == list(figs) and all(p.stat().st_size > 5000 for p in written)


def test_plots_of_logs_without_ground_truth_say_sampled_accuracy():
    tasks = [
        replace(t, candidates=tuple(replace(c, p_success=None, reruns=()) for c in t.candidates))
        for t in _world_tasks(8)
    ]
    ev = evaluate_selectors(
        tasks, {"majority": majority_selector, "logp": logp_selector}, [2, 8], bootstrap=50
    )
    for fig in figures(ev).values():
        assert fig.axes[0].get_ylabel() == "accuracy % (95% CI)"
        assert not any("sampled" in name for name in _series(fig))
    assert [
        t.get_text() for t in figures(ev)["all_accuracy_vs_n.png"].axes[0].get_xticklabels()
    ] == ["2", "8"]


@pytest.mark.parametrize("width", [80, 120])
def test_terminal_table_fits_the_width_and_names_every_selector_in_full(world_eval, width):
    text = terminal_table(world_eval, width)
    lines = text.splitlines()
    assert max(map(len, lines)) <= width
    first_cells = {line.split("  ")[0] for line in lines}
    assert {label(s) for s in SELECTORS} <= first_cells
    assert any("expected %" in line for line in lines)
    (pair,) = [line for line in lines if line.startswith("pair-vote ")]
    sampled = world_eval.at(8)["pair-vote"].accuracy  # it has no expected accuracy
    assert f"{100 * sampled:.1f} (" in pair and "*" in pair
    header = " ".join(lines[: next(i for i, x in enumerate(lines) if x.startswith("---"))])
    left_out = [line for line in lines if line.startswith("not shown at")]
    if width == 120:  # everything fits
        assert not left_out and "total" in header and "norm." in header
    else:  # the footnote names exactly the columns the header lacks
        (note,) = left_out
        assert note.startswith("not shown at 80 columns: ")
        assert all(c.split()[0] not in header for c in note.split(": ")[1].split(", "))
    assert "| majority |" in markdown(world_eval)  # the report file keeps its Markdown


def test_terminal_table_wraps_a_name_only_when_the_must_have_columns_do_not_fit(world_eval):
    long = "a-very-long-selector-name-for-this-test"
    ev = replace(
        world_eval,
        results=[
            replace(r, selector=long) if r.selector == "logp" else r for r in world_eval.results
        ],
    )
    lines = terminal_table(ev, 40).splitlines()
    assert max(map(len, lines)) <= 40
    rule = next(i for i, x in enumerate(lines) if x.startswith("---"))
    end = next(i for i, x in enumerate(lines) if x.startswith("not shown"))
    names = [line.split("  ")[0] for line in lines[rule + 1 : end]]
    assert long not in names and long in "".join(names)  # wrapped, never cut
    assert long in terminal_table(ev, 120)


def test_an_evaluation_without_tasks_still_reports(tmp_path):
    ev = evaluate_selectors([], SELECTORS, [1, 8], domain="empty")
    write_report([ev], tmp_path)
    assert (tmp_path / "empty_accuracy_vs_tokens.png").stat().st_size > 1000
    assert terminal_table(ev, 80).startswith("empty: best-of-0 on 0 held-out tasks")


def test_the_pareto_frontier_keeps_the_non_dominated_points_cheapest_first():
    from orchrm.evaluation.plots import pareto_frontier

    # (tokens, accuracy): b costs more than a for less, so it is dominated
    assert pareto_frontier([(100, 0.5), (200, 0.4), (300, 0.9), (50, 0.2)]) == [3, 0, 2]
    # two equal points dominate neither; at equal cost the lower accuracy is dominated,
    # at equal accuracy the costlier point
    ties = [(100, 0.6), (100, 0.6), (100, 0.5), (150, 0.6), (400, 0.8)]
    assert pareto_frontier(ties) == [0, 1, 4]
    assert pareto_frontier([]) == []


def test_log_ticks_are_round_numbers_inside_the_range():
    from orchrm.evaluation.plots import log_ticks

    assert log_ticks(3_000, 140_000) == [5_000, 10_000, 20_000, 50_000, 100_000]
    assert log_ticks(1_100, 4_400) == [2_000, 3_000, 4_000]  # too few 1-2-5 steps


def test_the_pareto_plot_joins_the_frontier_of_the_real_selectors(world_eval):
    from matplotlib.ticker import FixedLocator

    from orchrm.evaluation.plots import GROUND_TRUTH, pareto_frontier

    fig = figures(world_eval)["toy_pareto.png"]
    ax = fig.axes[0]
    series = _series(fig)
    labels = {label(s) for s in SELECTORS} - {"pair-vote"} | {"pair-vote (sampled)"}
    assert set(series) == labels  # every selector, with its interval
    results = world_eval.at(8)
    for name, (colour_, marker, _, xs) in series.items():
        assert list(xs) == [results[name.removesuffix(" (sampled)")].total_tokens]
        assert (colour_, marker) == _series(figures(world_eval)["toy_accuracy_vs_n.png"])[name][:2]
    assert ax.get_xscale() == "log" and isinstance(ax.xaxis.get_major_locator(), FixedLocator)
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks and all(t.replace(",", "").isdigit() for t in ticks)
    # the frontier: expected accuracies of the selectors that read no ground truth
    real = [s for s in results if s not in GROUND_TRUTH and results[s].expected_accuracy]
    points = [(results[s].total_tokens, 100 * results[s].expected_accuracy) for s in real]
    want = [points[i] for i in pareto_frontier(points)]
    (front,) = [line for line in ax.lines if line.get_label().startswith("Pareto frontier")]
    assert list(zip(front.get_xdata(), front.get_ydata(), strict=True)) == want
    assert len(want) >= 2 and "oracle" in front.get_label() and "pair-vote" in front.get_label()


def test_the_report_has_orchestrator_tokens_and_the_pareto_png(world_eval, tmp_path):
    from orchrm.evaluation.report import DEFINITION

    ev = replace(
        world_eval,
        results=[replace(r, orchestrator_tokens=1234.0) for r in world_eval.results],
    )
    write_report([ev], tmp_path)
    text = (tmp_path / "report.md").read_text()
    header = next(line for line in text.splitlines() if line.startswith("| selector"))
    assert "| orchestrator tokens | verification tokens | total tokens |" in header
    assert "| 1,234 |" in text
    for part in ("Orchestrator tokens:", "Verification tokens:", "Execution tokens:"):
        assert part in DEFINITION
    assert "Total tokens: orchestrator + verification + execution" in DEFINITION
    saved = json.loads((tmp_path / "report.json").read_text())["evaluations"][0]
    assert {r["orchestrator_tokens"] for r in saved["results"]} == {1234.0}
    assert saved["calibration"] is None  # no orchrm model: no reliability diagram
    assert (tmp_path / "toy_pareto.png").stat().st_size > 5000
    assert not (tmp_path / "toy_reliability.png").exists()
    wide = terminal_table(ev, 120)
    assert "orch." in wide and "1,234" in wide

"""`orchrm eval`'s options for the selectors built on the reward model's scores
(`orchrm.selection.options.SelectorOptions`): from the command line to `LineupInputs`."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import orchrm.evaluation.lineup
from orchrm.cli import app
from orchrm.errors import ConfigError
from orchrm.evaluation.lineup import build_lineup
from orchrm.evaluation.loading import tasks_from_logs
from orchrm.jsonl import write_jsonl
from orchrm.selection.options import SelectorOptions
from orchrm.selection.registry import LineupInputs
from orchrm.selection.selectors import CandidateSet, Selection
from orchrm.world.generate import generate


def _ready(task: CandidateSet) -> Selection:
    """A ready `orchrm` selector (as cross-validation's): score i for candidate i."""
    scores = tuple(float(i) for i in range(len(task.candidates)))
    return Selection(len(scores) - 1, scores, 0, (len(scores) - 1,))


@pytest.fixture(scope="module")
def world_log(tmp_path_factory):
    log = tmp_path_factory.mktemp("eval") / "math.jsonl"
    write_jsonl(generate("math", 3, 2, seed=5, progress=False).records, log)
    return log


def test_the_line_up_builds_with_the_options_defaults_when_given_none():
    assert LineupInputs().options == SelectorOptions()


def test_eval_options_reach_the_line_up_inputs(monkeypatch, world_log, tmp_path):
    seen: list[LineupInputs] = []

    def line_up(inputs: LineupInputs):
        seen.append(inputs)
        raise SystemExit(0)  # what the line-up was built from is all this test reads

    monkeypatch.setattr(orchrm.evaluation.lineup, "line_up", line_up)
    base = ["eval", str(world_log), "--samples", "2", "--out", str(tmp_path / "r")]
    given = [
        *("--cost-weight", "0.5", "--cost-measure", "critical_path_calls"),
        *("--adaptive-confidence", "0.75", "--adaptive-tolerance", "0.05"),
    ]
    for args in (base, base + given):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
    left_out, set_ = seen
    assert left_out.options == SelectorOptions()
    assert set_.options == SelectorOptions(
        adaptive_confidence=0.75,
        adaptive_tolerance=0.05,
        cost_weight=0.5,
        cost_measure="critical_path_calls",
    )


def test_the_selectors_are_built_with_the_options(world_log):
    tasks = tasks_from_logs([str(world_log)], "specialized", 2)
    options = SelectorOptions(
        adaptive_confidence=0.6, adaptive_tolerance=0.2, cost_weight=2.0, cost_measure="calls"
    )
    chosen = build_lineup(tasks, rm_selector=_ready, options=options).selectors
    cost, adaptive = chosen["orchrm-cost"], chosen["orchrm-adaptive"]
    assert (cost.cost_weight, cost.measure) == (2.0, "calls")
    assert (adaptive.confidence, adaptive.tolerance) == (0.6, 0.2)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--adaptive-confidence", "1"],
            "'--adaptive-confidence': 1.0 is not in the range 0.0<x<1.0",
        ),
        (
            ["--adaptive-confidence", "0"],
            "'--adaptive-confidence': 0.0 is not in the range 0.0<x<1.0",
        ),
        (
            ["--adaptive-tolerance", "1"],
            "'--adaptive-tolerance': 1.0 is not in the range 0.0<=x<1.0",
        ),
        (["--cost-weight", "-0.5"], "--cost-weight"),
        (["--cost-measure", "dollars"], "'dollars'"),
    ],
)
def test_an_option_out_of_range_is_refused_in_one_line(world_log, args, says):
    result = CliRunner().invoke(app, ["eval", str(world_log), *args])
    assert result.exit_code == 2
    assert says in " ".join(result.output.split())


def test_the_config_refuses_what_the_command_line_cannot_check():
    with pytest.raises(ConfigError, match="cost_measure should be 'calls', 'tokens' or"):
        SelectorOptions(cost_measure="dollars")
    with pytest.raises(ConfigError, match="adaptive_confidence should be less than 1"):
        SelectorOptions(adaptive_confidence=1.0)

"""orchrm.experiments.demo.run: the whole offline story end to end, at a tiny size."""

from __future__ import annotations

import json

import pytest
from transformers import AutoTokenizer

from orchrm.experiments.demo.run import DemoConfig, run_demo
from orchrm.jsonl import read_jsonl
from orchrm.rmodel.tokens import default_backbone, render_budget


def test_demo_writes_the_report_with_every_selector(tmp_path):
    lines: list[str] = []
    run_demo(
        DemoConfig(
            out=str(tmp_path),
            presets=("math", "multihop"),
            mixed=True,
            train_tasks=20,
            test_tasks=12,
            samples=4,
            steps=2,
            multihop_steps=2,
            max_length=64,
            reruns=3,
        ),
        say=lines.append,
    )
    report = (tmp_path / "report.md").read_text()
    for selector in (
        "orchrm",
        "orchrm-weighted",
        "orchrm-mixed",
        "majority",
        "random",
        "logp",
        "judge-orch",
        "judge-traj",
        "external-rm",
        "oracle",
        "bayes",
    ):
        assert f"| {selector} |" in report
    numbers = json.loads((tmp_path / "report.json").read_text())
    assert [e["domain"] for e in numbers["evaluations"]] == ["math", "multihop"]
    assert set(numbers["validation_accuracy"]) == {"math", "multihop", "mixed"}
    for domain in ("math", "multihop"):
        assert (tmp_path / f"{domain}_accuracy_vs_n.png").exists()
    assert set(numbers["truncated_texts"]) == {"math", "multihop", "mixed"}
    stages = numbers["seconds"]  # where the time went, stage by stage
    assert {"generate", "train math", "evaluate multihop", "total"} <= set(stages)
    assert sum(v for k, v in stages.items() if k != "total") <= stages["total"] + 0.5
    assert any(line.startswith("seconds: generate ") for line in lines)
    # Training texts are cut as scoring cuts them: the question to half the model's budget
    # by its own tokenizer (the world's questions run longer than that at 64 tokens).
    tokenizer = AutoTokenizer.from_pretrained(default_backbone())
    budget, count = render_budget(tokenizer, 64)
    rows = [r for _, r in read_jsonl(tmp_path / "pairs" / "math" / "train.jsonl")]
    assert rows and max(count(r["prompt"]) for r in rows) <= budget // 2
    assert any(r["prompt"].rstrip().endswith("...") for r in rows)
    assert any("bayes gap Orch-RM closes, on expected accuracy: " in line for line in lines)
    assert any("the same on sampled accuracy (one execution" in line for line in lines)
    assert any("orchrm - majority, task by task: expected " in line for line in lines)
    for ev in numbers["evaluations"]:  # the votes' expected accuracy, from re-executions
        full = [r for r in ev["results"] if r["n"] == ev["n"]]
        by_name = {r["selector"]: r for r in full}
        assert 0 <= by_name["majority"]["expected_accuracy"] <= 1
        assert by_name["orchrm-weighted"]["expected_accuracy"] is not None
        assert by_name["judge-traj"]["expected_accuracy"] is None


def test_demo_command_leaves_defaults_to_demo_config_and_shows_them(monkeypatch, tmp_path):
    """The CLI shows DemoConfig's defaults and sets only the options given."""
    import dataclasses
    import re

    from typer.testing import CliRunner

    import orchrm.experiments.demo.run
    from orchrm.cli import app
    from orchrm.configs import load_config

    seen = []
    monkeypatch.setattr(
        orchrm.experiments.demo.run, "run_demo", lambda config, say: seen.append(config)
    )
    monkeypatch.chdir(tmp_path)  # the command writes x/config.yaml
    runner = CliRunner(env={"COLUMNS": "200"})
    assert runner.invoke(app, ["demo", "--out", "x", "--steps", "7"]).exit_code == 0
    assert seen == [DemoConfig(out="x", steps=7)]
    assert load_config(DemoConfig, tmp_path / "x" / "config.yaml") == seen[0]
    shown = runner.invoke(app, ["demo", "--help"]).output
    defaults = {f.name: f.default for f in dataclasses.fields(DemoConfig)}
    for option, name in (
        ("--train-tasks", "train_tasks"),
        ("--test-tasks", "test_tasks"),
        ("--steps", "steps"),
        ("--multihop-steps", "multihop_steps"),
        ("--reruns", "reruns"),
        ("--seed", "seed"),
    ):
        # The option's help runs from its line to the next option's.
        after = re.split(rf"{option}\s", shown, maxsplit=1)[1]
        block = " ".join(re.split(r"\n +--", after, maxsplit=1)[0].split())
        assert re.search(rf"\[default: {defaults[name]}[;\]]", block), block


def test_demo_presets_are_the_world_presets_and_mixing_needs_two():
    from orchrm.errors import ConfigError
    from orchrm.experiments.demo.config import WORLD_PRESETS
    from orchrm.world.tasks import PRESETS

    assert tuple(PRESETS) == WORLD_PRESETS
    assert DemoConfig().presets == ("math",) and not DemoConfig().mixed
    DemoConfig(presets=("search", "math"), mixed=True)
    for bad in ({"presets": ("maths",)}, {"presets": ()}, {"mixed": True}):
        with pytest.raises(ConfigError):
            DemoConfig(**bad)

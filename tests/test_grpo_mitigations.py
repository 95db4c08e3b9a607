"""The GRPO study against reward hacking (`orchrm.experiments.rl_world.mitigations`): what
each run changes, how a curve's fall is read, and the reference plans the centred reward
is given. The runs themselves are GRPO through TRL (tests/test_rl.py trains it)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from orchrm.errors import ConfigError
from orchrm.experiments.rl_world.config import RLExperimentConfig
from orchrm.experiments.rl_world.data import with_references
from orchrm.experiments.rl_world.mitigations import (
    MitigationSettings,
    experiment,
    largest_fall,
    run_config,
)
from orchrm.rl.config import GRPOConfig


def test_each_run_changes_only_what_it_names_into_its_own_folder():
    base = experiment(MitigationSettings(out="o", steps=7, members=3))
    assert (base.policy.steps, base.rm_members, base.grpo.reward) == (7, 3, "orchrm")
    seen = {}
    for name in ("plain", "kl", "centred", "ensemble", "diverse", "all", "execution"):
        config, ensemble = run_config(base, name, beta=0.04)
        g = config.grpo
        seen[name] = (
            config.run_name,
            ensemble,
            g.reward,
            g.beta,
            g.centre,
            g.aggregate,
            g.diversity,
        )
        assert config.policy == base.policy and config.rm_members == 3
    assert seen == {
        "plain": ("grpo-orchrm-plain", False, "orchrm", 0.0, False, "", 0.0),
        "kl": ("grpo-orchrm-kl", False, "orchrm", 0.04, False, "", 0.0),
        "centred": ("grpo-orchrm-centred", False, "orchrm", 0.0, True, "", 0.0),
        "ensemble": ("grpo-orchrm-ensemble", True, "orchrm", 0.0, False, "min", 0.0),
        "diverse": ("grpo-orchrm-diverse", True, "orchrm", 0.0, False, "min", 0.5),
        "all": ("grpo-orchrm-all", True, "orchrm", 0.04, True, "min", 0.0),
        "execution": ("grpo-execution", False, "execution", 0.0, False, "", 0.0),
    }
    assert not run_config(base, "execution", 0.04)[0].needs_rm
    with pytest.raises(ConfigError, match="unknown run 'median'"):
        run_config(base, "median", 0.04)


def test_a_fall_is_measured_from_the_best_point_before_it():
    assert largest_fall([0.1, 0.3, 0.2, 0.5, 0.45]) == pytest.approx(0.1)
    assert largest_fall([0.1, 0.2, 0.3]) == 0.0 and largest_fall([0.4]) == 0.0


def test_references_are_the_base_orchestrators_plans_of_the_same_question():
    records = [
        {"orchestrator": "base", "question": "q1", "raw": "a"},
        {"orchestrator": "specialized", "question": "q1", "raw": "s"},
        {"orchestrator": "base", "question": "q1", "raw": ""},  # an empty output
        {"orchestrator": "base", "question": "q1", "raw": "b"},
        {"orchestrator": "base", "question": "q1", "raw": "c"},
        {"orchestrator": "base", "question": "q2", "raw": "d"},
    ]
    logs = SimpleNamespace(records=lambda: records)
    rows = [{"question": "q1", "prompt": "p1"}, {"question": "q3", "prompt": "p3"}]
    got = with_references(rows, logs, k=2)
    assert got == [
        {"question": "q1", "prompt": "p1", "reference": ["a", "b"]},
        {"question": "q3", "prompt": "p3", "reference": []},  # the reward says so
    ]


def test_settings_that_cannot_work_are_refused():
    with pytest.raises(ConfigError, match="aggregate 'median'"):
        GRPOConfig(aggregate="median")
    with pytest.raises(ConfigError, match=r"beta -0\.1"):
        GRPOConfig(beta=-0.1)
    with pytest.raises(ConfigError, match="tag 'a/b'"):
        RLExperimentConfig(tag="a/b")
    with pytest.raises(ConfigError, match=r"centred reward .* not on --tasks"):
        RLExperimentConfig(tasks="t.jsonl", rm="m", grpo=GRPOConfig(centre=True))


def test_the_curve_and_final_tasks_are_held_out_from_training():
    from orchrm.experiments.rl_world.data import eval_tasks, train_tasks

    config = experiment(MitigationSettings(train_tasks=60, eval_tasks=60))
    train, held = train_tasks(config), eval_tasks(config)
    assert {t.id for t in train}.isdisjoint(t.id for t in held)
    assert {t.question for t in train}.isdisjoint(t.question for t in held)
    assert config.curve_tasks <= len(held)  # the curve reads the first held-out tasks

"""Config files: the recipes under configs/, `--config FILE.yaml` on the commands built on
a config dataclass (the command line over the file over the defaults), the errors a bad
file gives, and the config.yaml a run writes, which `--config` reads back to the same
config."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import orchrm.training.train
from orchrm.calibration.calibrate import CalibrateConfig
from orchrm.cli import app
from orchrm.configs import config_dict, dump_config, is_internal, load_config
from orchrm.errors import ConfigError
from orchrm.evaluation.config import EvalConfig, LotoConfig
from orchrm.experiments.demo.config import DemoConfig
from orchrm.selection.options import SelectorOptions
from orchrm.serve.config import ServeConfig
from orchrm.store.config import MineConfig
from orchrm.tasks.config import SampleRunConfig
from orchrm.training.config import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
RECIPES = {"demo-rm.yaml": TrainConfig, "skywork-8b-lora.yaml": TrainConfig}
"""Every recipe under configs/ and the config it describes."""


def test_every_recipe_is_listed_and_loads_into_its_config():
    files = sorted(p.name for p in (ROOT / "configs").glob("*.yaml"))
    assert files == sorted(RECIPES)
    for name, cls in RECIPES.items():
        assert isinstance(load_config(cls, ROOT / "configs" / name), cls)


def test_the_paper_recipe_is_lora_on_skywork_in_bf16():
    c = load_config(TrainConfig, ROOT / "configs" / "skywork-8b-lora.yaml")
    assert c.backbone == "Skywork/Skywork-Reward-Llama-3.1-8B"
    assert (c.lora, c.lora_r, c.lora_alpha, c.lr, c.max_length) == (True, 32, 32, 1e-5, 4096)
    assert c.precision() == "bf16"


def test_the_demo_recipe_is_the_config_the_demo_trains_its_math_model_with(monkeypatch):
    """What `orchrm demo` (its defaults) hands `train` for the math model equals the
    recipe, so `orchrm train --config configs/demo-rm.yaml` repeats it."""
    import orchrm.experiments.demo.run
    from orchrm.experiments.world_models import dataset_train_config

    built = []

    def world_reward_models(config, stage_done=None):
        built.append(config)

    monkeypatch.setattr(orchrm.experiments.demo.run, "world_reward_models", world_reward_models)
    logs = {("math", "train"): "math.jsonl"}
    orchrm.experiments.demo.run._reward_models(DemoConfig(), logs, print)
    (world,) = built
    (math,) = [d for d in world.datasets if d.name == "math"]
    demo = dataset_train_config(world, math)
    assert load_config(TrainConfig, ROOT / "configs" / "demo-rm.yaml") == demo


@pytest.mark.parametrize(
    "config",
    [
        TrainConfig(pairs="p", lr=1e-5, head_lr=3e-4, lora=True, extra={"note": "x"}),
        EvalConfig(logs=("a.jsonl",), selector_options=SelectorOptions(cost_weight=0.5)),
        LotoConfig(folds=3, mine=MineConfig(dataset="x", specialized=("s",)), keep_models=True),
        DemoConfig(presets=("math", "search"), mixed=True, lr=2e-4),
        SampleRunConfig(tasks="t.jsonl", samples=2),
        ServeConfig(rm="m", max_wait_ms=0.5),
        MineConfig(ratio={"sob": 1, "soo": 2, "coi": 0.5}, split=(0.5, 0.5, 0.0)),
        CalibrateConfig(rm="m", logs=("l.jsonl",), method="platt"),
    ],
    ids=lambda c: type(c).__name__,
)
def test_a_written_config_reads_back_the_same(config, tmp_path):
    path = dump_config(config, tmp_path / "run" / "config.yaml")
    assert load_config(type(config), path) == config
    assert [p.name for p in path.parent.iterdir()] == ["config.yaml"]  # no temporary left


def test_a_field_the_code_sets_is_neither_written_nor_read(tmp_path):
    written = config_dict(LotoConfig())
    assert "pairs" not in written["train"] and "seed" not in written["train"]
    assert "split" not in written["mine"] and written["train"]["epochs"] == 3.0
    path = tmp_path / "loto.yaml"
    path.write_text("train:\n  pairs: somewhere\n")
    with pytest.raises(ConfigError, match=r"loto.yaml: train.pairs is set by the command"):
        load_config(LotoConfig, path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("lr: 0.1\nlearning_rate: 3\n", "unknown key 'learning_rate'"),
        ("batch_size: many\n", "batch_size should be a valid integer, unable to parse"),
        ("batch_size: 2.5\n", "batch_size should be a valid integer, got a number with a"),
        ("lora: maybe\n", "lora should be a valid boolean, unable to interpret input, got"),
        ("batch_size: 0\n", "batch_size should be greater than or equal to 1, got 0"),
        ("dtype: fp16\n", "dtype should be 'auto', 'bf16' or 'fp32', got 'fp16'"),
        ("lr: -1\n", "lr should be greater than 0, got -1"),
        ("lr: .nan\n", "lr should be a finite number, got nan"),
        ("train:\n  epochs: x\n", "unknown key 'train'"),
        ("- lr\n", "a config file holds a mapping of keys, not a list"),
        ("lr: [1\n", "not YAML at line 2"),
    ],
)
def test_a_bad_file_names_the_file_the_key_and_what_is_wrong(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(TrainConfig, path)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value)


def test_numbers_yaml_reads_as_text_are_read_as_numbers(tmp_path):
    path = tmp_path / "lr.yaml"
    path.write_text("lr: 1e-5\n")  # YAML 1.1 reads this as a string
    assert yaml.safe_load(path.read_text()) == {"lr": "1e-5"}
    assert load_config(TrainConfig, path).lr == 1e-5


def test_nested_configs_are_nested_mappings(tmp_path):
    path = tmp_path / "eval.yaml"
    path.write_text("n: 4\nselector_options:\n  cost_weight: 0.25\n  cost_measure: calls\n")
    config = load_config(EvalConfig, path)
    assert (config.n, config.selector_options) == (4, SelectorOptions(0.9, 0.01, 0.25, "calls"))
    path.write_text("selector_options:\n  weight: 1\n")
    with pytest.raises(ConfigError, match=r"unknown key 'selector_options\.weight'"):
        load_config(EvalConfig, path)


def _capture_train(monkeypatch):
    """`orchrm train` calls this in place of training: it keeps the config and writes
    OUT/config.yaml as training does once its inputs have loaded."""
    seen = []

    def train(config, resume=False, progress=True):
        seen.append(config)
        dump_config(config, Path(config.out) / "config.yaml")
        raise SystemExit(0)

    monkeypatch.setattr(orchrm.training.train, "train", train)
    return seen


def test_train_reads_a_file_the_options_override_it_and_the_run_writes_its_config(
    monkeypatch, tmp_path
):
    seen = _capture_train(monkeypatch)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p").mkdir()
    recipe = tmp_path / "r.yaml"
    recipe.write_text("pairs: p\nout: o\nlr: 2.0e-4\nweight_decay: 0.01\nwarmup_ratio: 0.2\n")
    args = ["train", "--config", str(recipe), "--lr", "3e-4", "--head-lr", "1e-3"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    expected = TrainConfig(
        pairs="p", out="o", lr=3e-4, head_lr=1e-3, weight_decay=0.01, warmup_ratio=0.2
    )
    assert seen == [expected]
    assert load_config(TrainConfig, tmp_path / "o" / "config.yaml") == expected
    # the written file repeats the run
    again = CliRunner().invoke(app, ["train", "--config", str(tmp_path / "o" / "config.yaml")])
    assert again.exit_code == 0, again.output
    assert seen[-1] == expected


def test_a_bad_config_file_is_one_line_and_exit_status_2(tmp_path, orchrm_cli):
    bad = tmp_path / "bad.yaml"
    bad.write_text("pairs: p\nepochs: 0\n")
    done = orchrm_cli("train", "--config", str(bad))
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"error: {bad}: epochs should be greater than 0, got 0"]
    missing = orchrm_cli("train", "--config", str(tmp_path / "none.yaml"))
    assert missing.returncode == 3 and "none.yaml: cannot read the config file" in missing.stderr


def test_the_accelerate_entry_point_is_orchrm_train(monkeypatch, tmp_path):
    """`accelerate launch -m orchrm train ...` runs `orchrm train ...`."""
    import runpy
    import sys

    seen = _capture_train(monkeypatch)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p").mkdir()
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"pairs: p\nout: {tmp_path / 'o'}\nlora_dropout: 0.2\nsave_every: 7\n")
    argv = ["orchrm", "train", "--config", str(recipe), "--num-threads", "2"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit):
        runpy.run_module("orchrm", run_name="__main__")
    expected = TrainConfig(
        pairs="p", out=str(tmp_path / "o"), lora_dropout=0.2, save_every=7, num_threads=2
    )
    assert seen == [expected]
    assert load_config(TrainConfig, tmp_path / "o" / "config.yaml") == expected


def test_every_train_config_field_but_the_free_form_notes_is_an_option():
    shown = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["train", "--help"]).output
    for f in dataclasses.fields(TrainConfig):
        if f.name != "extra" and not is_internal(f):
            assert "--" + f.name.replace("_", "-") in shown, f.name


def test_cross_validate_takes_its_nested_configs_and_writes_them(monkeypatch, tmp_path):
    import orchrm.evaluation.crossval

    seen = []

    def cross_validate(db, config, say):
        seen.append(config)
        return []

    monkeypatch.setattr(orchrm.evaluation.crossval, "cross_validate", cross_validate)
    store = tmp_path / "s.duckdb"
    from orchrm.store.db import Store

    with Store(store):
        pass
    recipe = tmp_path / "loto.yaml"
    recipe.write_text("folds: 2\ntrain:\n  epochs: 2\n  lr: 1.0e-4\nmine:\n  cap_per_task: 4\n")
    out = tmp_path / "loto"
    args = ["cross-validate", "--store", str(store), "--config", str(recipe)]
    args += ["--out", str(out), "--epochs", "5", "--specialized", "a,b", "--max-steps", "3"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    (config,) = seen
    assert (config.folds, config.out) == (2, str(out))
    assert (config.train.epochs, config.train.lr, config.train.max_steps) == (5.0, 1e-4, 3)
    assert (config.mine.cap_per_task, config.mine.specialized) == (4, ("a", "b"))
    assert load_config(LotoConfig, out / "config.yaml") == config


def test_the_memory_plan_reads_a_recipe_and_its_options_override_it():
    import json

    from orchrm.memplan.plan import plan_from_train_config

    recipe = ROOT / "configs" / "demo-rm.yaml"
    runner = CliRunner()
    planned = runner.invoke(app, ["plan-memory", "--config", str(recipe), "--json"])
    assert planned.exit_code == 0, planned.output
    expected = plan_from_train_config(load_config(TrainConfig, recipe)).to_dict()
    assert json.loads(planned.output) == json.loads(json.dumps(expected))
    args = ["plan-memory", "--config", str(recipe), "--max-length", "64", "--json"]
    assert json.loads(runner.invoke(app, args).output)["max_length"] == 64
    bad = runner.invoke(app, ["plan-memory", "--micro-batch-pairs", "0"])
    assert bad.exit_code == 2 and "--micro-batch-pairs" in bad.output

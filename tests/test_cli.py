"""The `orchrm` command, run as a real process the way users run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.samples import DATA, HIGH_DOM


def test_version(orchrm_cli):
    result = orchrm_cli("--version")
    assert result.returncode == 0 and result.stdout.startswith("orchrm ")


def test_parse_prints_the_table_for_the_real_files(orchrm_cli):
    files = sorted(DATA.glob("*.jsonl"))
    if not files:
        pytest.skip(f"{DATA} is absent: the shared data folder is not beside this checkout")
    result = orchrm_cli("parse", *map(str, files))
    assert result.returncode == 0, result.stderr
    total = next(line for line in result.stdout.splitlines() if "total" in line)
    assert [int(x) for x in total.replace("│", " ").split()[1:]] == [84, 53, 0, 31]
    for reason in ("no_agents", "no_final_channel", "empty"):
        assert reason in result.stdout


def test_parse_json_and_details_account_for_every_record(tmp_path, orchrm_cli):
    log = tmp_path / "log.jsonl"
    cyclic = HIGH_DOM.replace("<to>Solve</to>", "<to>Solve</to><from>Solve</from><to>Parse</to>")
    log.write_text(
        "\n".join([json.dumps({"full_response": HIGH_DOM}), json.dumps({"text": cyclic}), "{bad"])
    )
    out = json.loads(orchrm_cli("parse", str(log), "--json").stdout)
    (summary,) = out["files"]
    assert (summary["records"], summary["valid"], summary["invalid"]) == (3, 1, 1)
    assert summary["unparseable_by_reason"] == {"invalid_json": 1}
    assert "cycle" in summary["invalid_by_rule"]
    details = orchrm_cli("parse", str(log), "--details").stdout
    assert f"{log}:2: invalid" in details and f"{log}:3: unparseable invalid_json" in details


def test_parse_missing_file_fails_clearly_and_the_others_are_still_counted(tmp_path, orchrm_cli):
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"full_response": HIGH_DOM}) + "\n")
    result = orchrm_cli("parse", str(tmp_path / "nope.jsonl"), str(log), "--json")
    assert result.returncode == 3 and "no such file" in result.stderr
    out = json.loads(result.stdout)
    assert [(s["path"], s["valid"]) for s in out["files"]] == [(str(log), 1)]
    assert out["unreadable"] == [
        {"path": str(tmp_path / "nope.jsonl"), "error": f"no such file: {tmp_path / 'nope.jsonl'}"}
    ]


def test_every_option_of_every_command_has_a_help_text():
    from typer.main import get_command

    from orchrm.cli import app
    from tests.conftest import every_command

    missing = [
        f"{' '.join(path)} {param.opts[0]}"
        for path, command in every_command(get_command(app))
        for param in command.params
        if param.param_type_name == "option" and not param.hidden and not (param.help or "").strip()
    ]
    assert missing == []


def test_train_options_are_train_config_fields_with_its_defaults(monkeypatch, tmp_path):
    """Options left out keep TrainConfig's defaults; the ones given reach the config."""
    from typer.testing import CliRunner

    import orchrm.training.train
    from orchrm.cli import app
    from orchrm.training.config import TrainConfig

    seen = []

    def train(config, resume):
        seen.append((config, resume))
        raise SystemExit(0)

    monkeypatch.setattr(orchrm.training.train, "train", train)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p").mkdir()  # train refuses a pair path where there is nothing
    args = ["train", "--pairs", "p", "--lr", "0.001", "--no-bf16", "--lora", "--resume"]
    assert CliRunner().invoke(app, args).exit_code == 0
    assert seen == [(TrainConfig(pairs="p", lr=0.001, bf16=False, lora=True), True)]
    shown = CliRunner(env={"COLUMNS": "300"}).invoke(app, ["train", "--help"]).output
    assert "Peak learning rate (AdamW)." in shown and "[default: 5e-05;" in shown


def test_a_user_error_is_one_line_on_stderr_with_exit_status_2(tmp_path, orchrm_cli):
    bad_preset = orchrm_cli("world", "generate", "--preset", "nope", "--out", str(tmp_path))
    assert bad_preset.returncode == 2, bad_preset.stderr
    assert bad_preset.stderr.splitlines() == [
        "error: unknown preset 'nope': choose one of math, search, multihop, science"
    ]
    missing = tmp_path / "no-tasks.jsonl"
    no_file = orchrm_cli("run", "--tasks", str(missing), "--out", str(tmp_path / "run.jsonl"))
    assert no_file.returncode == 3 and "Traceback" not in no_file.stderr
    assert no_file.stderr.splitlines() == [f"error: {missing}: No such file or directory"]


def test_a_bug_keeps_its_traceback_and_exits_1(tmp_path):
    """A library function failing with an internal error is not dressed up as a user
    error: Python's traceback names it, and the exit status is 1."""
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"full_response": HIGH_DOM}) + "\n")
    program = (
        "import sys, orchrm.cli.parse\n"
        "def broken(path):\n"
        "    raise KeyError('internal bookkeeping')\n"
        "orchrm.cli.parse.summarize_file = broken\n"
        "from orchrm.cli import app\n"
        "app(prog_name='orchrm', args=sys.argv[1:])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program, "parse", str(log)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "KeyError: 'internal bookkeeping'" in done.stderr


def test_the_accelerate_entry_point_is_orchrm_train():
    """`python -m orchrm train` (for `accelerate launch`) is `orchrm train`: the
    same options, help and defaults, from TrainConfig's fields."""
    from orchrm.configs import field_help
    from orchrm.training.config import TrainConfig

    done = subprocess.run(
        [sys.executable, "-m", "orchrm", "train", "--help"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: orchrm train [OPTIONS]")
    assert field_help(TrainConfig)["lr"] in " ".join(done.stdout.split())


def test_pairs_mine_options_reach_mine_config(tmp_path, orchrm_cli):
    """`pairs mine` mines what `mine` does with the MineConfig its options spell."""
    from orchrm.store.config import MineConfig
    from orchrm.store.db import Store
    from orchrm.store.pairs import mine

    world = str(tmp_path / "world")
    generated = orchrm_cli(
        "world", "generate", "--num-tasks", "12", "--samples", "4", "--out", world
    )
    assert generated.returncode == 0, generated.stderr
    db = tmp_path / "s.duckdb"
    ingested = orchrm_cli("ingest", "--store", str(db), f"{world}/math.jsonl")
    assert ingested.returncode == 0, ingested.stderr
    args = ["pairs", "mine", "--store", str(db), "--ratio", "1:0:1", "--split", "0.5,0.25,0.25"]
    args += ["--specialized", "specialized", "--base", "base", "--cap", "3", "--json"]
    done = orchrm_cli(*args)
    assert done.returncode == 0, done.stderr
    config = MineConfig(
        dataset="again",
        ratio={"sob": 1, "soo": 0, "coi": 1},
        split=(0.5, 0.25, 0.25),
        specialized=("specialized",),
        base=("base",),
        cap_per_task=3,
    )
    with Store(db) as store:
        expected = mine(store, config)
    assert json.loads(done.stdout)["kept"] == expected.kept and expected.kept["sob"] > 0
    bad = orchrm_cli("pairs", "mine", "--store", str(db), "--ratio", "1:x")
    assert bad.returncode == 2 and "give SoB:SoO:CoI" in bad.stderr


def test_a_store_typo_is_refused_and_a_small_mine_warns_of_an_empty_split(tmp_path, orchrm_cli):
    typo = tmp_path / "typo.duckdb"
    for args in (("pairs", "mine"), ("store", "stats"), ("pairs", "export", "--out", "x")):
        done = orchrm_cli(*args, "--store", str(typo))
        assert done.returncode == 3 and "no store at" in done.stderr, args
        assert not typo.exists()
    done = orchrm_cli("ingest", str(tmp_path / "missing.jsonl"), "--store", str(typo))
    assert done.returncode == 3 and "no such file" in done.stderr
    assert not typo.exists()
    world = str(tmp_path / "world")
    orchrm_cli("world", "generate", "--num-tasks", "4", "--samples", "4", "--out", world)
    db = tmp_path / "s.duckdb"
    assert orchrm_cli("ingest", "--store", str(db), f"{world}/math.jsonl").returncode == 0
    done = orchrm_cli("pairs", "mine", "--store", str(db), "--split", "0.99,0.01,0")
    assert done.returncode == 0, done.stderr
    assert "pairs kept of" in done.stdout and "{" not in done.stdout
    assert "warning: the validation split is empty" in done.stderr
    done = orchrm_cli("pairs", "export", "--store", str(db), "--out", str(tmp_path / "p"))
    assert done.returncode == 0, done.stderr
    assert "no validation file was written" in done.stderr


def test_a_wrong_model_path_says_what_is_there(tmp_path, orchrm_cli):
    from orchrm.rmodel.files import ModelError, model_directory

    (tmp_path / "rm" / "model").mkdir(parents=True)
    (tmp_path / "rm" / "model" / "config.json").write_text("{}")
    assert model_directory(tmp_path / "rm") == tmp_path / "rm" / "model"  # train's OUT
    (tmp_path / "pairs").mkdir()
    (tmp_path / "pairs" / "train.jsonl").write_text("")
    for path, says in (
        (tmp_path / "nope", "no such directory"),
        (tmp_path / "pairs", "it holds train.jsonl"),
        (tmp_path / "pairs" / "train.jsonl", "is a file"),
    ):
        with pytest.raises(ModelError, match=says):
            model_directory(path)
    log = tmp_path / "log.jsonl"
    log.write_text("")
    done = orchrm_cli("score", str(log), "--rm", str(tmp_path / "nope"))
    assert done.returncode == 3 and "no reward model at" in done.stderr
    done = orchrm_cli("train", "--pairs", str(tmp_path / "missing"), "--out", str(tmp_path / "o"))
    assert done.returncode == 3 and "no pairs at" in done.stderr


def test_train_plan_prints_the_plan_without_pairs(orchrm_cli, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(
        '{"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, '
        '"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, '
        '"vocab_size": 128256, "max_position_embeddings": 131072}'
    )
    args = ("train", "--plan", "--backbone", str(config), "--lora", "--max-length", "4096")
    done = orchrm_cli(*args, "--dtype", "bf16", "--batch-size", "1", "--devices", "8")
    assert done.returncode == 0, done.stderr
    assert "7.5" in done.stdout and "ZeRO-3" in done.stdout
    assert orchrm_cli("train").returncode == 2

"""The first hour of a user starting out, at a tiny size: an exit status that says whether the
work was done, one line per error in a file or a pipe, checks of inputs and ports
before anything slow, nothing written by a refused run, help that states the bounds
the checks enforce, and no progress bar from the library (docs/robustness.md#exit-status).

Commands that stop before torch loads run as real processes with their output to pipes
at the default width (80 columns: a message longer than that must still be one line).
Those that load a model run in this process (typer's runner, output captured, not a
terminal). `unloadable` is a model directory whose files pass the cheap checks but that
no loader can load: a command that answers with it has answered before loading.
"""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchrm.cli import app
from orchrm.rmodel.files import METADATA
from tests.conftest import run_orchrm
from tests.samples import HIGH_DOM, tiny_decoder

QUESTION = "What is 6 x 7?"


def run(*args: str, cwd: Path | None = None, process: bool = False) -> subprocess.CompletedProcess:
    """`orchrm ARGS` with stdout and stderr to pipes, no COLUMNS set."""
    return run_orchrm(*args, cwd=cwd, columns=None, process=process)


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.fixture
def unloadable(tmp_path) -> Path:
    """A model directory whose JSON files and weights' header are whole, but that holds
    no model: loading it would fail with another error than the one a test expects."""
    folder = tmp_path / "M"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes((2).to_bytes(8, "little") + b"{}")
    return folder


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """A tiny seeded fp32 Llama reward model whose tokenizer knows the test's words."""
    folder = tiny_decoder(tmp_path_factory.mktemp("rm") / "M", [QUESTION, HIGH_DOM])
    (folder / METADATA).write_text(json.dumps({"max_length": 64}))
    return folder


@pytest.fixture
def plans(tmp_path) -> dict[str, Path]:
    """The same plan without a question in each form `orchrm parse` reads."""
    jsonl, array, text = tmp_path / "plans.jsonl", tmp_path / "plans.json", tmp_path / "plan.txt"
    jsonl.write_text("".join(json.dumps({"full_response": HIGH_DOM}) + "\n" for _ in range(4)))
    array.write_text(json.dumps([{"full_response": HIGH_DOM}, {"full_response": "no plan"}]))
    text.write_text(HIGH_DOM)
    return {"jsonl": jsonl, "array": array, "text": text}


# --------------------------------------------------------------------------- 1. success


def test_score_with_no_record_to_score_says_what_to_add_before_the_model_loads(plans, unloadable):
    done = run("score", str(plans["jsonl"]), "--rm", str(unloadable))
    assert (done.returncode, done.stdout) == (2, "")
    said = lines(done.stderr)
    assert said[-1] == (
        "error: none of the 4 record(s) can be scored (4 no_question); give the question "
        'with --question TEXT, or a text "question" field in each record'
    )
    assert f'{plans["jsonl"]}:1: no_question: the record has no "question" field' in said[1]
    assert not any("no_question: no_question" in line for line in said)  # the reason once
    text = run("score", str(plans["text"]), "--rm", str(unloadable))
    assert text.returncode == 2 and "a harmony text holds no question" in text.stderr
    array = run("score", str(plans["array"]), "--rm", str(unloadable))
    assert array.returncode == 2
    assert f"{plans['array']}[0]: no_question" in array.stderr  # a JSON list's records
    assert f"{plans['array']}[1]: no_orchestration" in array.stderr  # by their index
    empty = plans["text"].with_name("empty.jsonl")
    empty.write_text("\n")
    nothing = run("score", str(empty), "--rm", str(unloadable))
    assert nothing.returncode == 2 and lines(nothing.stderr) == [
        f"error: no record to score in {empty}: give files of records (any form orchrm parse reads)"
    ]


def test_question_scores_a_harmony_text_and_a_json_list_by_index(plans, model):
    runner = CliRunner()
    args = ["--rm", str(model), "--dtype", "fp32", "--question", QUESTION]
    done = runner.invoke(app, ["score", str(plans["text"]), str(plans["array"]), *args])
    assert done.exit_code == 0, done.output
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(Path(r["file"]).name, r.get("line"), r.get("index")) for r in rows] == [
        ("plan.txt", 1, None),
        ("plans.json", None, 0),
        ("plans.json", None, 1),
    ]
    assert [r["score"] is not None for r in rows] == [True, True, False]
    assert rows[2]["reason"] == "no_orchestration"
    assert lines(done.stderr)[0] == "2 of 3 records scored in fp32; 1 no_orchestration"
    assert f"{plans['array']}[1]: no_orchestration: full_response" in done.stderr
    # a record's own question is kept: it scores as without --question
    own = plans["text"].with_name("own.jsonl")
    own.write_text(json.dumps({"question": QUESTION, "full_response": HIGH_DOM}) + "\n")
    other = runner.invoke(app, ["score", str(own), *args[:-1], "something else"])
    assert json.loads(other.stdout)["score"] == rows[0]["score"]


def test_parse_of_files_without_a_record_is_an_error_and_a_missing_file_prints_no_table(
    tmp_path, plans
):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    done = run("parse", str(empty))
    assert (done.returncode, done.stdout) == (2, "")
    assert lines(done.stderr) == [
        f"error: no record in {empty}: the file is empty or holds only blank lines"
    ]
    beside = run("parse", str(empty), str(plans["jsonl"]))
    assert beside.returncode == 0 and lines(beside.stderr) == [
        f"warning: no record in {empty}: the file is empty or holds only blank lines"
    ]
    missing = run("parse", str(tmp_path / "nope.jsonl"))
    assert (missing.returncode, missing.stdout) == (3, "")
    assert lines(missing.stderr) == [
        f"error: no such file: {tmp_path / 'nope.jsonl'}",
        "1 file(s) could not be read",
    ]
    listed = run("parse", str(plans["array"]))
    assert f"{plans['array']}[1]: unparseable no_orchestration: full_response" in listed.stdout


def test_pairs_mine_that_finds_no_pair_exits_2_and_leaves_the_store(tmp_path):
    from orchrm.store.db import Store

    store = tmp_path / "s.duckdb"
    Store(store).close()
    done = run("pairs", "mine", "--store", str(store))
    assert (done.returncode, done.stdout) == (2, "")
    assert lines(done.stderr) == [
        "error: no pair to mine: the store holds no two orchestrations of one task that make "
        "a pair (one correct and one incorrect, or from --specialized and --base "
        "orchestrators); ingest such logs first"
    ]
    with Store(store, read_only=True) as db:
        assert db.counts()["pairs"] == 0


# --------------------------------------------------------------------------- 2. one line


def test_an_error_longer_than_the_terminal_is_one_line_in_a_pipe_and_no_store_is_made(tmp_path):
    from orchrm.jsonl import write_jsonl
    from orchrm.world.generate import generate

    empty, store = tmp_path / "empty.jsonl", tmp_path / "s.duckdb"
    empty.write_text("")
    done = run("ingest", str(empty), "--store", str(store), process=True)  # as users see it
    assert done.returncode == 3
    assert lines(done.stderr) == [
        f"error: cannot detect the format of {empty}: no JSON object in it; give --adapter "
        "(generic needs --map)",
        "1 file(s) not ingested",
    ]
    assert len(lines(done.stderr)[0]) > 80
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.jsonl"]  # no store
    assert "nothing ingested (no store made)" in done.stdout and "s.duckdb" not in done.stdout
    log = tmp_path / "math.jsonl"
    write_jsonl(generate("math", 2, 2, seed=0, progress=False).records, log)
    both = run("ingest", str(empty), str(log), "--store", str(store))
    assert both.returncode == 3 and store.is_file()  # made for the file it could add
    assert f"ingested into {store}" in both.stdout


# --------------------------------------------------------------------------- 3. checks first


def test_score_of_a_missing_file_says_so_before_the_model_loads(tmp_path, unloadable):
    missing = tmp_path / "nope.jsonl"
    done = run("score", str(missing), "--rm", str(unloadable))
    assert (done.returncode, done.stdout) == (3, "")
    assert lines(done.stderr) == [f"error: no such file: {missing}", "1 file(s) could not be read"]


def test_serve_on_a_port_in_use_says_so_in_one_line_before_the_model_loads(unloadable):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run("serve", "--rm", str(unloadable), "--port", str(port))
    assert (done.returncode, done.stdout) == (5, "")
    assert lines(done.stderr) == [
        f"error: cannot serve on 127.0.0.1:{port}: another process is listening on port "
        f"{port}; stop it, or give another --port"
    ]


def test_a_folder_without_config_json_is_exit_3_like_a_missing_model(tmp_path, plans):
    (tmp_path / "empty-model").mkdir()
    for rm, says in ((tmp_path / "empty-model", "it has no config.json"), (tmp_path / "no", "")):
        done = run("score", str(plans["jsonl"]), "--rm", str(rm))
        assert done.returncode == 3 and says in done.stderr
        assert len(lines(done.stderr)) == 1 and lines(done.stderr)[0].startswith("error: ")


# --------------------------------------------------------------------------- 4. nothing left


def test_refused_eval_and_train_write_no_config(tmp_path):
    evaluated = run("eval", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "E"))
    assert evaluated.returncode == 3 and len(lines(evaluated.stderr)) == 1
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    trained = CliRunner().invoke(
        app, ["train", "--pairs", str(empty), "--out", str(tmp_path / "R")]
    )
    assert trained.exit_code == 2, trained.output
    assert "holds no pairs" in trained.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.jsonl"]


def test_train_into_an_earlier_run_is_refused_unless_overwrite(tmp_path, model):
    pairs, out = tmp_path / "pairs.jsonl", tmp_path / "R"
    rows = [
        {"prompt": QUESTION, "chosen": HIGH_DOM, "rejected": "x", "task_id": f"t{i}"}
        for i in range(8)
    ]
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (out / "model").mkdir(parents=True)
    (out / "model" / "config.json").write_text("{}")
    (out / "checkpoints" / "step-99").mkdir(parents=True)
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    args = ["train", "--pairs", str(pairs), "--out", str(out), "--backbone", str(model)]
    refused = run(*args)
    assert (refused.returncode, refused.stdout) == (4, "")
    assert lines(refused.stderr) == [
        f"error: {out} holds a trained model ({out / 'model'}): give --overwrite to train "
        "again into it, --resume to continue its training, or another --out"
    ]
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
    settings = ["--max-steps", "1", "--batch-size", "4", "--max-length", "32"]
    settings += ["--dtype", "fp32", "--validation-share", "0", "--num-threads", "1"]
    done = CliRunner().invoke(app, [*args, *settings, "--overwrite"])
    assert done.exit_code == 0, done.output
    assert "removed 1 checkpoint(s) of an earlier run" in done.stderr
    assert not (out / "checkpoints" / "step-99").exists()
    assert (out / "model" / "model.safetensors").is_file() and (out / "config.yaml").is_file()


# --------------------------------------------------------------------------- 5. help


def test_help_states_the_bounds_the_checks_enforce(tmp_path):
    runner = CliRunner()  # the help and typer's checks, in this process
    shown = " ".join(runner.invoke(app, ["train", "--help"]).stdout.split())
    assert "Peak learning rate (AdamW). [default: 5e-05; x>0.0]" in shown
    assert "(fractions allowed). [default: 1.0; x>0.0]" in shown
    assert "[default: 0.05; 0.0<=x<1.0]" in shown  # --lora-dropout
    for option, value, bound in (("--epochs", "0", "x>0.0"), ("--lora-dropout", "1", "0.0<=x<1.0")):
        done = runner.invoke(app, ["train", option, value])
        assert done.exit_code == 2 and f"{value}.0 is not in the range {bound}\n" in done.output
    assert "/classify and /pooling" in " ".join(
        runner.invoke(app, ["serve", "--help"]).stdout.split()
    )
    refused = run("train", "--lr", "0")
    assert refused.returncode == 2
    assert "Invalid value for '--lr': 0.0 is not in the range x>0.0" in refused.stderr
    typo = run("world", "generate", "--num-task", "3")
    assert typo.returncode == 2
    assert "No such option: --num-task (Possible options: --num-tasks)" in typo.stderr
    recipe = tmp_path / "r.yaml"
    recipe.write_text("epoch: 2\n")
    keyed = run("train", "--config", str(recipe))
    assert keyed.returncode == 2
    assert lines(keyed.stderr)[0].startswith(
        f"error: {recipe}: unknown key 'epoch': did you mean epochs? (known: pairs,"
    )


# --------------------------------------------------------------------------- 6. quiet


@pytest.mark.filterwarnings("ignore:Cannot enable progress bars")  # after an `orchrm` run here
def test_loading_a_model_from_python_prints_no_progress_bar(model, capfd):
    from transformers.utils import logging as hf_logging

    from orchrm.scoring.load import load_scorer

    before = hf_logging.is_progress_bar_enabled()
    hf_logging.enable_progress_bar()  # as in a fresh Python process
    try:
        capfd.readouterr()
        scorer = load_scorer(model, dtype="fp32")
        assert len(scorer.score([(QUESTION, HIGH_DOM)])) == 1
        out, err = capfd.readouterr()
        assert "Loading weights" not in err + out and err == ""
        assert hf_logging.is_progress_bar_enabled()  # as it was
    finally:
        if not before:
            hf_logging.disable_progress_bar()

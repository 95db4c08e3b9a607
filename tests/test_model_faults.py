"""A damaged model, as an interrupted copy or save leaves it, is refused by `orchrm score`
and `orchrm serve` alike in one line that names the file, says what is wrong with it and
what to do, with exit status 3 (docs/robustness.md#exit-status); `serve` refuses before it
binds its port.

Each fault is made for real on a copy of one tiny seeded fp32 model: weights cut short
or emptied with `os.truncate` or removed, a JSON file cut in half, a config replaced by an
error page. The commands run in this process (typer's runner); for weights cut short,
as real processes too.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchrm.cli import app
from orchrm.rmodel.backbone import load_backbone
from orchrm.rmodel.files import DamagedModel
from orchrm.rmodel.tokens import backbone_budget
from orchrm.scoring.local import OrchRM
from orchrm.serve.guard import DrainingServer
from tests.samples import HIGH_DOM, tiny_decoder, tiny_gguf

QUESTION = "What is 6 x 7?"
REMEDY = "copy the model directory again, or re-train it"


def halve(path: Path) -> None:
    """Keep the first half of a file's bytes, as a write cut short does."""
    os.truncate(path, path.stat().st_size // 2)


FAULTS: dict[str, tuple[str, Callable[[Path], object], str]] = {
    "weights cut short": ("model.safetensors", halve, "truncated: it holds "),
    "weights empty": ("model.safetensors", lambda p: os.truncate(p, 0), "empty (0 bytes)"),
    "weights missing": ("model.safetensors", Path.unlink, "missing beside config.json"),
    "orchrm.json half-written": ("orchrm.json", halve, "not valid JSON (Unterminated string"),
    "config.json an error page": (
        "config.json",
        lambda p: p.write_text("<html>404 Not Found</html>\n"),
        "not valid JSON (Expecting value: line 1 column 1)",
    ),
    "tokenizer.json half-written": ("tokenizer.json", halve, "not valid JSON ("),
}
"""Fault: (the file damaged, how, what the error says is wrong)."""


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """A tiny seeded Llama reward model (fp32) with its `orchrm.json`, saved once."""
    folder = tiny_decoder(tmp_path_factory.mktemp("rm") / "model", [QUESTION, HIGH_DOM])
    (folder / "orchrm.json").write_text(json.dumps({"max_length": 64}, indent=2))
    return folder


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("records") / "records.jsonl"
    path.write_text(json.dumps({"question": QUESTION, "full_response": HIGH_DOM}) + "\n")
    return path


@pytest.fixture(params=FAULTS)
def fault(request, model, tmp_path) -> tuple[Path, Path, str]:
    """A copy of the model with one fault: (its folder, the damaged file, the problem)."""
    name, damage, problem = FAULTS[request.param]
    folder = Path(shutil.copytree(model, tmp_path / "model"))
    damage(folder / name)
    return folder, folder / name, problem


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def one_error_line(stderr: str, path: Path, problem: str) -> None:
    """`stderr` is one line: `error: PATH: PROBLEM...; REMEDY`."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"error: {path}: {problem}"), stderr
    assert lines[0].endswith(REMEDY), stderr


def test_the_whole_model_loads_and_scores(model, records):
    rm = OrchRM.load(model, device="cpu", dtype="fp32")
    assert len(rm.score_texts(["a plan"])) == 1
    done = CliRunner().invoke(app, ["score", str(records), "--rm", str(model), "--dtype", "fp32"])
    assert done.exit_code == 0, done.output
    assert isinstance(json.loads(done.stdout)["score"], float)


def test_the_loader_names_the_damaged_file(fault):
    folder, path, problem = fault
    with pytest.raises(DamagedModel) as err:
        OrchRM.load(folder, device="cpu", dtype="fp32")
    assert str(err.value).startswith(f"{path}: {problem}") and "\n" not in str(err.value)
    assert err.value.exit_code == 3


def test_score_and_serve_refuse_a_damaged_model_in_one_line(fault, records, monkeypatch):
    folder, path, problem = fault

    def bind(self, *args, **kwargs):
        raise AssertionError("serve bound its port with a damaged model")

    monkeypatch.setattr(DrainingServer, "run", bind)
    runner = CliRunner(env={"COLUMNS": "200"})
    score = runner.invoke(app, ["score", str(records), "--rm", str(folder), "--dtype", "fp32"])
    serve = ["serve", "--rm", str(folder), "--port", str(free_port()), "--dtype", "fp32"]
    served = runner.invoke(app, serve)
    for done in (score, served):
        assert done.exit_code == 3, done.output
        assert done.stdout == ""
        one_error_line(done.stderr, path, problem)


def test_a_real_process_refuses_cut_short_weights(model, records, tmp_path, orchrm_cli):
    folder = Path(shutil.copytree(model, tmp_path / "model"))
    halve(folder / "model.safetensors")
    problem = FAULTS["weights cut short"][2]
    score = orchrm_cli("score", str(records), "--rm", str(folder), "--dtype", "fp32")
    serve = ("serve", "--rm", str(folder), "--port", str(free_port()), "--dtype", "fp32")
    served = orchrm_cli(*serve, timeout=120)
    for done in (score, served):
        assert done.returncode == 3 and "Traceback" not in done.stderr, done.stderr
        one_error_line(done.stderr, folder / "model.safetensors", problem)


def test_a_missing_shard_of_a_sharded_model_is_named(model, tmp_path):
    import torch

    original, tokenizer = load_backbone(str(model), dtype=torch.float32)
    folder = tmp_path / "sharded"
    original.save_pretrained(folder, max_shard_size="40KB")
    tokenizer.save_pretrained(folder)
    shards = sorted(folder.glob("model-*.safetensors"))
    index = folder / "model.safetensors.index.json"
    assert len(shards) > 1 and index.is_file()
    assert OrchRM.load(folder, device="cpu", dtype="fp32").score_texts(["a plan"])
    shards[-1].unlink()
    with pytest.raises(DamagedModel) as err:
        OrchRM.load(folder, device="cpu", dtype="fp32")
    assert str(err.value).startswith(f"{shards[-1]}: missing though {index.name} lists it")


def test_a_gguf_backbone_cut_short_is_named(tmp_path):
    path = tiny_gguf(tmp_path / "tiny.gguf", "llama", rows=40)
    for keep, problem in ((path.stat().st_size - 100, "truncated or damaged"), (0, "empty")):
        os.truncate(path, keep)
        for load in (lambda: load_backbone(str(path)), lambda: backbone_budget(str(path), 64)):
            with pytest.raises(DamagedModel) as err:
                load()
            message = str(err.value)
            assert message.startswith(f"{path}: {problem}") and "\n" not in message
            assert message.endswith("copy or download the GGUF file again")

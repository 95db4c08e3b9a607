"""Training's outputs when the disk fails them, each fault made as it happens for real
where an unprivileged test can: a file-size limit (`RLIMIT_FSIZE`: the kernel refuses a
write past it with EFBIG, as a full disk refuses with ENOSPC), writes into /dev/full
(ENOSPC from the kernel), safetensors' own disk-full error where neither reaches its
writer, and kills between the steps of a model's replacement. Also: what a saved model
says of an unfinished run, the summary's figures, and `--resume` with nothing to resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors import SafetensorError
from transformers import AutoModelForSequenceClassification, AutoTokenizer
from typer.testing import CliRunner

import orchrm.training.build as build
import orchrm.training.output as output
import orchrm.training.train as rm_train
from orchrm.cli import app
from orchrm.cli.rm import validation_line
from orchrm.errors import OutputError
from orchrm.training.checkpoint import (
    NoCheckpoint,
    TrainState,
    checkpoint_bytes,
    save_checkpoint,
)
from orchrm.training.summary import TrainSummary
from tests.samples import tiny_train_config, world_math_pairs

resource = pytest.importorskip("resource")  # POSIX


@contextmanager
def file_size_limit(limit: int):
    """Writes past `limit` bytes of a file fail with EFBIG (SIGXFSZ ignored) in this
    process until the block ends."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(pairs, backbone, records): world math pairs and a tiny decoder that knows them."""
    return world_math_pairs(tmp_path_factory.mktemp("faults"))


@pytest.fixture()
def saved(world, tmp_path):
    """(model, tokenizer, OUT/model): the tiny backbone saved once as a model."""
    _, backbone, _ = world
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(backbone, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(backbone)
    out = build.save_model(model, tokenizer, tmp_path / "rm" / "model", {"max_length": 64})
    return model, tokenizer, out


# -- a full disk ---------------------------------------------------------------------------


def test_a_model_over_the_file_size_limit_is_one_line_and_the_model_before_stays(saved):
    model, tokenizer, out = saved
    before = files(out)
    with torch.no_grad():
        model.score.weight.add_(1.0)
    with pytest.raises(OutputError) as caught, file_size_limit(len(before["config.json"]) * 8):
        build.save_model(model, tokenizer, out, {"max_length": 64})
    assert caught.value.exit_code == 4
    assert str(caught.value) == (
        f"cannot write the model {out}: File too large: the file is over the size its disk "
        "or `ulimit -f` allows: raise the limit or give another --out"
    )
    assert files(out) == before and os.listdir(out.parent) == ["model"]  # no debris
    AutoModelForSequenceClassification.from_pretrained(out)


def test_safetensors_disk_full_error_is_one_line_and_the_model_before_stays(saved, monkeypatch):
    """safetensors' exact text on a full disk (its writer replaces a file, so /dev/full
    cannot stand in for it)."""
    model, tokenizer, out = saved
    before = files(out)

    def full(*args, **kwargs):
        raise SafetensorError(
            "Error while serializing: I/O error: No space left on device (os error 28)"
        )

    monkeypatch.setattr("transformers.modeling_utils.safe_save_file", full)
    with pytest.raises(OutputError) as caught:
        build.save_model(model, tokenizer, out, {"max_length": 64})
    assert str(caught.value) == (
        f"cannot write the model {out}: No space left on device: free space on its disk or "
        "give another --out"
    )
    assert files(out) == before and os.listdir(out.parent) == ["model"]


def _training(width: int = 64):
    torch.manual_seed(0)
    model = torch.nn.Linear(width, width)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    model(torch.ones(2, width)).sum().backward()
    optimizer.step()
    return model, optimizer, scheduler


@pytest.mark.parametrize(
    "limit", [8 * 1024, 24 * 1024], ids=["weights over it", "optimizer state over it"]
)
def test_a_checkpoint_over_the_file_size_limit_is_one_line_and_leaves_the_one_before(
    tmp_path, limit
):
    model, optimizer, scheduler = _training()  # weights 16 KiB, optimizer state 32 KiB
    save_checkpoint(tmp_path, model, optimizer, scheduler, state=TrainState(step=1), keep=5)
    before = files(tmp_path / "checkpoints" / "step-1")
    with pytest.raises(OutputError) as caught, file_size_limit(limit):
        save_checkpoint(tmp_path, model, optimizer, scheduler, state=TrainState(step=2), keep=5)
    where = tmp_path / "checkpoints" / "step-2"
    assert str(caught.value).startswith(f"cannot write checkpoint {where}: File too large: ")
    assert os.listdir(tmp_path / "checkpoints") == ["step-1"]
    assert files(tmp_path / "checkpoints" / "step-1") == before


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_a_checkpoint_on_a_full_disk_is_one_line(tmp_path, monkeypatch):
    """The optimizer state written into /dev/full: the kernel's own ENOSPC."""
    model, optimizer, scheduler = _training()
    real = tempfile.mkdtemp

    def beside_a_full_disk(**kwargs):
        folder = real(**kwargs)
        os.symlink("/dev/full", os.path.join(folder, "optimizer.pt"))
        return folder

    monkeypatch.setattr(tempfile, "mkdtemp", beside_a_full_disk)
    with pytest.raises(OutputError) as caught:
        save_checkpoint(tmp_path, model, optimizer, scheduler, state=TrainState(step=3), keep=5)
    assert str(caught.value) == (
        f"cannot write checkpoint {tmp_path / 'checkpoints' / 'step-3'}: No space left on "
        "device: free space on its disk or give another --out"
    )
    assert os.listdir(tmp_path / "checkpoints") == []


def test_the_room_a_checkpoint_takes_is_known_before_the_first(tmp_path):
    model, optimizer, scheduler = _training(256)
    expected = checkpoint_bytes(tmp_path, model, optimizer)
    saved = save_checkpoint(tmp_path, model, optimizer, scheduler, state=TrainState(), keep=2)
    taken = checkpoint_bytes(tmp_path, model, optimizer)
    assert taken == sum(p.stat().st_size for p in saved.iterdir())
    assert 0.95 < expected / taken <= 1.0


def test_training_stops_before_its_first_step_when_a_checkpoint_will_not_fit(
    world, tmp_path, monkeypatch
):
    pairs, backbone, _ = world
    steps = []
    real_step = rm_train._train_step
    monkeypatch.setattr(rm_train, "_train_step", lambda *a: steps.append(1) or real_step(*a))
    tiny = SimpleNamespace(total=2**20, used=2**20 - 4096, free=4096)
    monkeypatch.setattr(output.shutil, "disk_usage", lambda path: tiny)
    with pytest.raises(OutputError, match=r"^not enough room for a checkpoint and the model in "):
        rm_train.train(tiny_train_config(pairs, tmp_path / "rm", backbone), progress=False)
    assert not steps and not (tmp_path / "rm" / "model").exists()


def test_a_full_disk_in_train_is_one_line_with_exit_status_4(world, tmp_path):
    pairs, backbone, _ = world
    out = tmp_path / "rm"
    args = ["train", "--pairs", str(pairs), "--out", str(out), "--backbone", str(backbone)]
    args += ["--max-steps", "2", "--eval-every", "2", "--batch-size", "8", "--max-length", "128"]
    args += ["--dtype", "fp32", "--num-threads", "2"]
    with file_size_limit(64 * 1024):
        done = CliRunner(env={"COLUMNS": "300"}).invoke(app, args)
    assert done.exit_code == 4, done.output
    # (the loading bars above it: transformers was imported before the command quietens it)
    assert "Traceback" not in done.stderr and done.stderr.splitlines()[-1] == (
        f"error: cannot write the model {out / 'model'}: File too large: the file is over the "
        "size its disk or `ulimit -f` allows: raise the limit or give another --out"
    )
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]


def test_a_calibration_that_cannot_be_written_is_one_line_and_keeps_the_metadata(world, saved):
    from orchrm.calibration.methods import calibrate_model_dir

    _, _, records = world
    _, _, out = saved
    before = files(out)
    with pytest.raises(OutputError) as caught, file_size_limit(256):
        calibrate_model_dir(out, records, "platt")
    assert str(caught.value).startswith(f"cannot write {out / 'orchrm.json'}: File too large")
    assert files(out) == before


# -- replacing a model ---------------------------------------------------------------------

_KILLED_AT = """
import os, sys, shutil
from pathlib import Path
import orchrm.training.output as output

out, new, kill_at, exchange = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
calls = 0

def killing(step):
    def run(*args, **kwargs):
        global calls
        calls += 1
        if calls == kill_at:
            os._exit(9)
        return step(*args, **kwargs)
    return run

if exchange == "no":
    output._exchange = lambda a, b: False
output._exchange = killing(output._exchange)
output._remove = killing(output._remove)
output.os.rename = killing(os.rename)
output.replace_folder(new, out)
"""
FILES = ("model.safetensors", "config.json", "orchrm.json")


def _model(folder: Path, version: str) -> Path:
    folder.mkdir(parents=True)
    for name in FILES:
        (folder / name).write_text(version)
    return folder


def _version(folder: Path) -> str:
    """ "old" or "new" when `folder` holds one whole model of that version."""
    found = {(folder / name).read_text() for name in FILES}
    assert sorted(os.listdir(folder)) == sorted(FILES) and len(found) == 1, found
    return found.pop()


@pytest.mark.parametrize("exchange", ["yes", "no"], ids=["rename exchange", "renames"])
def test_a_model_replaced_with_a_kill_at_any_step_is_the_old_or_the_new(tmp_path, exchange):
    """Killed (os._exit) before each step of the replacement and after the last: with an
    exchange OUT/model is always one whole model; with two renames it may be aside
    between them, and the next start puts it back."""
    seen = []
    for kill_at in range(1, 6):
        run = tmp_path / str(kill_at)
        out = _model(run / "model", "old")
        new = _model(run / ".model.tmp", "new")
        done = subprocess.run(
            [sys.executable, "-c", _KILLED_AT, str(out), str(new), str(kill_at), exchange],
            timeout=60,
        )
        assert done.returncode in (0, 9)
        if exchange == "yes" or out.exists():
            seen.append(_version(out))
        notes = []
        output.settle_folder(out, notes.append)
        version = _version(out)
        assert os.listdir(run) == ["model"]  # nothing left beside it
        seen.append(version)
        if done.returncode == 0:
            assert version == "new"
    assert {"old", "new"} == set(seen)


def test_a_failed_swap_puts_the_model_before_back(saved, monkeypatch):
    model, tokenizer, out = saved
    before = files(out)
    renames = []

    def rename(a, b):
        renames.append((a, b))
        if len(renames) == 2:  # the new model into place, the old one already aside
            raise OSError(5, "Input/output error")
        os.replace(a, b)

    monkeypatch.setattr(output, "_exchange", lambda a, b: False)
    monkeypatch.setattr(output.os, "rename", rename)
    with pytest.raises(OutputError, match="Input/output error"):
        build.save_model(model, tokenizer, out, {"max_length": 64})
    monkeypatch.undo()
    assert files(out) == before and os.listdir(out.parent) == ["model"]


# -- an unfinished run, the summary, --resume ----------------------------------------------


class Killed(BaseException):
    """Stands for a kill: nothing of the run's own clean-up runs after it."""


def test_an_unfinished_run_says_so_and_its_resume_says_where_it_continues(
    world, tmp_path, monkeypatch, capsys
):
    pairs, backbone, _ = world
    config = tiny_train_config(pairs, tmp_path / "rm", backbone)  # 4 steps, validated every 2
    real_save = rm_train.save_checkpoint

    def then_killed(out, *args, state, **kwargs):
        real_save(out, *args, state=state, **kwargs)
        if state.step == 2:
            raise Killed

    monkeypatch.setattr(rm_train, "save_checkpoint", then_killed)
    with pytest.raises(Killed):
        rm_train.train(config, progress=False)
    model = tmp_path / "rm" / "model"
    meta = json.loads((model / "orchrm.json").read_text())
    assert (meta["finished"], meta["step"], meta["steps"], meta["planned_steps"]) == (
        False,
        2,
        2,
        4,
    )
    assert meta["resumed_from_step"] is None and "training" not in meta
    card = (model / "README.md").read_text()
    assert "**Unfinished run**: this run stopped at step 2 of 4" in card
    assert "| run finished | no |" in card and "| steps done | 2 |" in card

    monkeypatch.undo()
    capsys.readouterr()
    summary = rm_train.train(config, resume=True, progress=False)
    checkpoint = tmp_path / "rm" / "checkpoints" / "step-2"
    assert f"orchrm train: resuming at step 2 of 4 from {checkpoint}\n" in capsys.readouterr().err
    meta = json.loads((model / "orchrm.json").read_text())
    assert (meta["finished"], meta["steps"], meta["planned_steps"]) == (True, 4, 4)
    assert meta["resumed_from_step"] == 2 == summary.resumed_from_step
    card = (model / "README.md").read_text()
    assert "Unfinished" not in card and "| run finished | yes |" in card
    assert "| steps planned | 4 |" in card and "| steps done | 4 |" in card
    assert "| resumed from step | 2 |" in card
    saved_at = summary.model_evaluation()
    assert saved_at["step"] == meta["step"]
    assert saved_at["accuracy_by_kind"] == meta["metrics"]["accuracy_by_kind"]


def test_a_model_without_the_run_keys_still_gets_its_card():
    from orchrm.rmodel.card import model_card

    card = model_card({"step": 3, "training": {"steps": 3}})
    assert "Unfinished" not in card and "| steps done | 3 |" in card
    assert "run finished" not in card and "steps planned" not in card


def test_the_summary_gives_the_saved_models_own_figures():
    def evaluation(step, accuracy, coi, sob):
        return {"step": step, "accuracy": accuracy, "accuracy_by_kind": {"coi": coi, "sob": sob}}

    history = [
        evaluation(20, 0.5, 0.52, 0.47),
        evaluation(40, 0.575, 0.581, 0.559),
        evaluation(60, 0.575, 0.59, 0.55),  # as good, not better: not saved
        evaluation(80, 0.55, 0.558, 0.529),
    ]
    fields = {f: 0 for f in TrainSummary.__dataclass_fields__}
    summary = TrainSummary(**{**fields, "best_validation_accuracy": 0.575, "history": history})
    assert summary.model_evaluation() is history[1]
    assert validation_line(summary) == (
        "best validation accuracy 0.575 at step 40 (by kind: coi 0.581, sob 0.559)"
    )


def test_resume_with_no_checkpoint_is_an_error_naming_the_folder(world, tmp_path, monkeypatch):
    pairs, backbone, _ = world
    monkeypatch.setattr(rm_train, "load_for_training", lambda *a, **k: pytest.fail("loaded"))
    config = tiny_train_config(pairs, tmp_path / "rm", backbone)
    with pytest.raises(NoCheckpoint) as caught:
        rm_train.train(config, resume=True, progress=False)
    assert caught.value.exit_code == 3
    args = ["train", "--pairs", str(pairs), "--out", str(tmp_path / "rm"), "--resume"]
    done = CliRunner(env={"COLUMNS": "300"}).invoke(app, args)
    assert done.exit_code == 3
    assert done.stderr.splitlines() == [
        f"error: nothing to resume in {tmp_path / 'rm'}: no checkpoint in "
        f"{tmp_path / 'rm' / 'checkpoints'}; train without --resume to start at step 0"
    ]

"""What orchrm writes, as another account and the shell see it: every file and folder
follows the process umask (atomic writes included), and an output that cannot be
written is named as the user gave it, never as the temporary file beside it."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest
import torch

from orchrm.configs import dump_config
from orchrm.errors import InputError, OutputError
from orchrm.jsonl import atomic_file, process_umask, write_jsonl
from orchrm.store.config import MineConfig
from orchrm.training.build import save_model
from orchrm.training.checkpoint import TrainState, save_checkpoint
from orchrm.training.data import load_splits
from tests.conftest import run_orchrm

UMASKS = (0o022, 0o077)


@pytest.fixture(params=UMASKS, ids=lambda m: f"umask{m:03o}")
def umask(request):
    """Run the test under this process umask, restored after."""
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def assert_follows(umask: int, *paths: Path) -> None:
    """Files are 0o666 less the umask, folders 0o777 less it, everything under them too."""
    for top in paths:
        for path in [top, *(top.rglob("*") if top.is_dir() else [])]:
            want = (0o777 if path.is_dir() else 0o666) & ~umask
            assert mode(path) == want, f"{path}: {mode(path):o}, want {want:o}"


def test_the_umask_is_read_without_changing_it(umask):
    assert process_umask() == umask
    assert os.umask(umask) == umask  # still set as it was


def test_atomic_writes_follow_the_umask(tmp_path, umask):
    write_jsonl([{"a": 1}], tmp_path / "scores.jsonl")
    with atomic_file(tmp_path / "deep" / "x.parquet", "wb") as f:
        f.write(b"PAR1")
    dump_config(MineConfig(), tmp_path / "config.yaml")
    assert_follows(umask, tmp_path / "scores.jsonl", tmp_path / "deep", tmp_path / "config.yaml")
    assert sorted(p.name for p in tmp_path.rglob("*")) == [
        "config.yaml",
        "deep",
        "scores.jsonl",
        "x.parquet",
    ]


def test_a_calibration_follows_the_umask(tmp_path, umask):
    from orchrm.calibration.methods import fit_calibration, save_calibration

    fitted = fit_calibration([0.1, 0.4, 0.6, 0.9], [False, False, True, True], "isotonic")
    assert_follows(umask, save_calibration(fitted, tmp_path / "calibration.json"))


def test_rewriting_a_file_keeps_its_mode(tmp_path, umask):
    path = tmp_path / "shared.jsonl"
    path.write_text("")
    path.chmod(0o640)
    write_jsonl([{"a": 1}], path)
    assert mode(path) == 0o640


class _Saves:
    """Stands in for a model or tokenizer: `save_pretrained` writes one file."""

    def __init__(self, name: str):
        self.name = name

    def save_pretrained(self, folder, **_):
        (Path(folder) / self.name).write_text("{}")


def test_a_saved_model_and_checkpoint_follow_the_umask(tmp_path, umask):
    out = save_model(_Saves("config.json"), _Saves("tokenizer.json"), tmp_path / "rm" / "model", {})
    assert_follows(umask, tmp_path / "rm")
    assert {"config.json", "orchrm.json", "tokenizer.json"} <= {p.name for p in out.iterdir()}
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    saved = save_checkpoint(
        tmp_path / "run", model, optimizer, scheduler, state=TrainState(step=1), keep=2
    )
    assert saved.name == "step-1"
    assert_follows(umask, tmp_path / "run")


def test_world_logs_and_exported_pairs_follow_the_umask(tmp_path, umask):
    """The quickstart's first outputs, through the command, under the process umask."""

    def run(*args):
        done = run_orchrm(*args, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return done

    run("world", "generate", "--num-tasks", "8", "--samples", "4", "--out", "world")
    run("ingest", "--store", "s.duckdb", "world/math.jsonl")
    run("pairs", "mine", "--store", "s.duckdb")
    run("pairs", "export", "--store", "s.duckdb", "--out", "pairs")
    run("pairs", "export", "--store", "s.duckdb", "--out", "pq", "--format", "parquet")
    assert (tmp_path / "pairs" / "train.jsonl").exists()
    assert (tmp_path / "pq" / "train.parquet").exists()
    assert_follows(umask, tmp_path / "world", tmp_path / "pairs", tmp_path / "pq")


def test_an_output_that_is_a_folder_is_named_as_given(tmp_path):
    with pytest.raises(OutputError) as caught:
        write_jsonl([{"a": 1}], tmp_path)
    assert str(caught.value) == f"{tmp_path} is a folder: give the path of a file to write"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_folder_is_named_as_given(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(OutputError) as caught:
            write_jsonl([{"a": 1}], folder / "s.jsonl")
    finally:
        folder.chmod(0o755)
    assert str(caught.value) == (
        f"cannot write {folder / 's.jsonl'}: Permission denied: give a path in a writable folder"
    )


def test_a_failed_write_names_the_output_and_leaves_nothing(tmp_path, monkeypatch):
    """A full disk (ENOSPC while writing) is said of the user's path; no temporary file
    is left beside it."""

    def full(*_):
        raise OSError(28, "No space left on device")

    with pytest.raises(OutputError) as caught, atomic_file(tmp_path / "s.jsonl") as f:
        monkeypatch.setattr(f, "write", full)
        f.write("x")
    assert str(caught.value) == (
        f"cannot write {tmp_path / 's.jsonl'}: No space left on device: free space or give "
        "another disk"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_file_where_the_folder_goes_is_named(tmp_path):
    (tmp_path / "a").write_text("")
    with pytest.raises(OutputError, match="a is a file, where a folder must be"):
        write_jsonl([], tmp_path / "a" / "b.jsonl")


# --------------------------------------------------------------------------- messages


def test_score_out_a_folder_names_it_before_any_model_loads(tmp_path, orchrm_cli):
    log = tmp_path / "log.jsonl"
    log.write_text("")
    done = orchrm_cli("score", str(log), "--rm", str(tmp_path / "no-model"), "--out", str(tmp_path))
    assert (done.returncode, done.stderr) == (
        4,
        f"error: {tmp_path} is a folder: give the path of a file to write\n",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.jsonl"]


def test_train_on_a_file_without_pairs_says_so(tmp_path, orchrm_cli):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    done = orchrm_cli("train", "--pairs", str(empty), "--out", str(tmp_path / "rm"))
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"error: {empty} holds no pairs: give a file of prompt/chosen/rejected records "
        "(`orchrm pairs export` writes them from mined pairs)"
    ]
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "train.jsonl").write_text("\n")
    blank = re.escape(str(folder / "train.jsonl"))
    with pytest.raises(InputError, match=f"{blank} holds no pairs"):
        load_splits(folder)  # the same error, from an export folder


def test_one_exit_status_per_kind_across_commands(tmp_path, orchrm_cli):
    """A missing input is 3 in every command that reads one, a bad setting 2: the table
    of docs/robustness.md#exit-status, whose statuses are the command's own."""
    import re

    from orchrm.cli.console import BUSY, UNREADABLE, UNWRITABLE, USAGE
    from orchrm.errors import Busy

    missing = str(tmp_path / "absent.jsonl")
    for args in (
        ("parse", missing),
        ("score", missing, "--rm", str(tmp_path / "no-model"), "--dtype", "fp32"),
        ("ingest", missing, "--store", str(tmp_path / "s.duckdb")),
        ("train", "--pairs", missing, "--out", str(tmp_path / "rm")),
        ("view", missing, "--out", str(tmp_path / "view")),
        ("pairs", "mine", "--store", str(tmp_path / "none.duckdb")),
        ("train", "--config", str(tmp_path / "none.yaml")),
    ):
        done = orchrm_cli(*args)
        assert done.returncode == UNREADABLE, (args, done.stderr)
        assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) <= 2, args
    bad = orchrm_cli("world", "generate", "--preset", "nope", "--out", str(tmp_path / "w"))
    assert bad.returncode == USAGE
    table = (Path(__file__).parents[1] / "docs" / "robustness.md").read_text()
    section = table.split("## Exit status", 1)[1].split("\n## ", 1)[0]
    statuses = [int(s) for s in re.findall(r"^\| (\d) \|", section, re.M)]
    assert statuses == [0, 1, USAGE, UNREADABLE, UNWRITABLE, BUSY] and Busy.exit_code == BUSY

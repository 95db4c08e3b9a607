"""Resumable checkpoints of reward-model training: OUT/checkpoints/step-N folders.

Each holds the trainable weights (`model.safetensors`), the optimizer state
(`optimizer.pt`, read back with `weights_only`), the scheduler (`scheduler.json`) and the
trainer state (`state.json`). A checkpoint is written to a hidden temporary folder,
flushed to disk and renamed into place, so a kill leaves the whole checkpoint or a
temporary folder, which the next start removes; a write that fails (a full disk, no
permission) is an `OutputError` naming the checkpoint, and nothing of it is left. The
room the next checkpoint takes is known before it is written (`checkpoint_bytes`), and
a run stops before an interval whose saves would not fit (`require_room`).
Resuming needs a checkpoint (`require_checkpoint`) and reads the newest checkpoint
that reads back whole and matches the model; every folder passed over is named with
what is wrong with it, and no folder in OUT/checkpoints can stop a resume.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch
from accelerate.utils import broadcast_object_list
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from orchrm.errors import MissingInput, OutputError
from orchrm.jsonl import follow_umask_tree, printable
from orchrm.rmodel.files import ModelError
from orchrm.training.build import model_bytes
from orchrm.training.output import (
    CHECKPOINT_NAME,
    RecordedWrites,
    folder_bytes,
    replace_folder,
    room_problem,
    writing,
)

FILES = ("model.safetensors", "optimizer.pt", "scheduler.json", "state.json")
"""What a checkpoint folder holds."""
_UNFINISHED = (".step-", ".replaced-step-")
"""Prefixes of the temporary folders a save writes (a replaced checkpoint's too), and of
a replaced checkpoint of earlier versions."""
_READ_ERRORS = (
    OSError,
    ValueError,
    RuntimeError,
    EOFError,
    SafetensorError,
    pickle.UnpicklingError,
)
"""What reading a damaged file raises: truncation, garbage, a pickle that is not plain
tensors, JSON nested too deep (RecursionError is a RuntimeError)."""


class CheckpointError(ModelError):
    """A checkpoint folder cannot be resumed from (the message says which and why)."""


class NoCheckpoint(CheckpointError, MissingInput):
    """A resume asked for where OUT holds no checkpoint (exit status 3, as any missing
    input)."""


@dataclass
class TrainState:
    """Where training is: saved with every checkpoint, so a run can resume exactly."""

    step: int = 0
    """Optimizer steps done."""
    epoch: int = 0
    micro: int = 0
    """Forward passes done in the current epoch (per process)."""
    best_accuracy: float = -1.0
    evals_since_best: int = 0
    history: list[dict] = field(default_factory=list)
    pairs_seen: int = 0
    """Pairs this process trained on (the summary sums all processes)."""
    train_seconds: float = 0.0


@dataclass
class Checkpoint:
    """A checkpoint read into memory and checked against the model and optimizer: applying
    it cannot fail halfway."""

    path: Path
    weights: dict[str, torch.Tensor]
    optimizer: dict
    scheduler: dict
    state: TrainState


def _reason(err: BaseException) -> str:
    """The first sentence of an error, or its type when it has no message."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return text.split(". ")[0] if text else type(err).__name__


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_unfinished(out: Path, say: Callable[[str], None]) -> list[Path]:
    """Delete what interrupted saves left in OUT/checkpoints (hidden temporary folders),
    saying so in one line; returns what was removed."""
    folder = Path(out) / "checkpoints"
    if not folder.is_dir():
        return []
    left = sorted(p for p in folder.iterdir() if p.name.startswith(_UNFINISHED))
    for path in left:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    if left:
        names = ", ".join(p.name for p in left)
        say(f"removed {len(left)} unfinished checkpoint folder(s) in {folder}: {names}")
    return left


def checkpoint_folders(out: Path, say: Callable[[str], None] | None = None) -> list[Path]:
    """OUT/checkpoints/step-N folders, oldest first; anything else there is passed
    over (with a note to `say`, hidden entries silently)."""
    folder = Path(out) / "checkpoints"
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.iterdir()):
        if CHECKPOINT_NAME.fullmatch(path.name) and path.is_dir():
            found.append(path)
        elif say is not None and not path.name.startswith("."):
            say(f"ignoring {path}: not a checkpoint (checkpoints are step-N folders)")
    return sorted(found, key=lambda p: int(p.name.split("-")[1]))


def remove_checkpoints(out: Path, say: Callable[[str], None]) -> list[Path]:
    """Delete the step-N folders of OUT/checkpoints for a run that starts at step 0, so
    a later resume never takes an earlier run's checkpoint for this run's; said in one
    line. Other entries stay."""
    found = checkpoint_folders(out)
    for path in found:
        shutil.rmtree(path)
    if found:
        where = printable(Path(out) / "checkpoints")
        say(f"removed {len(found)} checkpoint(s) of an earlier run in {where}: starting at step 0")
    return found


def require_checkpoint(out: Path) -> None:
    """Raise `NoCheckpoint` when OUT/checkpoints holds no step-N folder to resume from."""
    if not checkpoint_folders(out):
        folder = Path(out) / "checkpoints"
        raise NoCheckpoint(
            f"nothing to resume in {printable(out)}: no checkpoint in {printable(folder)}; "
            "train without --resume to start at step 0"
        )


def checkpoint_bytes(out: Path, model, optimizer) -> int:
    """The bytes the next checkpoint under OUT takes: the newest one's on disk, or,
    before the first, the weights plus the optimizer's two moments (AdamW's) per
    trained parameter."""
    found = checkpoint_folders(out)
    if found:
        return folder_bytes(found[-1])
    weights = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    trained = [p for group in optimizer.param_groups for p in group["params"]]
    return weights + sum(2 * p.numel() * p.element_size() for p in trained)


def require_room(out: Path, model, optimizer, *, checkpoint: bool, main: bool) -> None:
    """Stop every process, before the steps of a checkpoint interval, when the disk of
    OUT has no room for the model they may save (and, with `checkpoint`, the checkpoint):
    the main process measures, every process raises the same `OutputError`."""
    problem = None
    if main:
        needed = model_bytes(model, out / "model")
        what = "the model"
        if checkpoint:
            needed += checkpoint_bytes(out, model, optimizer)
            what = "a checkpoint and the model"
        problem = room_problem(out, needed, what)
    shared = [problem]
    broadcast_object_list(shared)
    if shared[0] is not None:
        raise OutputError(shared[0])


def save_checkpoint(
    out: Path, model, optimizer, scheduler, *, state: TrainState, keep: int
) -> Path:
    """Write OUT/checkpoints/step-N atomically (temporary folder, fsync, one rename or
    exchange), then delete all but the `keep` newest checkpoints up to this step. A
    write that fails is an `OutputError` naming OUT/checkpoints/step-N; the checkpoints
    before it stay as they were."""
    folder = Path(out) / "checkpoints"
    final = folder / f"step-{state.step}"
    with writing("checkpoint", final):
        folder.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=folder, prefix=_UNFINISHED[0]))
        try:
            _write_checkpoint(tmp, model, optimizer, scheduler, state)
            replace_folder(tmp, final)
            _fsync(folder)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    # Folders past this step are from a run that went further before it was cut short;
    # they are replaced as training reaches them and must not push out the live ones.
    done = [p for p in checkpoint_folders(out) if int(p.name.split("-")[1]) <= state.step]
    for old in done[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def _write_checkpoint(folder: Path, model, optimizer, scheduler, state: TrainState) -> None:
    """A checkpoint's files into `folder`, flushed to disk."""
    weights = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(weights, folder / "model.safetensors")
    _save_torch(optimizer.state_dict(), folder / "optimizer.pt")
    (folder / "scheduler.json").write_text(json.dumps(scheduler.state_dict()))
    (folder / "state.json").write_text(json.dumps(asdict(state)))
    for name in FILES:
        _fsync(folder / name)
    follow_umask_tree(folder)  # mkdtemp's 0o700 and safetensors' 0o600 would keep it private
    _fsync(folder)


def _save_torch(value, path: Path) -> None:
    """`torch.save` into `path`; a write that fails raises its OS error."""
    with open(path, "wb") as file:
        recorded = RecordedWrites(file)
        try:
            torch.save(value, recorded)
        except RuntimeError:
            if recorded.error is None:
                raise
            raise recorded.error from None


def _state(path: Path) -> TrainState:
    """A `state.json` file as a `TrainState`, every field present and of its type."""
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise CheckpointError("state.json is not a JSON object")
    names = [f.name for f in fields(TrainState)]
    if sorted(data) != sorted(names):
        odd = sorted(set(data) ^ set(names))
        raise CheckpointError(f"state.json fields differ from a trainer state ({', '.join(odd)})")
    for f in fields(TrainState):
        value = data[f.name]
        if f.type == "int" and (type(value) is not int or value < 0):
            raise CheckpointError(f"state.json: {f.name} is {value!r}, not a whole number >= 0")
        is_number = type(value) in (int, float) and math.isfinite(value)
        if f.type == "float" and not is_number:
            raise CheckpointError(f"state.json: {f.name} is {value!r}, not a number")
        if f.type.startswith("list") and not isinstance(value, list):
            raise CheckpointError(f"state.json: {f.name} is {value!r}, not a list")
    return TrainState(**data)


def _check_weights(weights: dict[str, torch.Tensor], model) -> None:
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    found = {k: tuple(v.shape) for k, v in weights.items()}
    if found == expected:
        return
    missing, extra = sorted(set(expected) - set(found)), sorted(set(found) - set(expected))
    shapes = sorted(k for k in set(found) & set(expected) if found[k] != expected[k])
    problems = [
        f"{label} {', '.join(keys[:3])}{' ...' if len(keys) > 3 else ''}"
        for label, keys in (("missing", missing), ("unexpected", extra), ("other shape", shapes))
        if keys
    ]
    raise CheckpointError(f"model.safetensors does not match the model: {'; '.join(problems)}")


def _check_optimizer(saved, optimizer) -> None:
    groups = saved.get("param_groups") if isinstance(saved, dict) else None
    if not isinstance(groups, list) or not isinstance(saved.get("state"), dict):
        raise CheckpointError("optimizer.pt is not an optimizer state")
    sizes = [len(g.get("params", ())) for g in groups if isinstance(g, dict)]
    wanted = [len(g["params"]) for g in optimizer.param_groups]
    if sizes != wanted:
        raise CheckpointError(
            f"optimizer.pt holds parameter groups of {sizes} parameters, the optimizer {wanted}"
        )


def _read(path: Path, reader: Callable[[Path], object]):
    """`reader(path)`, a damaged file reported as a `CheckpointError` naming it."""
    try:
        return reader(path)
    except _READ_ERRORS as err:
        raise CheckpointError(f"{path.name}: {_reason(err)}") from None


def read_checkpoint(path: Path, model, optimizer) -> Checkpoint:
    """Read a checkpoint folder and check it fits `model` and `optimizer`, applying
    nothing; `CheckpointError` names the folder, the file and what is wrong."""
    path = Path(path)
    try:
        missing = [name for name in FILES if not (path / name).is_file()]
        if missing:
            raise CheckpointError(f"{', '.join(missing)} missing")
        state = _read(path / "state.json", _state)
        if f"step-{state.step}" != path.name:
            raise CheckpointError(f"state.json says step {state.step}, the folder {path.name}")
        weights = _read(path / "model.safetensors", load_file)
        _check_weights(weights, model)
        saved = _read(
            path / "optimizer.pt", lambda p: torch.load(p, weights_only=True, map_location="cpu")
        )
        _check_optimizer(saved, optimizer)
        scheduler = _read(path / "scheduler.json", lambda p: json.loads(p.read_text()))
        if not isinstance(scheduler, dict) or type(scheduler.get("last_epoch")) is not int:
            raise CheckpointError("scheduler.json is not a scheduler state")
    except CheckpointError as err:
        raise CheckpointError(f"checkpoint {path} is unusable: {err}") from None
    return Checkpoint(path, weights, saved, scheduler, state)


def newest_intact(out: Path, model, optimizer, *, say: Callable[[str], None]) -> Checkpoint | None:
    """The newest checkpoint under OUT that reads back whole and fits; each newer one
    passed over is named with its reason, and a fallback is said."""
    skipped = []
    for path in reversed(checkpoint_folders(out, say)):
        try:
            found = read_checkpoint(path, model, optimizer)
        except CheckpointError as err:
            say(f"{err}; trying the one before it")
            skipped.append(path.name)
            continue
        if skipped:
            say(f"resuming from {path.name} instead of {', '.join(skipped)}")
        return found
    if skipped:
        say(f"no intact checkpoint in {Path(out) / 'checkpoints'}: training starts at step 0")
    return None


def apply_checkpoint(checkpoint: Checkpoint, model, optimizer, scheduler) -> TrainState:
    """Load a checkpoint read by `read_checkpoint` into the model, optimizer and scheduler."""
    model.load_state_dict(checkpoint.weights)
    optimizer.load_state_dict(checkpoint.optimizer)
    scheduler.load_state_dict(checkpoint.scheduler)
    return checkpoint.state


def resume_newest(
    out: Path, model, optimizer, scheduler, *, main: bool, say: Callable[[str], None]
) -> TrainState | None:
    """Load the newest intact checkpoint into model, optimizer and scheduler and return
    its state (None: there is none). The main process chooses, so every process resumes
    from the same one."""
    from accelerate.utils import broadcast_object_list

    found = newest_intact(out, model, optimizer, say=say) if main else None
    chosen = [found.path.name if found else None]
    broadcast_object_list(chosen)
    if chosen[0] is None:
        return None
    if found is None:
        found = read_checkpoint(out / "checkpoints" / chosen[0], model, optimizer)
    return apply_checkpoint(found, model, optimizer, scheduler)

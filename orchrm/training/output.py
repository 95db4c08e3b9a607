"""What training writes, on disk: a write that fails for lack of space or permission is
one `OutputError` naming the user's path and what to do; room is checked before a
step's work is spent; a folder (the saved model, a checkpoint) is replaced in one step.

Replacing a folder: the new one is written beside it (a hidden temporary folder), then
swapped in by one `renameat2(RENAME_EXCHANGE)` where Linux and the filesystem offer it,
so a reader, or a kill at any moment, finds the old folder or the new one whole, never
neither; the old one, now at the temporary name, is removed after. Elsewhere the old
folder is renamed aside (`.NAME.replaced-*`), the new one renamed in and the old one
removed: a kill between those two renames leaves the old folder aside, and
`settle_folder` puts it back at the next start.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from safetensors import SafetensorError

from orchrm.errors import OutputError
from orchrm.jsonl import printable

REPLACED = "replaced-"
"""After `.NAME.`, the name of a folder moved aside while it is replaced."""
CHECKPOINT_NAME = re.compile(r"step-(0|[1-9][0-9]{0,11})")
"""The name of a checkpoint folder in OUT/checkpoints: `step-N`."""
_OS_ERROR = re.compile(r"\(os error (\d+)\)")
"""How a `SafetensorError` carries the OS error of a failed write."""
_ADVICE = {
    errno.ENOSPC: "free space on its disk or give another --out",
    errno.EDQUOT: "free space on its disk or give another --out",
    errno.EFBIG: "the file is over the size its disk or `ulimit -f` allows: raise the limit "
    "or give another --out",
    errno.EACCES: "give an --out in a folder you can write",
    errno.EPERM: "give an --out in a folder you can write",
    errno.EROFS: "give an --out in a folder you can write",
}
_UNSUPPORTED = (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP)


def os_error(err: BaseException) -> OSError | None:
    """The OS error behind a failed write: `err` itself, the one a `SafetensorError`
    names (`... No space left on device (os error 28)`), or None (not a write's)."""
    if isinstance(err, OSError) and not isinstance(err, OutputError):
        return err
    found = _OS_ERROR.search(str(err)) if isinstance(err, SafetensorError) else None
    if found is None:
        return None
    code = int(found.group(1))
    return OSError(code, os.strerror(code))


def write_error(what: str, path: Path, err: OSError) -> OutputError:
    """The one-line error for `what` (the model, a checkpoint) that could not be written
    at the user's `path`, saying what to do."""
    advice = _ADVICE.get(err.errno, "check the disk or give another --out")
    return OutputError(f"cannot write {what} {printable(path)}: {err.strerror or err}: {advice}")


@contextmanager
def writing(what: str, path: Path) -> Iterator[None]:
    """Run the block that writes `what` at `path`: an OS error, or a safetensors error
    that carries one, becomes `write_error`; anything else goes on as it was."""
    try:
        yield
    except (OSError, SafetensorError) as err:
        found = os_error(err)
        if found is None:
            raise
        raise write_error(what, path, found) from None


class RecordedWrites:
    """A binary file for `torch.save` that keeps the OS error of a failed write, which
    torch reports as a `RuntimeError` without it (`unexpected pos ...`)."""

    def __init__(self, file):
        self.file = file
        self.error: OSError | None = None

    def write(self, data) -> int:
        try:
            return self.file.write(data)
        except OSError as err:
            self.error = err
            raise

    def flush(self) -> None:
        self.file.flush()


def folder_bytes(folder: Path) -> int:
    """The bytes of the files under `folder` (0 when there is none)."""
    if not folder.is_dir():
        return 0
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def room_problem(path: Path, needed: int, what: str) -> str | None:
    """Why `needed` bytes of `what` will not fit on the disk of `path` (of its nearest
    existing folder), or None when they fit."""
    where = Path(path).absolute()
    while not where.exists() and where != where.parent:
        where = where.parent
    free = shutil.disk_usage(where).free
    if free >= needed:
        return None
    return (
        f"not enough room for {what} in {printable(path)}: {_size(needed)} needed, "
        f"{_size(free)} free: free space on its disk or give another --out"
    )


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n / 2**10:.0f} KiB"


@functools.cache
def _renameat2():
    """libc's `renameat2` (Linux, glibc 2.28 and later), or None."""
    if not sys.platform.startswith("linux"):
        return None
    return getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)


def _exchange(a: Path, b: Path) -> bool:
    """Swap the entries `a` and `b` in one step (RENAME_EXCHANGE); False where the
    system or the filesystem cannot."""
    swap = _renameat2()
    if swap is None:
        return False
    at_cwd, rename_exchange = -100, 2
    if swap(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in _UNSUPPORTED:
        return False
    raise OSError(code, os.strerror(code), str(b))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def replace_folder(new: Path, out: Path) -> None:
    """Put the folder `new` (beside `out`) at `out` and remove what was there: in one
    step where the system can (the module's docstring). If the new folder cannot be
    put in place, the old one is."""
    if not out.exists() and not out.is_symlink():
        os.rename(new, out)
    elif _exchange(new, out):
        _remove(new)  # the old folder, now at the temporary name
    else:
        aside = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.{REPLACED}"))
        os.rename(out, aside)  # onto the empty folder mkdtemp made
        try:
            os.rename(new, out)
        except BaseException:
            os.rename(aside, out)
            raise
        _remove(aside)


def settle_folder(out: Path, say: Callable[[str], None]) -> list[Path]:
    """What an interrupted save of `out` left: a folder moved aside is put back where
    `out` is missing, and temporary folders beside it are removed, each said in one
    line; returns what was removed."""
    left = sorted(out.parent.glob(f".{out.name}.*")) if out.parent.is_dir() else []
    aside = [p for p in left if p.name.startswith(f".{out.name}.{REPLACED}") and p.is_dir()]
    if aside and not out.exists() and not out.is_symlink():
        back = max(aside, key=lambda p: p.stat().st_mtime)
        os.rename(back, out)
        left.remove(back)
        say(f"put {printable(out)} back where an interrupted save had moved it aside")
    for path in left:
        _remove(path)
    if left:
        names = ", ".join(p.name for p in left)
        say(f"removed {len(left)} unfinished folder(s) beside {printable(out)}: {names}")
    return left


def earlier_run(out: Path) -> str | None:
    """What a training run left in `out` that another run would replace (its model, or
    its checkpoints), said for an error message; None when there is nothing."""
    out = Path(out)
    if (out / "model").exists():
        return f"a trained model ({printable(out / 'model')})"
    folder = out / "checkpoints"
    steps = (
        [p for p in folder.iterdir() if CHECKPOINT_NAME.fullmatch(p.name)]
        if folder.is_dir()
        else []
    )
    if steps:
        return f"{len(steps)} checkpoint(s) of an earlier run ({printable(folder)})"
    return None

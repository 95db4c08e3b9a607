"""`orchrm.training.heap.reused_heap`: inside it, glibc serves large blocks from the heap
and keeps what is freed for the next one (no fresh mapping, no page faults on reuse);
outside it, and after it, glibc's own behaviour; a no-op where the C library is not
glibc."""

from __future__ import annotations

import ctypes
import resource
import sys

import pytest
import torch

from orchrm.training import heap
from orchrm.training.heap import reused_heap

BIG = 96 << 20
"""Past glibc's largest mmap threshold (32 MiB): mapped on its own by default."""


class _Info(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _libc():
    libc = heap._glibc()
    if libc is None or not hasattr(libc, "mallinfo2"):
        pytest.skip("needs glibc 2.33 or later (mallinfo2)")
    libc.mallinfo2.restype = _Info
    return libc


def _mapped_while_held(libc) -> int:
    """Bytes glibc holds in blocks mapped on their own while a BIG tensor lives."""
    block = torch.empty(BIG, dtype=torch.uint8)
    try:
        return libc.mallinfo2().hblkhd
    finally:
        del block


def test_large_blocks_come_from_the_heap_inside_and_are_mapped_after():
    libc = _libc()
    with reused_heap() as after_pass:
        inside = _mapped_while_held(libc)
        after_pass()
    after = _mapped_while_held(libc)
    assert after - inside >= BIG  # mapped on its own once the context ended


def _resident() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def test_freed_blocks_stay_until_the_pass_ends_then_go_back():
    """Inside, a freed large block stays in the process for the next allocation; the
    function called after each pass hands the free pages back to the system."""
    _libc()
    with reused_heap() as after_pass:
        block = torch.ones(BIG, dtype=torch.uint8)  # touched: resident
        del block
        kept = _resident()
        after_pass()
        assert kept - _resident() >= BIG * 3 // 4


def test_off_or_elsewhere_it_changes_nothing(monkeypatch):
    """Off, or where the C library is not glibc: large blocks stay mapped on their own
    and the after-pass call does nothing."""
    libc = _libc()
    with reused_heap(False) as after_pass:
        assert after_pass() is None
        assert _mapped_while_held(libc) >= BIG
    monkeypatch.setattr(sys, "platform", "darwin")
    assert heap._glibc() is None
    with reused_heap() as after_pass:
        assert after_pass() is None
        assert _mapped_while_held(libc) >= BIG


def test_overlapping_contexts_keep_the_heap_until_the_last_ends():
    """Two runs at once (threads): the first to end leaves the other's settings."""
    libc = _libc()
    with reused_heap():
        with reused_heap():
            pass
        assert _mapped_while_held(libc) < BIG  # still from the heap
    assert _mapped_while_held(libc) >= BIG


def test_the_command_puts_large_tensors_on_huge_pages_before_torch_loads():
    """`orchrm` (the CLI package) sets THP_MEM_ALLOC_ENABLE where torch is not loaded yet
    (PyTorch reads it at its first allocation), leaves a value the user set, and sets
    nothing once torch is loaded."""
    import subprocess

    def seen(code: str, **extra) -> str:
        env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", **extra}
        done = subprocess.run([sys.executable, "-c", code + "; import os; "
                               "print(os.environ.get('THP_MEM_ALLOC_ENABLE'))"],
                              capture_output=True, text=True, env=env, check=True)  # fmt: skip
        return done.stdout.strip()

    assert seen("import orchrm.cli") == "1"
    assert seen("import orchrm.cli", THP_MEM_ALLOC_ENABLE="0") == "0"
    assert seen("import torch, orchrm.cli") == "None"


def test_training_with_the_reused_heap_trains_the_same_model(tmp_path):
    """`TrainConfig.reuse_heap` changes where memory comes from, nothing computed: the
    same seeded run gives bit-identical weights with it on and off, and glibc's own
    behaviour comes back once training ends."""
    from safetensors.torch import load_file

    from orchrm.training.train import train
    from tests.samples import tiny_train_config, world_math_pairs

    pairs, backbone, _ = world_math_pairs(tmp_path)
    weights = {}
    for reuse in (False, True):
        out = tmp_path / f"reuse-{reuse}"
        train(tiny_train_config(pairs, out, backbone, reuse_heap=reuse), progress=False)
        weights[reuse] = load_file(str(out / "model" / "model.safetensors"))
    assert weights[True].keys() == weights[False].keys()
    assert all(torch.equal(weights[True][k], weights[False][k]) for k in weights[True])
    libc = heap._glibc()
    if libc is not None and hasattr(libc, "mallinfo2"):
        assert _mapped_while_held(_libc()) >= BIG  # mapped on its own again

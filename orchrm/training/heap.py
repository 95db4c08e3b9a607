"""Large tensors from the C heap during CPU training (`reused_heap`), so memory a pass frees
is used again instead of mapped afresh.

glibc serves every block over 32 MiB (its largest mmap threshold) with a fresh mapping
and unmaps it when freed. A decoder's per-layer tensors cross that size once a packed
row holds about 15,000 tokens (SmolLM2's 1,536 MLP values a token in fp32 are 92 MiB),
and then every one costs the kernel a fault per page and the zeroing of its pages: on a
2-core virtual machine, half of a 2,048-token step's time (`benchmarks/rm_train.py
--profile`). Inside `reused_heap` no block is mapped on its own: blocks come from the
heap, which keeps what is freed for later blocks, and `after_pass` hands the heap's free
pages back to the system after each pass.

The price is memory: PyTorch asks for aligned blocks, and glibc (before 2.38) pads an
aligned request, so a freed block serves a later one of its own size only once it has
merged with a free neighbour, and the heap grows past what is in use. With PyTorch's
huge pages on (THP_MEM_ALLOC_ENABLE=1, which the `orchrm` command sets) the heap stays
smaller. docs/results.md has the speed and peak memory with and without it.

Only glibc on Linux is changed (elsewhere the context does nothing). When the context
ends, blocks are mapped on their own again and the trim threshold is glibc's default;
the mmap threshold keeps the value it had, which glibc then no longer raises by itself.
mallopt's settings are process-wide, so other threads allocating meanwhile share them.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import sys
import threading
from collections.abc import Callable, Iterator

M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
"""mallopt's parameter numbers (malloc.h)."""
DEFAULT_MMAP_MAX = 65536
DEFAULT_TRIM_THRESHOLD = 128 * 1024
"""glibc's defaults, restored when the context ends."""
TRIM_THRESHOLD = 2**31 - 1
"""Free bytes at the heap's top past which glibc hands them back on its own (the
largest mallopt takes): between passes only `malloc_trim` does."""
_LOCK = threading.Lock()
_USERS = [0]
"""Contexts open now: the settings are made by the first and undone by the last, so
runs that overlap (threads) do not undo each other's."""


def _glibc():
    """glibc, or None where the C library is another (musl, macOS, Windows)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version.restype = ctypes.c_char_p
        libc.gnu_get_libc_version()
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
    except (OSError, AttributeError):
        return None
    return libc


def _nothing() -> None:
    return None


@contextlib.contextmanager
def reused_heap(enabled: bool = True) -> Iterator[Callable[[], None]]:
    """Within: large blocks from the heap, never mapped on their own. Yields the
    function to call after each training pass, which hands the heap's free pages back
    (a no-op where the context changes nothing)."""
    libc = _glibc() if enabled else None
    if libc is None:
        yield _nothing
        return
    with _LOCK:
        _USERS[0] += 1
        if _USERS[0] == 1:
            # The trim threshold first: mallopt of it also fixes the mmap threshold, so
            # glibc stops raising it on its own.
            libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
            libc.mallopt(M_MMAP_MAX, 0)

    def after_pass() -> None:
        libc.malloc_trim(0)

    try:
        yield after_pass
    finally:
        with _LOCK:
            _USERS[0] -= 1
            if _USERS[0] == 0:
                libc.mallopt(M_MMAP_MAX, DEFAULT_MMAP_MAX)
                libc.mallopt(M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD)
                libc.malloc_trim(0)

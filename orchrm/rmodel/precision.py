"""Which precision the reward model computes in, resolved in one place.

Every dtype setting (`--dtype` of `orchrm train`, `score`, `evaluate-rm`, `eval`,
`serve` and `demo`) takes `auto`, `bf16` or `fp32`. `auto` is bf16 where the hardware runs
it fast, CUDA with bf16 or a CPU with AMX tiles, and fp32 elsewhere (a CPU with only
AVX-512 BF16 trains faster in fp32: docs/results.md#why-the-defaults).

The environment variable ORCHRM_BF16 overrides that detection for every `auto`, without
changing the machine: `1` resolves `auto` to bf16, `0` to fp32, `auto` (or unset)
detects. An explicit `bf16` or `fp32` is never overridden. Tests and CI use it to run
both branches on any CPU; a user uses it to get the other precision's numbers.
"""

from __future__ import annotations

import os
from pathlib import Path

from orchrm.errors import ConfigError

BF16_ENV = "ORCHRM_BF16"
"""The environment variable that overrides what `auto` resolves to."""
DTYPES = ("auto", "bf16", "fp32")
"""The precisions a dtype setting takes."""

_ON = {"1", "yes", "true", "on", "bf16"}
_OFF = {"0", "no", "false", "off", "fp32"}


def bf16_forced() -> bool | None:
    """What ORCHRM_BF16 says: True (bf16), False (fp32), or None (detect). Raises a
    `ConfigError` naming the variable and the value it cannot read."""
    value = os.environ.get(BF16_ENV, "").strip().lower()
    if value in ("", "auto"):
        return None
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise ConfigError(
        f"{BF16_ENV}={os.environ[BF16_ENV]!r}: use 1 (auto means bf16), 0 (auto means "
        "fp32) or auto (detect from the hardware)"
    )


def bf16_detected(device) -> bool:
    """Whether this hardware runs bfloat16 fast: CUDA with bf16, or a CPU with AMX
    tiles (`amx_bf16` in /proc/cpuinfo). ORCHRM_BF16 is not read here."""
    if device.type == "cuda":
        import torch

        return torch.cuda.is_bf16_supported()
    try:
        return "amx_bf16" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def bf16_supported(device) -> bool:
    """What `auto` resolves to on `device`: ORCHRM_BF16 when it is set, else
    `bf16_detected`."""
    forced = bf16_forced()
    return bf16_detected(device) if forced is None else forced


def resolve_dtype(dtype: str | None, device) -> str:
    """`auto` (or None), `bf16` or `fp32` (also `bfloat16`, `float32`) as the precision
    computed in on `device`: `bf16` or `fp32`."""
    names = {"bf16": "bf16", "bfloat16": "bf16", "fp32": "fp32", "float32": "fp32"}
    if dtype in (None, "", "auto"):
        return "bf16" if bf16_supported(device) else "fp32"
    if dtype not in names:
        raise ConfigError(f"dtype {dtype!r}: use one of {', '.join(DTYPES)}")
    return names[dtype]

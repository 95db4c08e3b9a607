"""Training throughput: tokens per second and model FLOPs utilisation (MFU).

Model FLOPs, with N the parameters outside embedding tables (a lookup multiplies
nothing), N_t the trainable ones among them, and T the real (non-pad) tokens read:

- forward: 2 N T (a multiply and an add per weight per token);
- backward, gradients of the activations: 2 N T, through every layer, frozen or not;
- backward, gradients of the trainable weights: 2 N_t T.

So full fine-tuning costs 6 N T and LoRA over a frozen base about 4 N T. Left out: the
forward pass gradient checkpointing repeats (work the device does, not work the model
needs), attention's own term, which grows with T squared (so MFU reads low on long
texts), and pad tokens (the device computes them, the model gains nothing from them:
padding lowers MFU, which is the point of token-budget batches).

MFU = model FLOPs / (seconds x processes x the peak FLOP/s of one device). The peak is
`TrainConfig.peak_flops` when given, else the dense bf16 tensor peak of a known CUDA GPU
(`PEAK_FLOPS`); a CPU has no entry, so its MFU is None unless the peak is given
(`matmul_rate` measures one).

`StepClock` times optimizer steps one by one, the device synchronized at both ends of
each, for rates over the steady steps after the first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

PEAK_FLOPS: tuple[tuple[str, float], ...] = (
    ("B200", 2250e12),
    ("B100", 1750e12),
    ("GH200", 989e12),
    ("H200", 989e12),
    ("H100 PCIE", 756e12),
    ("H100 NVL", 835e12),
    ("H100", 989e12),
    ("H800", 989e12),
    ("H20", 148e12),
    ("A100", 312e12),
    ("A800", 312e12),
    ("A10G", 70e12),
    ("A10", 125e12),
    ("L40S", 362e12),
    ("L40", 181e12),
    ("L4", 121e12),
    ("RTX 4090", 165e12),
    ("RTX 3090", 71e12),
    ("MI300X", 1307e12),
    ("MI250X", 383e12),
)
"""Dense bf16 tensor FLOP/s of one device, by a part of its name as CUDA reports it
(first match wins, so a variant precedes its family); no sparsity."""


def device_peak_flops(device: torch.device, given: float | None = None) -> float | None:
    """Peak FLOP/s of one `device`: `given` when set, else the `PEAK_FLOPS` entry of a
    CUDA device's name; None for a CPU or an unknown GPU."""
    if given is not None:
        return given
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device).upper()
    return next((peak for part, peak in PEAK_FLOPS if part in name), None)


def matmul_rate(dtype: torch.dtype, n: int = 1024, repeat: int = 10) -> float:
    """Measured dense matmul FLOP/s of this process's CPU threads at `dtype` (`repeat`
    products of two n x n matrices, after one unmeasured)."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    start = time.perf_counter()
    for _ in range(repeat):
        a @ b
    return 2 * n**3 * repeat / (time.perf_counter() - start)


def _numel(p: torch.nn.Parameter) -> int:
    # ZeRO-3 leaves each process an empty shard; DeepSpeed keeps the full size here.
    return int(getattr(p, "ds_numel", p.numel()))


def flops_per_token(model: torch.nn.Module) -> float:
    """Model FLOPs of one training token: 4 N + 2 N_t (module docstring)."""
    embedded = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    weights = [p for p in model.parameters() if id(p) not in embedded]
    total = sum(_numel(p) for p in weights)
    trainable = sum(_numel(p) for p in weights if p.requires_grad)
    return 4.0 * total + 2.0 * trainable


@dataclass
class Throughput:
    """Training speed over some steps, summed over processes."""

    tokens_per_second: float
    """Real (non-pad) tokens read per second."""
    padded_tokens_per_second: float
    """Tokens computed per second, padding included."""
    model_flops_per_second: float
    """Model FLOPs (module docstring) per second."""
    mfu: float | None
    """Model FLOPs utilisation: model FLOP/s over the devices' peak; None: peak unknown."""


@dataclass
class Meter:
    """Counts tokens and time of training passes and turns them into a `Throughput`."""

    flops_per_token: float
    peak_flops: float | None
    """Peak FLOP/s of one device (None: MFU unknown)."""
    tokens: int = 0
    padded_tokens: int = 0
    seconds: float = 0.0
    """Time of the passes counted (forward, backward and optimizer; the caller adds it)."""

    def add(self, tokens: int, padded_tokens: int) -> None:
        """One forward and backward pass read `tokens` real tokens, `padded_tokens` in all."""
        self.tokens += tokens
        self.padded_tokens += padded_tokens

    def throughput(
        self, tokens: int | None = None, padded: int | None = None, processes: int = 1
    ) -> Throughput:
        """The rate so far; `tokens`/`padded` override the counts (totals over
        `processes`, each timed like this one)."""
        tokens = self.tokens if tokens is None else tokens
        padded = self.padded_tokens if padded is None else padded
        seconds = self.seconds or float("inf")
        flops = tokens * self.flops_per_token / seconds
        peak = None if self.peak_flops is None else self.peak_flops * processes
        return Throughput(
            tokens_per_second=tokens / seconds,
            padded_tokens_per_second=padded / seconds,
            model_flops_per_second=flops,
            mfu=None if peak is None else flops / peak,
        )


@dataclass
class StepClock:
    """Each optimizer step's seconds, from `begin` to `end` (with `cuda`, the device
    synchronized at both ends, so the step's queued kernels count), and the real tokens
    it read. `steady` leaves the first step out (kernel choice, allocator growth)."""

    cuda: bool
    seconds: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    _start: float = 0.0

    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def begin(self) -> None:
        """A step starts."""
        self._sync()
        self._start = time.perf_counter()

    def end(self, tokens: int) -> None:
        """The step that began last ends, having read `tokens` real tokens."""
        self._sync()
        self.seconds.append(time.perf_counter() - self._start)
        self.tokens.append(tokens)

    def steady(self) -> tuple[int, int, float]:
        """(steps, tokens, seconds) from the second step on (all of one step)."""
        skip = 1 if len(self.seconds) > 1 else 0
        return len(self.seconds) - skip, sum(self.tokens[skip:]), sum(self.seconds[skip:])

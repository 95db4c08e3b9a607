"""Measure what `orchrm.memplan.plan` predicts: the peak memory of real training steps of a
random-initialized model, each probe in a fresh process.

    python -m orchrm.memplan.probe < probes.json    # a JSON list of Probe; prints a list

The child builds the model from its config (nothing is downloaded), trains it as
`orchrm.training.train` does (chosen and rejected texts in one forward pass, the Bradley-Terry
loss, fused AdamW, dropout off, LoRA on all linear layers with the score head trained),
and reports its peak resident memory above what it held before the model was built. A
first step on short texts creates the AdamW state, so the steps measured hold it as
every step of a run after the first does. glibc is told to hand every large block back
to the system when it is freed (`MALLOC_MMAP_THRESHOLD_`), so the resident size follows
live tensors instead of what the allocator keeps cached.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

from orchrm.errors import ConfigError


@dataclass
class Probe:
    """One measured training setup; the fields mirror `orchrm.memplan.plan.PlanSettings`."""

    config: dict
    """A Hugging Face config as a dict (`model_type` included)."""
    max_length: int
    micro_batch_pairs: int
    dtype: str = "fp32"
    lora: bool = False
    lora_r: int = 32
    gradient_checkpointing: bool = False
    attn_implementation: str = "sdpa"
    packing: bool = False
    """The texts packed into one row (`orchrm.rmodel.packed`) instead of padded."""
    steps: int = 1
    """Optimizer steps measured (after the one that creates the AdamW state)."""
    threads: int = 1
    seed: int = 0
    extra: dict = field(default_factory=dict)


@dataclass
class Measurement:
    """What one probe measured."""

    peak_bytes: int
    """Peak resident memory during the steps minus the resident memory before the model
    was built."""
    baseline_bytes: int
    """Resident memory before the model was built (Python, PyTorch, transformers)."""
    parameters: int
    trainable_parameters: int
    seconds_per_step: float


def resident(key: str) -> int:
    """VmRSS (the resident size) or VmHWM (its high-water mark) of this process, in bytes
    (Linux)."""
    with open("/proc/self/status") as status:
        return int(re.search(rf"{key}:\s+(\d+) kB", status.read()).group(1)) * 1024


def reset_peak() -> None:
    """Make VmHWM restart from the current resident size (Linux 4.0 and later)."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def _config(probe: Probe):
    """The probe's Hugging Face config, its model class imported (so the import is not
    counted as the model's memory)."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    settings = dict(probe.config)
    config = AutoConfig.for_model(settings.pop("model_type"), **settings)
    config.num_labels = 1
    config.pad_token_id = 0
    config._attn_implementation = probe.attn_implementation
    AutoModelForSequenceClassification._model_mapping[type(config)]
    return config


def _build(probe: Probe, config):
    """The model as orchrm trains it: one label, pad token set, dropout off, LoRA."""
    import torch
    from transformers import AutoModelForSequenceClassification

    from orchrm.training.build import add_lora, disable_dropout, enable_gradient_checkpointing

    dtype = torch.bfloat16 if probe.dtype == "bf16" else torch.float32
    torch.manual_seed(probe.seed)
    model = AutoModelForSequenceClassification.from_config(
        config, attn_implementation=probe.attn_implementation, dtype=dtype
    )
    if probe.packing:
        from orchrm.rmodel.last_token import read_last_real_token
        from orchrm.rmodel.packed import enable_packing

        if not (read_last_real_token(model) and enable_packing(model)):
            raise ConfigError(f"a {config.model_type} model with this attention does not pack")
    if probe.gradient_checkpointing:
        enable_gradient_checkpointing(model, probe.lora)
    if probe.lora:
        model = add_lora(model, probe.lora_r, probe.lora_r, 0.05)
    disable_dropout(model)
    return model


def _batch(probe: Probe, vocab_size: int):
    """2 x micro_batch_pairs texts of max_length tokens; the last one padded by a quarter,
    so the attention mask is a real padding mask as in orchrm's batches. Packed: the
    texts' ids, to pack into one row."""
    import torch

    texts, length = 2 * probe.micro_batch_pairs, probe.max_length
    ids = torch.randint(1, vocab_size, (texts, length))
    if probe.packing:
        return {"packed": ids.tolist()}
    mask = torch.ones(texts, length, dtype=torch.long)
    if texts > 1:
        mask[-1, length - length // 4 :] = 0
        ids[-1, length - length // 4 :] = 0
    return {"input_ids": ids, "attention_mask": mask}


def _step(model, optimizer, inputs, autocast: bool) -> None:
    """One optimizer step on the Bradley-Terry loss, as `orchrm.training.loss.pair_loss`;
    under bf16 autocast when asked (a bf16 model with PEFT's fp32 adapters needs it)."""
    import torch

    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        if "packed" in inputs:
            from orchrm.rmodel.packed import packed_rewards

            scores = packed_rewards(model, inputs["packed"], "cpu")
        else:
            scores = model(**inputs).logits.squeeze(-1).float()
    chosen, rejected = scores.chunk(2)
    loss = -torch.nn.functional.logsigmoid(chosen - rejected).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()


class MasterAdamW:
    """AdamW as mixed-precision trainers (DeepSpeed, Megatron) run it for bf16 weights
    trained fully: fp32 master weights and moments, the bf16 weights copied from the
    masters after each step. One parameter at a time, so no fp32 copy of all the
    gradients is ever held."""

    def __init__(self, params: list, lr: float) -> None:
        import torch

        self.pairs = []
        for p in params:
            master = p.detach().float().requires_grad_()
            self.pairs.append((p, master, torch.optim.AdamW([master], lr=lr, fused=True)))

    def step(self) -> None:
        for p, master, optimizer in self.pairs:
            master.grad = p.grad.float()
            p.grad = None
            optimizer.step()
            master.grad = None
            p.data.copy_(master)

    def zero_grad(self) -> None:
        for p, _, _ in self.pairs:
            p.grad = None


def _optimizer(probe: Probe, params: list):
    """Fused AdamW, or `MasterAdamW` for a bf16 model trained fully (the plan's state)."""
    import torch

    if probe.dtype == "bf16" and not probe.lora:
        return MasterAdamW(params, lr=1e-5)
    return torch.optim.AdamW(params, lr=1e-5, fused=True)


def _autocast(probe: Probe) -> bool:
    return probe.dtype == "bf16" and probe.lora


def _warm_up(probe: Probe) -> None:
    """One step of a one-layer model of the same family: the libraries' one-time set-up
    (matmul buffers, autograd's threads) happens here, outside the measurement."""

    small = Probe(**{**asdict(probe), "max_length": 16})
    small.config = {**probe.config, "num_hidden_layers": 1, "vocab_size": 1000}
    model = _build(small, _config(small))
    model.train()
    optimizer = _optimizer(probe, [p for p in model.parameters() if p.requires_grad])
    _step(model, optimizer, _batch(small, 1000), _autocast(probe))


def measure_here(probe: Probe) -> Measurement:
    """Run the probe in this process (`measure` runs probes in a fresh one). A first step
    on 16-token texts creates the AdamW state cheaply; the steps measured come after."""
    import gc

    import peft  # noqa: F401
    import torch

    import orchrm.training.train  # noqa: F401

    torch.set_num_threads(probe.threads)
    config = _config(probe)
    _warm_up(probe)
    gc.collect()
    reset_peak()
    baseline = resident("VmRSS")
    model = _build(probe, config)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = _optimizer(probe, params)
    vocab = model.config.vocab_size
    autocast = _autocast(probe)
    _step(model, optimizer, _batch(Probe(**{**asdict(probe), "max_length": 16}), vocab), autocast)
    inputs = _batch(probe, vocab)
    start = time.perf_counter()
    for _ in range(probe.steps):
        _step(model, optimizer, inputs, autocast)
    seconds = (time.perf_counter() - start) / probe.steps
    measured = Measurement(
        peak_bytes=resident("VmHWM") - baseline,
        baseline_bytes=baseline,
        parameters=sum(p.numel() for p in model.parameters()),
        trainable_parameters=sum(p.numel() for p in params),
        seconds_per_step=seconds,
    )
    del model, optimizer, params, inputs
    gc.collect()
    return measured


def measure_all(probes: list[Probe], timeout: float = 600) -> list[Measurement]:
    """Run the probes one after another in one fresh Python process (each from the
    memory the previous one gave back) and return what each measured."""
    threads = max(p.threads for p in probes)
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "MALLOC_MMAP_THRESHOLD_": "65536",
        "OMP_NUM_THREADS": str(threads),
    }
    done = subprocess.run(
        [sys.executable, "-m", "orchrm.memplan.probe"],
        input=json.dumps([asdict(p) for p in probes]),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    if done.returncode != 0:
        raise ConfigError(f"memory probe failed: {done.stderr.strip().splitlines()[-1:]}")
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    return [Measurement(**row) for row in rows]


def measure(probe: Probe, timeout: float = 600) -> Measurement:
    """Run one probe in a fresh Python process."""
    return measure_all([probe], timeout)[0]


def main() -> None:
    """Read a list of `Probe`s as JSON on stdin, print their `Measurement`s as JSON."""
    probes = [Probe(**p) for p in json.loads(sys.stdin.read())]
    print(json.dumps([asdict(measure_here(p)) for p in probes]))


if __name__ == "__main__":
    main()

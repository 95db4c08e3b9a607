"""Where one training step's time goes (`benchmarks/rm_train.py --profile`): the model
loaded and set up as `orchrm train` sets it up, one step of the first batch orchrm's
loop reads, timed in its parts: data (tokenizing the batch's texts and packing or
padding them), forward, backward (loss included) and the optimizer, packed and padded
in turn on the same weights; then PyTorch's profiler's heaviest operators of one packed
step.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path

PARTS = ("data", "forward", "backward", "optimizer")
"""A step's parts, in order."""


def _parts(model, optimizer, texts: list[str], tokenizer, packed: bool, device, bf16: bool) -> dict:
    """One step's wall seconds by part, each text computed once as training computes it
    (`orchrm.training.loss.distinct`); with each part's system seconds (`sys_`: the
    kernel mapping and zeroing fresh pages) and page faults (`faults_`)."""
    import torch

    from orchrm.rmodel.backbone import collate
    from orchrm.rmodel.packed import pack, packed_logits
    from orchrm.training.loss import distinct

    seconds = {}
    clock = [time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)]

    def lap(part: str) -> None:
        now, usage = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        seconds[part] = now - clock[0]
        seconds["sys_" + part] = usage.ru_stime - clock[1].ru_stime
        seconds["faults_" + part] = usage.ru_minflt - clock[1].ru_minflt
        clock[:] = [time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)]

    ids = tokenizer(texts)["input_ids"]
    computed, where = distinct(ids)
    pad = tokenizer.pad_token_id
    inputs = pack(computed, device) if packed else collate(computed, pad, "right")
    lap("data")
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
        if packed:
            scores = packed_logits(model, inputs)
        else:
            scores = model(**inputs).logits.squeeze(-1).float()
    lap("forward")
    chosen, rejected = scores[torch.tensor(where)].chunk(2)
    (-torch.nn.functional.logsigmoid(chosen - rejected)).mean().backward()
    lap("backward")
    optimizer.step()
    optimizer.zero_grad()
    lap("optimizer")
    for key in ("", "sys_", "faults_"):
        seconds[key + "step"] = sum(seconds[key + p] for p in PARTS)
    seconds["tokens"] = sum(len(x) for x in computed)
    seconds["read"] = inputs["input_ids"].numel()
    seconds["texts"] = len(computed)
    return seconds


def profile_step(pairs: Path, run, top: int = 8) -> tuple[dict, dict, str]:
    """(packed step's parts, padded step's parts, the profiler's table of one packed
    step's `top` operators by their own CPU time), in the precision and with the
    gradient checkpointing `run` asks."""
    import torch

    from orchrm.experiments.train_speed.compare import orchrm_order
    from orchrm.rmodel.packed import packs
    from orchrm.training.build import load_for_training
    from orchrm.training.config import TrainConfig
    from orchrm.training.data import load_splits

    lora = {"lora": True, "lora_r": run.lora, "lora_alpha": 2 * run.lora, "lora_dropout": 0.0}
    config = TrainConfig(backbone=run.backbone, dtype=run.dtype, max_length=run.max_length,
                         gradient_checkpointing=run.checkpointing,
                         **(lora if run.lora else {}))  # fmt: skip
    torch.manual_seed(0)
    device = torch.device("cpu")
    model, tokenizer, _ = load_for_training(config, run.backbone, bf16=run.dtype == "bf16",
                                            cuda=False)  # fmt: skip
    if not packs(model):
        name = run.backbone or "the default backbone"
        raise ValueError(f"{name} does not pack: nothing to profile")
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad],
                                  lr=run.lr, fused=True)  # fmt: skip
    records, _ = load_splits(pairs)
    batch = [records[i] for i in orchrm_order(pairs, run)[: run.batch]]
    texts = [r["prompt"] + r[side] for side in ("chosen", "rejected") for r in batch]
    bf16 = run.dtype == "bf16"
    _parts(model, optimizer, texts, tokenizer, True, device, bf16)  # warm-up
    packed = _parts(model, optimizer, texts, tokenizer, True, device, bf16)
    padded = _parts(model, optimizer, texts, tokenizer, False, device, bf16)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        _parts(model, optimizer, texts, tokenizer, True, device, bf16)
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=top)
    return packed, padded, table

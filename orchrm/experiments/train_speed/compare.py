"""orchrm's reward-model training loop against TRL's `RewardTrainer`, same everything
(what `benchmarks/rm_train.py` measures): the same pairs as the same token ids, read in
the same random batches in the same order, from the same initial weights, with the same
steps, batch size, learning rate, warm-up, max length, precision, LoRA and dropout (off),
both clipping gradients to norm 1.0; both models then scored by the same code on the
same held-out pairs. Each run is meant for a process of its own, so that its peak
memory is its own: this module imports what a run needs when it runs.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

WHOLE = 10**9
"""A max length nothing reaches: token ids as they are."""


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MB."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_pairs(folder: Path, tasks: int) -> Path:
    """World `math` pairs (world seed 0, 8 samples a task and orchestrator, the default
    mining: 80/10/10 task split, texts cut at 512 approximate tokens), exported to
    FOLDER/pairs/export by the world-log and pairs stages."""
    from orchrm.experiments.stages import world_log
    from orchrm.experiments.world_models import Cut, PairDataset, WorldRMConfig, mine_pairs

    log = world_log(folder, "math", "math", tasks, 8, 0, progress=False)
    config = WorldRMConfig(
        out=str(folder),
        logs=[log],
        datasets=(PairDataset("default", folder="export"),),
        store="store.duckdb",
        split=(0.8, 0.1, 0.1),
        budget=Cut(512),
    )
    return mine_pairs(config).datasets["default"].pairs


def subset(pairs: Path, n: int, out: Path, validation: int | None = None) -> Path:
    """The first n training pairs and the first `validation` pairs of the validation split
    (None: all of it), in a new folder; MissingInput for an export without either split
    or with fewer training pairs than n."""
    from orchrm.errors import MissingInput

    out.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", n), ("validation", validation)):
        if not (pairs / f"{split}.jsonl").is_file():
            raise MissingInput(
                f"{pairs}: no {split} pairs (an export too small to split; more --tasks)"
            )
        rows = (pairs / f"{split}.jsonl").read_text().splitlines()[:count]
        if split == "train" and len(rows) < n:
            raise MissingInput(f"{pairs}: {len(rows)} training pairs, fewer than {n} asked")
        (out / f"{split}.jsonl").write_text("\n".join(rows) + "\n")
    return out


def padding_shares(pairs: Path, batch: int, max_length: int) -> tuple[int, list]:
    """Share of real tokens in the forward passes of one epoch of the training pairs:
    random batches in one pass each (as TRL pads them), in orchrm's length-sorted
    passes, and batches sorted by length 64 at a time. Returns (pairs, [(label, share)])."""
    from orchrm.rmodel.backbone import load_backbone
    from orchrm.rmodel.tokens import default_backbone
    from orchrm.training.batching import epoch_steps, passes_padded_tokens
    from orchrm.training.config import TrainConfig
    from orchrm.training.data import read_pair_file, tokenize

    _, tokenizer = load_backbone(default_backbone())
    data = tokenize(read_pair_file(pairs / "train.jsonl"), tokenizer, max_length)
    default = TrainConfig.forward_passes
    shares = []
    for label, group, passes in (
        ("random batches, one pass each", 1, 1),
        (f"random batches, {default} length-sorted passes", 1, default),
        ("batches sorted 64 at a time, one pass each", 64, 1),
    ):
        steps = epoch_steps(
            data.widths(), lengths=data.lengths(), batch_size=batch, grad_accumulation=1,
            max_tokens=None, seed=0, epoch=0, group=group,
        )  # fmt: skip
        real = padded = 0
        for m in (m for s in steps for m in s.micro_batches):
            lengths = [len(t) for i in m.pairs for t in (data.chosen[i], data.rejected[i])]
            real += sum(lengths)
            padded += passes_padded_tokens(lengths, passes)
        shares.append((label, real / padded))
    return len(data), shares


@dataclass(frozen=True)
class Run:
    """What both trainers are given alike."""

    steps: int
    batch: int
    """Pairs a micro-batch (one forward and backward pass)."""
    lr: float
    max_length: int
    accumulation: int = 1
    """Micro-batches a step."""
    backbone: str = ""
    """'' : the offline MiniLM."""
    lora: int = 0
    """LoRA rank (alpha twice it, dropout 0); 0: full fine-tuning."""
    dtype: str = "fp32"
    checkpointing: bool = False
    """Gradient checkpointing (TRL's default is on, orchrm's off on a CPU)."""
    task_batches: bool = False
    """Batches filled task by task (`TrainConfig.task_batches`); TRL reads the same."""
    trl_batch: int = 0
    """Pairs a TRL micro-batch, its accumulation making a step of the same pairs as
    orchrm's (batch x accumulation); 0: `batch`, as orchrm's."""
    trl_checkpointing: bool | None = None
    """TRL's gradient checkpointing; None: `checkpointing`."""
    reuse_heap: bool = False
    """orchrm's `TrainConfig.reuse_heap` (large tensors from glibc's heap)."""

    def trl_steps(self) -> tuple[int, int, bool]:
        """TRL's (micro-batch, accumulation, checkpointing): the same pairs a step."""
        batch = self.trl_batch or self.batch
        pairs = self.batch * self.accumulation
        if pairs % batch:
            from orchrm.errors import ConfigError

            raise ConfigError(f"TRL's micro-batch of {batch} pairs does not divide {pairs}")
        own = self.trl_checkpointing
        return batch, pairs // batch, self.checkpointing if own is None else own


def orchrm_order(pairs: Path, run: Run) -> list[int]:
    """The training pairs' indices in the order orchrm's loop reads them for `run`
    (seed 0, first epoch, random batches or batches filled by task): what TRL is given to
    read in turn."""
    from orchrm.training.batching import epoch_steps
    from orchrm.training.data import pair_task, pair_texts, read_pair_file

    records = read_pair_file(pairs / "train.jsonl")
    by_task = {"tasks": [pair_task(r) for r in records], "texts": [pair_texts(r) for r in records]}
    steps = epoch_steps([1] * len(records), batch_size=run.batch,
                        grad_accumulation=run.accumulation, max_tokens=None, seed=0, epoch=0,
                        **(by_task if run.task_batches else {}))  # fmt: skip
    return [i for s in steps for m in s.micro_batches for i in m.pairs]


def run_orchrm(pairs: Path, out: Path, run: Run, *, sort_batches: int = 1) -> dict:
    """Train with orchrm's loop; returns pairs/s, seconds and CPU seconds of the
    optimizer steps, the model folder and the texts it cut for length."""
    import orchrm.training.train as loop
    from orchrm.training.config import TrainConfig

    # CPU seconds of the optimizer steps, the span `train_seconds` times (validation and
    # checkpoints excluded); on shared cores they vary less than wall time. Peak memory
    # after the last step: what training held, before validation and the save.
    cpu, peak, step = [0.0], [0.0], loop._train_step

    def timed_step(state, batch):
        start = time.process_time()
        try:
            return step(state, batch)
        finally:
            cpu[0] += time.process_time() - start
            peak[0] = peak_rss_mb()

    loop._train_step = timed_step
    lora = {"lora": True, "lora_r": run.lora, "lora_alpha": 2 * run.lora, "lora_dropout": 0.0}
    summary = loop.train(
        TrainConfig(
            pairs=str(pairs),
            out=str(out),
            backbone=run.backbone,
            max_steps=run.steps,
            batch_size=run.batch,
            grad_accumulation=run.accumulation,
            lr=run.lr,
            max_length=run.max_length,
            warmup_ratio=0.1,
            eval_every=run.steps,
            sort_batches=sort_batches,
            task_batches=run.task_batches,
            reuse_heap=run.reuse_heap,
            seed=0,
            dtype=run.dtype,
            gradient_checkpointing=run.checkpointing,
            **(lora if run.lora else {}),
        ),
        progress=False,
    )
    return {
        "pairs_per_s": summary.pairs_per_second,
        "seconds": summary.train_seconds,
        "cpu_seconds": cpu[0],
        "model": str(out / "model"),
        "cut": summary.truncated_texts,
        "peak_rss_mb": peak[0],
    }


def trl_model(run: Run):
    """(model, tokenizer) for TRL's run: the backbone loaded and its LoRA adapters made as
    orchrm makes them, from the same seed, with PEFT's input casts as TRL's own PEFT
    model has them."""
    import torch

    from orchrm.rmodel.backbone import load_backbone
    from orchrm.rmodel.tokens import default_backbone
    from orchrm.training.build import add_lora

    torch.manual_seed(0)  # the score head's and the adapters' initialization, as orchrm's
    model, tokenizer = load_backbone(
        run.backbone or default_backbone(),
        dtype=torch.bfloat16 if run.dtype == "bf16" and run.lora else torch.float32,
        packing=False,
    )
    if run.lora:
        model = add_lora(model, run.lora, 2 * run.lora, 0.0, peft_input_cast=True)
    return model, tokenizer


def trl_dataset(pairs: Path, run: Run, tokenizer):
    """(TRL's dataset of token ids in orchrm's order, cut as orchrm cuts them; the pairs
    TRL's own preprocessing would drop for a text over max_length)."""
    import datasets

    from orchrm.training.data import load_splits, tokenize

    records, _ = load_splits(pairs)
    records = [records[i] for i in orchrm_order(pairs, run)]
    dropped = sum(n > run.max_length for n in tokenize(records, tokenizer, WHOLE).widths())
    ids = tokenize(records, tokenizer, run.max_length)
    data = datasets.Dataset.from_dict({"chosen_ids": ids.chosen, "rejected_ids": ids.rejected})
    return data, dropped


def trl_config(out: Path, run: Run):
    """TRL's `RewardConfig` for the same steps, pairs a step, learning rate and precision
    as orchrm's run, in TRL's own micro-batches and checkpointing (`Run.trl_steps`)."""
    import torch
    from trl import RewardConfig

    batch, accumulation, checkpointing = run.trl_steps()
    return RewardConfig(
        output_dir=str(out),
        max_steps=run.steps,
        per_device_train_batch_size=batch,
        gradient_accumulation_steps=accumulation,
        learning_rate=run.lr,
        warmup_steps=0.1,  # a float below 1 is a ratio of the steps
        max_length=run.max_length,
        bf16=run.dtype == "bf16",
        use_cpu=not torch.cuda.is_available(),
        gradient_checkpointing=checkpointing,
        report_to=[],
        save_strategy="no",
        logging_steps=10,
        seed=0,
    )


def run_trl(pairs: Path, out: Path, run: Run) -> dict:
    """Train with TRL's `RewardTrainer` on orchrm's token ids, reading the pairs in
    orchrm's order (`orchrm_order`), from the same initial weights (`trl_model`); returns
    pairs/s, seconds, CPU seconds, the model folder and the pairs TRL's preprocessing
    dropped for a text over max_length (it drops, where orchrm cuts)."""
    import torch
    from trl import RewardTrainer

    class InOrder(RewardTrainer):
        """TRL's trainer reading its dataset in the order given."""

        def _get_train_sampler(self, *args, **kwargs):
            return torch.utils.data.SequentialSampler(self.train_dataset)

    model, tokenizer = trl_model(run)
    data, dropped = trl_dataset(pairs, run, tokenizer)
    trainer = InOrder(
        model=model, args=trl_config(out, run), train_dataset=data, processing_class=tokenizer
    )
    start, cpu = time.perf_counter(), time.process_time()
    metrics = trainer.train().metrics
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = peak_rss_mb()
    if run.lora:
        model = model.merge_and_unload()
    model.save_pretrained(str(out / "model"))
    tokenizer.save_pretrained(str(out / "model"))
    pairs_done = run.steps * run.batch * run.accumulation
    return {
        "pairs_per_s": pairs_done / metrics.get("train_runtime", seconds),
        "seconds": metrics.get("train_runtime", seconds),
        "cpu_seconds": cpu,
        "model": str(out / "model"),
        "dropped": dropped,
        "peak_rss_mb": peak,
    }


def held_out_accuracy(model_dir: str, pairs: Path, max_length: int, dtype: str = "fp32") -> float:
    """Pairwise accuracy on the validation split, both models scored by the same code
    in `dtype`."""
    from orchrm.scoring.local import OrchRM

    rows = [json.loads(x) for x in (pairs / "validation.jsonl").read_text().splitlines()]
    rm = OrchRM.load(model_dir, check_version=False, dtype=dtype)
    rm.metadata["max_length"] = max_length
    chosen = rm.score_texts([r["prompt"] + r["chosen"] for r in rows])
    rejected = rm.score_texts([r["prompt"] + r["rejected"] for r in rows])
    return sum(c.score > r.score for c, r in zip(chosen, rejected, strict=True)) / len(rows)

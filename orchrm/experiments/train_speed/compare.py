"""orchrm's reward-model training loop against TRL's `RewardTrainer`, same everything
(what `benchmarks/rm_train.py` measures): the same pairs as the same token ids, steps,
batch size, learning rate, warm-up, max length and dropout (off), both clipping gradients
to norm 1.0 and drawing batches at random; both models then scored by the same code on
the same held-out pairs. Each run is meant for a process of its own, so that its peak
memory is its own: this module imports what a run needs when it runs.
"""

from __future__ import annotations

import json
import time
from pathlib import Path


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


def subset(pairs: Path, n: int, out: Path) -> Path:
    """The first n training pairs and the whole validation split, in a new folder."""
    out.mkdir(parents=True, exist_ok=True)
    train = (pairs / "train.jsonl").read_text().splitlines()[:n]
    (out / "train.jsonl").write_text("\n".join(train) + "\n")
    (out / "validation.jsonl").write_text((pairs / "validation.jsonl").read_text())
    return out


def padding_shares(pairs: Path, batch: int, max_length: int) -> tuple[int, list]:
    """Share of real tokens in the forward passes of one epoch of the training pairs:
    random batches in one pass each (as TRL pads them), in orchrm's length-sorted
    passes, and batches sorted by length 64 at a time. Returns (pairs, [(label, share)])."""
    from orchrm.rmodel.backbone import default_backbone, load_backbone
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


def run_orchrm(
    pairs: Path, out: Path, *, train_pairs: int, batch: int, lr: float, max_length: int,
    sort_batches: int,
) -> dict:  # fmt: skip
    """Train with orchrm's loop in fp32 (the precision TRL runs in here); returns
    pairs/s, seconds, CPU seconds of the optimizer steps and the model folder."""
    import orchrm.training.train as loop
    from orchrm.training.config import TrainConfig

    # CPU seconds of the optimizer steps, the span `train_seconds` times (validation and
    # checkpoints excluded); on shared cores they vary less than wall time.
    cpu, step = [0.0], loop._train_step

    def timed_step(run, batch):
        start = time.process_time()
        try:
            return step(run, batch)
        finally:
            cpu[0] += time.process_time() - start

    loop._train_step = timed_step
    steps = train_pairs // batch
    summary = loop.train(
        TrainConfig(
            pairs=str(pairs),
            out=str(out),
            max_steps=steps,
            batch_size=batch,
            lr=lr,
            max_length=max_length,
            warmup_ratio=0.1,
            eval_every=steps,
            sort_batches=sort_batches,
            seed=0,
            dtype="fp32",
        ),
        progress=False,
    )
    return {
        "pairs_per_s": summary.pairs_per_second,
        "seconds": summary.train_seconds,
        "cpu_seconds": cpu[0],
        "model": str(out / "model"),
    }


def run_trl(
    pairs: Path, out: Path, *, train_pairs: int, batch: int, lr: float, max_length: int
) -> dict:
    """Train with TRL's `RewardTrainer` on orchrm's token ids (TRL's own preprocessing
    drops a pair with a text over max_length instead of truncating it); returns pairs/s,
    seconds, CPU seconds and the model folder."""
    import datasets
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from trl import RewardConfig, RewardTrainer

    from orchrm.rmodel.backbone import default_backbone
    from orchrm.training.data import load_splits, tokenize

    backbone = default_backbone()
    tokenizer = AutoTokenizer.from_pretrained(backbone)
    model = AutoModelForSequenceClassification.from_pretrained(backbone, num_labels=1)
    records, _ = load_splits(pairs)
    ids = tokenize(records, tokenizer, max_length)
    data = datasets.Dataset.from_dict({"chosen_ids": ids.chosen, "rejected_ids": ids.rejected})
    config = RewardConfig(
        output_dir=str(out),
        max_steps=train_pairs // batch,
        per_device_train_batch_size=batch,
        learning_rate=lr,
        warmup_steps=0.1,  # a float below 1 is a ratio of the steps
        max_length=max_length,
        bf16=False,
        report_to=[],
        save_strategy="no",
        logging_steps=10,
        seed=0,
    )
    trainer = RewardTrainer(
        model=model, args=config, train_dataset=data, processing_class=tokenizer
    )
    start, cpu = time.perf_counter(), time.process_time()
    metrics = trainer.train().metrics
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    trainer.save_model(str(out / "model"))
    tokenizer.save_pretrained(str(out / "model"))
    pairs_done = config.max_steps * batch
    return {
        "pairs_per_s": pairs_done / metrics.get("train_runtime", seconds),
        "seconds": metrics.get("train_runtime", seconds),
        "cpu_seconds": cpu,
        "model": str(out / "model"),
    }


def held_out_accuracy(model_dir: str, pairs: Path, max_length: int) -> float:
    """Pairwise accuracy on the validation split, both models scored by the same code."""
    from orchrm.scoring.local import OrchRM

    rows = [json.loads(x) for x in (pairs / "validation.jsonl").read_text().splitlines()]
    rm = OrchRM.load(model_dir, check_version=False)
    rm.metadata["max_length"] = max_length
    chosen = rm.score_texts([r["prompt"] + r["chosen"] for r in rows])
    rejected = rm.score_texts([r["prompt"] + r["rejected"] for r in rows])
    return sum(c.score > r.score for c, r in zip(chosen, rejected, strict=True)) / len(rows)

"""The GPU check's reward-model training parts (`orchrm.experiments.gpu_check.check`'s
docstring says what each measures): `train`, `orchrm train`'s own loop on the random
8B-shaped backbone, and `trl`, the same steps through TRL's `RewardTrainer`, each step
timed by a `StepClock` and the peak memory measured."""

from __future__ import annotations

import shutil

from orchrm.experiments.gpu_check.work import MIB, Peak, Row, Work, steady_rows
from orchrm.training.throughput import StepClock


def _train_config(work: Work):
    """`orchrm train`'s settings for the check: the random backbone with LoRA and
    gradient checkpointing, one pair a step, the sizes' steps and length."""
    from orchrm.training.config import TrainConfig

    s = work.sizes
    return TrainConfig(
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


def part_train(work: Work) -> list[Row]:
    """`orchrm train`'s loop on the random backbone (module docstring). Each optimizer
    step (`orchrm.training.train._train_step`) is wrapped by the step clock for the run."""
    import orchrm.training.train as loop
    from orchrm.memplan.plan import plan_from_train_config
    from orchrm.rmodel.packed import packs

    s, config = work.sizes, _train_config(work)
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
            seen["packed"] = packs(run.model)

    loop._train_step = timed_step
    try:
        with Peak(work.cuda) as peak:
            summary = loop.train(config, progress=False)
    finally:
        loop._train_step = step
        shutil.rmtree(config.out, ignore_errors=True)  # the merged model: the backbone's size
    r = steady_rows(clock, seen["flops_per_token"], work.peak_flops)
    r |= {"packed": seen["packed"], "peak_mib": peak.bytes / MIB,
          "plan_peak_mib": plan.memory.peak / MIB,
          "summary_pairs_per_s": summary.pairs_per_second, "summary_mfu": summary.mfu}  # fmt: skip
    work.results["train"] = r
    steps = f"steps 2-{s.train_steps}"
    return [
        Row("train", "pairs/s", r["pairs_per_s"],
            f"orchrm train, {steps}; all {s.train_steps}: {summary.pairs_per_second:.3g}"),
        Row("train", "tokens/s", r["tokens_per_s"], f"2 x {s.max_length} tokens a step, "
            + ("packed into one row" if seen["packed"] else "padded")),
        Row("train", "MFU", r["mfu"],
            f"4N + 2N_trained a token, of {work.peak_flops / 1e12:.3g} TFLOP/s; goal >= 0.35"),
        Row("train", "peak memory MiB", r["peak_mib"],
            f"plan {r['plan_peak_mib']:,.0f} MiB (measured/plan "
            f"{r['peak_mib'] / r['plan_peak_mib']:.2f})"),
        Row("train", "first step s", r["first_step_s"], "left out of the rates above"),
    ]  # fmt: skip


def _step_clock_callback(clock: StepClock, tokens_a_step: int):
    """A `transformers.TrainerCallback` that times each step on `clock`, from its start
    to its end, as `tokens_a_step` tokens."""
    from transformers import TrainerCallback

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            clock.begin()

        def on_step_end(self, args, state, control, **kwargs):
            clock.end(tokens_a_step)

    return Clock()


def _trl_config(work: Work):
    """TRL's `RewardConfig` for the check's steps: batch 1, `max_length` tokens, the dtype
    asked for, gradient checkpointing, no saving, reporting or progress bar."""
    from trl import RewardConfig

    s = work.sizes
    return RewardConfig(
        output_dir=str(work.folder / "trl"),
        max_steps=s.train_steps,
        per_device_train_batch_size=1,
        learning_rate=5e-5,
        warmup_steps=0.1,
        max_length=s.max_length,
        bf16=work.dtype == "bf16",
        gradient_checkpointing=True,
        gradient_checkpointing_kwargs={"use_reentrant": False},
        use_cpu=not work.cuda,
        report_to=[],
        save_strategy="no",
        logging_steps=s.train_steps,
        disable_tqdm=True,
        seed=0,
    )


def _trl_trainer(work: Work, callback):
    """TRL's `RewardTrainer` on the random backbone and the check's pairs (the same token
    ids as orchrm's loop reads), with orchrm's LoRA on every linear layer and `callback`.
    Raises RuntimeError when a text is not exactly `max_length` tokens."""
    import datasets
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from trl import RewardTrainer

    from orchrm.training.data import load_splits, tokenize

    s = work.sizes
    tokenizer = AutoTokenizer.from_pretrained(work.rm_backbone)
    model = AutoModelForSequenceClassification.from_pretrained(
        work.rm_backbone,
        num_labels=1,
        dtype=torch.bfloat16 if work.dtype == "bf16" else torch.float32,
    )
    records, _ = load_splits(work.pairs)
    ids = tokenize(records, tokenizer, s.max_length)
    if {len(x) for x in ids.chosen + ids.rejected} != {s.max_length}:
        raise RuntimeError(f"the pairs' texts are not all {s.max_length} tokens long")
    data = datasets.Dataset.from_dict({"chosen_ids": ids.chosen, "rejected_ids": ids.rejected})
    lora = LoraConfig(task_type="SEQ_CLS", r=s.lora_r, lora_alpha=s.lora_r,
                      lora_dropout=0.05, target_modules="all-linear",
                      modules_to_save=["score"])  # fmt: skip
    return RewardTrainer(model=model, args=_trl_config(work), train_dataset=data,
                         processing_class=tokenizer, peft_config=lora,
                         callbacks=[callback])  # fmt: skip


def part_trl(work: Work) -> list[Row]:
    """The same steps through TRL's `RewardTrainer` (module docstring)."""
    from orchrm.rl.grpo import quiet_logs
    from orchrm.training.throughput import flops_per_token

    s = work.sizes
    clock = StepClock(work.cuda)
    with Peak(work.cuda) as peak:
        trainer = _trl_trainer(work, _step_clock_callback(clock, 2 * s.max_length))
        quiet_logs(trainer, progress=False)
        trainer.train()
        per_token = flops_per_token(trainer.model)
    del trainer
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

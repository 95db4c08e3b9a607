"""Train a Bradley-Terry reward model on win/lose pairs of orchestrations.

    orchrm train --pairs runs/pairs --out runs/rm
    accelerate launch --multi_gpu --num_processes 2 -m orchrm train --pairs ... --out ...

(`--multi_gpu` starts the processes with torchrun; without a GPU they train on the CPU
over gloo.)

Loss -log sigmoid(r_chosen - r_rejected) (optional per-pair margin, soft labels from
each pair's weight and reward-centering term). Chosen and rejected texts go through the
model in one forward pass (a [CLS]-reading encoder computes its last layer at [CLS]
only, `orchrm.rmodel.last_layer`), cut by length into a few passes that each pad to
their own longest text, in one autograd graph (`orchrm.training.loss`); batches are
drawn at random, optionally under a token budget per pass (`orchrm.training.batching`);
gradients are accumulated over a step's passes with every pair weighing the same; bf16
where the hardware runs it fast (frozen LoRA base in bf16, trained parameters in fp32);
gradient checkpointing; linear warm-up and decay; early stopping on validation accuracy;
tokens/s and MFU (`orchrm.training.throughput`). Multi-process data parallelism,
DeepSpeed and FSDP (configs/accelerate/) come from `accelerate`
(`orchrm.training.parallel`). Resumable checkpoints (`orchrm.training.checkpoint`:
safetensors weights, optimizer state loaded with `weights_only`, JSON trainer state) are
written atomically, and a resume passes over a damaged one to the newest intact one;
before the steps of each checkpoint interval, the disk of OUT is checked for room for a
checkpoint and the model (`orchrm.training.output`); because the batch order is a
function of the seed and epoch and dropout is seeded per pass, a resumed run continues
exactly where the interrupted one stopped, repeating and skipping nothing.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path

import torch
from accelerate import Accelerator
from accelerate.utils import broadcast_object_list
from transformers import get_linear_schedule_with_warmup

from orchrm.configs import dump_config
from orchrm.errors import ConfigError, InputError
from orchrm.progress import progress_bar
from orchrm.rmodel.backbone import load_backbone, padding_side
from orchrm.rmodel.packed import packs
from orchrm.rmodel.precision import resolve_dtype
from orchrm.rmodel.tokens import default_backbone
from orchrm.training.batching import (
    MicroBatch,
    Step,
    epoch_steps,
    passes_padded_tokens,
    steps_done,
)
from orchrm.training.build import (
    add_lora,
    load_for_training,
    model_metadata,
    param_groups,
    record_training,
    save_model,
)
from orchrm.training.checkpoint import (
    TrainState,
    remove_checkpoints,
    remove_unfinished,
    require_checkpoint,
    require_room,
    resume_newest,
    save_checkpoint,
)
from orchrm.training.config import TrainConfig
from orchrm.training.data import Pairs, bootstrap, load_splits, pair_texts, tokenize

# evaluate_file and disable_dropout: imported from here by `orchrm evaluate-rm` and
# orchrm.memplan.probe.
from orchrm.training.evaluate import evaluate_file, pairwise_accuracy  # noqa: F401
from orchrm.training.heap import reused_heap
from orchrm.training.loss import pair_loss
from orchrm.training.output import settle_folder
from orchrm.training.parallel import (
    Placement,
    configure_deepspeed,
    make_accelerator,
    model_to_save,
    placement,
)
from orchrm.training.summary import TrainSummary, summarize
from orchrm.training.throughput import Meter, device_peak_flops, flops_per_token
from orchrm.training.tracking import StepStats, Tracker, progress_text, step_values


def _say(message: str) -> None:
    """A note about the run (checkpoints removed, skipped, resumed from) on stderr."""
    print(f"orchrm train: {message}", file=sys.stderr, flush=True)


@dataclass
class _Run:
    """Everything one training run holds: built by `_prepare`, advanced by `train`."""

    config: TrainConfig
    accelerator: Accelerator
    placement: Placement
    backbone: str
    model: object
    tokenizer: object
    train_records: list[dict]
    train_pairs: Pairs
    val_pairs: Pairs
    bf16: bool
    checkpointing: bool
    meter: Meter
    side: str
    """The side texts are padded on (`orchrm.rmodel.backbone.padding_side`)."""
    optimizer: torch.optim.Optimizer | None = None
    scheduler: object = None
    total_steps: int = 0
    state: TrainState = field(default_factory=TrainState)
    resumed_step: int | None = None
    tracker: Tracker | None = None
    stats: StepStats = field(default_factory=StepStats)
    """The current step's margins and ranks by kind, for the tracker."""
    after_pass: Callable[[], None] = field(default=lambda: None)
    """Called after each pass's backward (`orchrm.training.heap.reused_heap`)."""

    @cached_property
    def widths(self) -> list[int]:
        """Tokens of the longer text of each training pair (what it pads a batch to)."""
        return self.train_pairs.widths()

    @cached_property
    def lengths(self) -> list[int]:
        """Tokens of both texts of each training pair (what sorted batches are sorted by)."""
        return self.train_pairs.lengths()

    @cached_property
    def packed(self) -> bool:
        """Whether the model computes a pass's texts packed into one row."""
        return packs(self.model)

    @property
    def main(self) -> bool:
        return self.accelerator.is_main_process

    @property
    def out(self) -> Path:
        return Path(self.config.out)

    def epoch(self, epoch: int) -> list[Step]:
        """This process's steps in `epoch`."""
        config, accelerator = self.config, self.accelerator
        return epoch_steps(
            self.widths,
            lengths=self.lengths,
            batch_size=config.batch_size,
            grad_accumulation=config.grad_accumulation,
            max_tokens=config.max_tokens_per_batch,
            seed=config.seed,
            epoch=epoch,
            group=config.sort_batches,
            processes=accelerator.num_processes,
            rank=accelerator.process_index,
            **(self.task_blocks if config.task_batches else {}),
        )

    @cached_property
    def task_blocks(self) -> dict:
        """`epoch_steps`'s `tasks` and `texts` of the training pairs (task batches)."""
        return {
            "tasks": self.train_pairs.tasks,
            "texts": [pair_texts(r) for r in self.train_records],
        }


def _prepare(config: TrainConfig, resume: bool, ensemble_seed: int | None = None) -> _Run:
    """Configure the accelerator, model and data, then `_schedule`."""
    if config.num_threads:
        torch.set_num_threads(config.num_threads)
    cuda = torch.cuda.is_available()
    bf16 = resolve_dtype(config.precision(), torch.device("cuda" if cuda else "cpu")) == "bf16"
    accelerator = make_accelerator(not cuda, "bf16" if bf16 else "no")
    where = placement(accelerator)
    if resume and where.wrapped:
        raise ConfigError("--resume is not supported under DeepSpeed or FSDP launches")
    if resume:
        require_checkpoint(Path(config.out))
    # the data first: a file without pairs is said before a model loads
    split_seed = config.seed if ensemble_seed is None else ensemble_seed  # members: one split
    train_records, val_records = load_splits(config.pairs, config.validation_share, split_seed)
    if ensemble_seed is not None and config.bootstrap:
        train_records = bootstrap(train_records, config.seed)
    torch.manual_seed(config.seed)  # the score head's initialization
    # configure the model
    backbone = config.backbone or default_backbone()
    model, tokenizer, checkpointing = load_for_training(config, backbone, bf16=bf16, cuda=cuda)
    peak = device_peak_flops(accelerator.device, config.peak_flops)
    # configure the data
    run = _Run(
        config=config,
        accelerator=accelerator,
        placement=where,
        backbone=backbone,
        model=model,
        tokenizer=tokenizer,
        train_records=train_records,
        train_pairs=tokenize(train_records, tokenizer, config.max_length),
        val_pairs=tokenize(val_records, tokenizer, config.max_length),
        bf16=bf16,
        checkpointing=checkpointing,
        meter=Meter(flops_per_token(model), peak),
        side=padding_side(model, tokenizer),
    )
    _schedule(run, resume)
    settings = {k: v for k, v in asdict(config).items() if k != "extra"}
    run.tracker = Tracker(config.report_to, run.out, "train", settings, main=run.main)
    return run


def _schedule(run: _Run, resume: bool) -> None:
    """Configure the steps, optimizer and schedule, resume where a checkpoint stopped,
    and hand model and optimizer to accelerate."""
    config, accelerator, model = run.config, run.accelerator, run.model
    steps = len(run.epoch(0))
    if not steps:
        raise InputError(
            f"{len(run.train_pairs)} training pairs make fewer batches than the "
            f"{accelerator.num_processes} processes, so no step: give more pairs or launch "
            "fewer processes"
        )
    run.total_steps = math.ceil(config.epochs * steps)
    if config.max_steps is not None:
        run.total_steps = min(run.total_steps, config.max_steps)
    run.optimizer = torch.optim.AdamW(
        param_groups(model, config), lr=config.lr, weight_decay=config.weight_decay, fused=True
    )
    run.scheduler = get_linear_schedule_with_warmup(
        run.optimizer, int(config.warmup_ratio * run.total_steps), run.total_steps
    )
    if run.main:
        remove_unfinished(run.out, _say)
        settle_folder(run.out / "model", _say)
        if not resume:
            remove_checkpoints(run.out, _say)
    if resume:
        resumed = resume_newest(
            run.out, model, run.optimizer, run.scheduler, main=run.main, say=_say
        )
        if resumed is not None:
            run.state, run.resumed_step = resumed, resumed.step
            where = run.out / "checkpoints" / f"step-{resumed.step}"
            if run.main:
                _say(f"resuming at step {resumed.step} of {run.total_steps} from {where}")
    configure_deepspeed(accelerator, config.batch_size, config.max_grad_norm)
    run.model, run.optimizer = accelerator.prepare(model, run.optimizer)


def _save_model(run: _Run, metrics: dict) -> None:
    """The model as it is now, with its metadata, into OUT/model (called by the main
    process, and by every process of a sharded run)."""
    config = run.config

    def fresh():
        """A new LoRA model of the backbone to load gathered weights into."""
        dtype = torch.bfloat16 if run.bf16 else torch.float32
        model, _ = load_backbone(run.backbone, config.trust_remote_code, dtype=dtype)
        return add_lora(model, config.lora_r, config.lora_alpha, config.lora_dropout)

    meta = model_metadata(
        config,
        run.backbone,
        run.state.step,
        run.train_records,
        run.train_pairs,
        run.val_pairs,
        metrics,
        planned_steps=run.total_steps,
        resumed_from_step=run.resumed_step,
    )
    model, state_dict = model_to_save(
        run.accelerator, run.model, run.placement, main=run.main, lora=config.lora, fresh=fresh
    )
    if model is not None:
        save_model(model, run.tokenizer, run.out / "model", meta, state_dict)


def _validate(run: _Run) -> bool:
    """Score the validation pairs, keep the model when it is the best so far; True when
    early stopping says to stop. Sharded runs score on every process (forward passes
    gather weights collectively) and take the main process's metrics."""
    config, state = run.config, run.state
    metrics = pairwise_accuracy(
        run.accelerator.unwrap_model(run.model),
        run.val_pairs,
        run.tokenizer.pad_token_id,
        config.batch_size,
        run.accelerator.device,
        run.bf16,
        run.side,
    )
    if run.placement.sharded:
        shared = [metrics]
        broadcast_object_list(shared)
        metrics = shared[0]
    throughput = asdict(run.meter.throughput())
    state.history.append({"step": state.step, **metrics, "throughput": throughput})
    run.tracker.log({"validation": {k: v for k, v in metrics.items() if k != "pairs"}}, state.step)
    if metrics["accuracy"] > state.best_accuracy:
        state.best_accuracy, state.evals_since_best = metrics["accuracy"], 0
        _save_model(run, metrics)
    else:
        state.evals_since_best += 1
    return config.early_stopping is not None and state.evals_since_best >= config.early_stopping


def _finish_step(run: _Run) -> bool:
    """Validate and checkpoint on schedule; True (on every process) when training stops."""
    config, state, last = run.config, run.state, run.state.step >= run.total_steps
    stop = False
    due = (state.step % config.eval_every == 0 or last) and len(run.val_pairs)
    if due and (run.main or run.placement.sharded):
        stop = _validate(run)
    save_every = config.save_every or config.eval_every
    saving = state.step % save_every == 0 or last or stop
    if run.main and saving and not run.placement.wrapped:
        save_checkpoint(
            run.out,
            run.accelerator.unwrap_model(run.model),
            run.optimizer,
            run.scheduler,
            state=state,
            keep=config.keep_checkpoints,
        )
    flag = [stop]
    broadcast_object_list(flag)
    return flag[0]


def _train_pass(run: _Run, micro: MicroBatch, step_pairs: int) -> tuple[float, int]:
    """One forward and backward pass; its pairs weigh 1 / `step_pairs` each in the step's
    loss (a filler weighs 0). Returns (summed pair loss, pairs ranked right)."""
    config, state, pairs = run.config, run.state, run.train_pairs
    # Dropout seeded per pass: a resumed run draws what the interrupted one would.
    torch.manual_seed(config.seed * 1_000_003 + state.epoch * 100_003 + state.micro)
    sequences = [pairs.chosen[i] for i in micro.pairs] + [pairs.rejected[i] for i in micro.pairs]
    margins = [pairs.margins[i] for i in micro.pairs] if config.margin else None
    soft = config.soft_labels and pairs.weights is not None
    weights = [pairs.weights[i] for i in micro.pairs] if soft else None
    # Sharded runs gather weights in every forward pass, and DDP broadcasts buffers in
    # each: every process must run as many, so only a lone process joins passes.
    passes = 1 if run.placement.sharded else config.forward_passes
    join = run.accelerator.num_processes == 1
    with run.accelerator.autocast():
        losses, diff, texts = pair_loss(
            run.model,
            sequences,
            margins,
            pad_id=run.tokenizer.pad_token_id,
            device=run.accelerator.device,
            center_rewards=config.center_rewards,
            passes=passes,
            side=run.side,
            join=join,
            weights=weights,
        )
    weight = 0.0 if micro.filler else 1.0 / step_pairs
    run.accelerator.backward(losses.sum() * weight)
    run.after_pass()
    state.micro += 1
    if micro.filler:
        return 0.0, 0
    state.pairs_seen += len(micro.pairs)  # this process's; summed over processes at the end
    if run.tracker.active:
        run.stats.add(diff.detach().float().tolist(), [pairs.kinds[i] for i in micro.pairs])
    lengths = [len(s) for s in texts]  # each distinct text computed once
    read = sum(lengths) if run.packed else passes_padded_tokens(lengths, passes, join)
    run.meter.add(sum(lengths), read)
    return losses.sum().item(), int((diff > 0).sum().item())


def _train_step(run: _Run, step: Step) -> tuple[float, float, float | None]:
    """One optimizer step over the step's passes, gradients synchronized across
    processes on the last one only; returns (loss, share of pairs ranked right, the
    gradients' norm before clipping: None when neither clipping nor tracking reads it)."""
    accelerator, total_loss, wins, norm = run.accelerator, 0.0, 0, None
    last = len(step.micro_batches) - 1
    for k, micro in enumerate(step.micro_batches):
        # DeepSpeed reads sync_gradients to know the last pass of a step.
        accelerator.sync_gradients = k == last
        skip_sync = accelerator.no_sync(run.model) if k < last else contextlib.nullcontext()
        with skip_sync:
            loss, right = _train_pass(run, micro, step.pairs)
        total_loss, wins = total_loss + loss, wins + right
    if run.config.max_grad_norm:
        # (Under DeepSpeed this only reads the norm: its engine clips, from the
        # `gradient_clipping` that `configure_deepspeed` sets.)
        norm = accelerator.clip_grad_norm_(run.model.parameters(), run.config.max_grad_norm)
    elif run.tracker.active:
        norm = accelerator.clip_grad_norm_(run.model.parameters(), math.inf)  # read, not clip
    run.optimizer.step()
    run.optimizer.zero_grad()
    norm = float(norm) if norm is not None else None
    return total_loss / step.pairs, wins / step.pairs, norm


def _track_step(
    run: _Run, loss: float, accuracy: float, norm: float | None, learning_rate: float
) -> None:
    """The step's scalars to the tracker (this process's pairs; throughput so far)."""
    if run.tracker.active:
        rate, epoch = run.meter.throughput(), run.state.epoch
        values = step_values(loss, accuracy, norm, learning_rate, epoch, run.stats, rate)
        run.tracker.log(values, run.state.step)
        run.stats = StepStats()


def _loop(run: _Run, progress: bool) -> bool:
    """Train until `total_steps` or early stopping; True when it stopped early."""
    state, recent = run.state, []
    save_every = run.config.save_every or run.config.eval_every
    run.model.train()
    with progress_bar("training reward model", run.total_steps, progress and run.main) as (
        bar,
        task,
    ):
        bar.update(task, completed=state.step)
        while state.step < run.total_steps:
            steps = run.epoch(state.epoch)
            for step in steps[steps_done(steps, state.micro) :]:
                if state.step >= run.total_steps:
                    break
                if state.step % save_every == 0:
                    model = run.accelerator.unwrap_model(run.model)
                    require_room(run.out, model, run.optimizer, main=run.main,
                                 checkpoint=not run.placement.wrapped)  # fmt: skip
                start = time.perf_counter()
                loss, accuracy, norm = _train_step(run, step)
                recent = [*recent[-49:], (loss, accuracy)]
                learning_rate = run.scheduler.get_last_lr()[0]
                run.scheduler.step()
                state.step += 1
                seconds = time.perf_counter() - start
                state.train_seconds += seconds
                run.meter.seconds += seconds
                _track_step(run, loss, accuracy, norm, learning_rate)
                bar.update(
                    task,
                    completed=state.step,
                    description=progress_text(
                        recent, run.state.best_accuracy, run.meter.throughput()
                    ),
                )
                if _finish_step(run):
                    return True
            if steps_done(steps, state.micro) >= len(steps):
                state.epoch, state.micro = state.epoch + 1, 0
    return False


def train(
    config: TrainConfig,
    resume: bool = False,
    progress: bool = True,
    ensemble_seed: int | None = None,
) -> TrainSummary:
    """Train (or, with `resume`, continue) a reward model into OUT/model, its settings
    into OUT/config.yaml (once the pairs and the model have loaded: a run refused before
    writes nothing); returns the summary that is also stored in the saved model's
    metadata. Without `resume`, an earlier run's checkpoints in OUT are removed. With
    `config.ensemble` above 1, an ensemble (`orchrm.training.ensemble`); `ensemble_seed`
    is the seed of the ensemble a member belongs to (its validation split, and with
    `bootstrap` its draw of the training tasks from its own seed)."""
    if config.ensemble > 1:
        from orchrm.training.ensemble import train_ensemble

        return train_ensemble(config, train, resume, progress)
    run = _prepare(config, resume, ensemble_seed)
    if run.main:
        dump_config(config, run.out / "config.yaml")
    cpu = run.accelerator.device.type == "cpu"
    try:
        with reused_heap(config.reuse_heap and cpu) as run.after_pass:
            stopped = _loop(run, progress)
    finally:
        run.tracker.close()
    summary = summarize(run, stopped)
    if not len(run.val_pairs) and (run.main or run.placement.sharded):
        _save_model(run, {})  # nothing to select on: the last model is the model
    if run.main:
        record_training(run.out / "model", summary.to_dict())
    run.accelerator.wait_for_everyone()
    return summary

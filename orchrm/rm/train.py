"""Train a Bradley-Terry reward model on win/lose pairs of orchestrations.

    orchrm train --pairs runs/pairs --out runs/rm
    accelerate launch --multi_gpu --num_processes 2 -m orchrm.rm.train --pairs ... --out ...

(`--multi_gpu` starts the processes with torchrun; without a GPU they train on the CPU
over gloo.)

Loss -log sigmoid(r_chosen - r_rejected) (optional per-pair margin and reward-centering
term). Chosen and rejected texts go through the model in one forward pass; batches group
pairs of similar length and pad only to their longest member; bf16 autocast where the
hardware supports it; gradient accumulation; linear warm-up and decay; early stopping on
validation accuracy. Multi-process data parallelism comes from `accelerate`. Resumable
checkpoints (`orchrm.rm.checkpoint`: safetensors weights, optimizer state loaded with
`weights_only`, JSON trainer state) are written atomically, and a resume passes over a
damaged one to the newest intact one; because the batch order is a function of the
seed and epoch and dropout is seeded per step, a resumed run continues exactly where the
interrupted one stopped, repeating and skipping nothing.
"""

from __future__ import annotations

import copy
import json
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState, PartialState
from accelerate.utils import broadcast_object_list
from transformers import get_linear_schedule_with_warmup

from orchrm.progress import progress_bar
from orchrm.rm.checkpoint import (
    TrainState,
    apply_checkpoint,
    newest_intact,
    read_checkpoint,
    remove_unfinished,
    save_checkpoint,
)
from orchrm.rm.config import TrainConfig, default_backbone
from orchrm.rm.data import Pairs, collate, data_hash, length_grouped_batches, load_splits, tokenize
from orchrm.rm.model import add_lora, bf16_supported, load_backbone, rewards, save_model


def disable_dropout(model) -> None:
    """Set every dropout of the model to zero (modules and attention kernels)."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        if hasattr(module, "dropout_prob"):  # attention layers that pass it to SDPA
            module.dropout_prob = 0.0


def pairwise_accuracy(
    model, pairs: Pairs, pad_id: int, batch_size: int, device, bf16: bool
) -> dict:
    """Pairwise accuracy overall, per pair kind and per domain; reward mean and spread."""
    if not len(pairs):
        return {}
    was_training = model.training
    model.eval()
    # A plan is in many pairs of its task (every right one against every wrong one):
    # each distinct text is scored once.
    distinct = list(dict.fromkeys(tuple(ids) for ids in pairs.chosen + pairs.rejected))
    scored = rewards(model, [list(ids) for ids in distinct], pad_id, batch_size * 2, device, bf16)
    reward_of = dict(zip(distinct, scored, strict=True))
    model.train(was_training)
    chosen = [reward_of[tuple(ids)] for ids in pairs.chosen]
    rejected = [reward_of[tuple(ids)] for ids in pairs.rejected]
    wins = [c > r for c, r in zip(chosen, rejected, strict=True)]

    def accuracy_by(labels: list[str]) -> dict[str, float]:
        groups: dict[str, list[bool]] = {}
        for label, win in zip(labels, wins, strict=True):
            groups.setdefault(label or "unknown", []).append(win)
        return {k: sum(v) / len(v) for k, v in sorted(groups.items())}

    everything = chosen + rejected
    return {
        "accuracy": sum(wins) / len(wins),
        "accuracy_by_kind": accuracy_by(pairs.kinds),
        "accuracy_by_domain": accuracy_by(pairs.domains),
        "pairs": len(wins),
        "reward_mean": statistics.fmean(everything),
        "reward_std": statistics.pstdev(everything),
    }


def evaluate_file(model_dir: str | Path, pairs_file: str | Path, batch_size: int = 32) -> dict:
    """`pairwise_accuracy` of a saved reward model on an exported pair file (e.g. the
    test split)."""
    from orchrm.rm.data import read_pair_file
    from orchrm.rm.model import OrchRM

    rm = OrchRM.load(model_dir, batch_size=batch_size)
    pairs = tokenize(read_pair_file(pairs_file), rm.tokenizer, rm.max_length)
    return pairwise_accuracy(
        rm.model, pairs, rm.tokenizer.pad_token_id, batch_size, rm.device, rm.bf16
    )


@dataclass
class TrainSummary:
    """What a training run did; also stored under `training` in the model's metadata."""

    steps: int
    """Optimizer steps done."""
    pairs_seen: int
    """Training pairs read, summed over processes."""
    train_seconds: float
    """Forward, backward and optimizer time only (evaluation and saving excluded)."""
    pairs_per_second: float
    best_validation_accuracy: float | None
    """Pairwise accuracy of the saved model on the validation pairs (None: none)."""
    history: list[dict]
    """Every validation pass: its step and `pairwise_accuracy` metrics."""
    train_pairs: int
    validation_pairs: int
    truncated_texts: int
    """Texts (of both splits) cut to `max_length`."""
    bf16: bool
    processes: int
    stopped_early: bool
    resumed_from_step: int | None

    def to_dict(self) -> dict:
        return asdict(self)


def pair_loss(
    model,
    sequences: list[list[int]],
    margins: list[float] | None,
    *,
    pad_id: int,
    device,
    center_rewards: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Bradley-Terry loss of one batch: `sequences` holds the chosen texts then the
    rejected ones (one forward pass for both); returns (loss, chosen - rejected)."""
    inputs = {k: v.to(device) for k, v in collate(sequences, pad_id).items()}
    scores = model(**inputs).logits.squeeze(-1).float()
    chosen, rejected = scores.chunk(2)
    diff = chosen - rejected
    if margins is not None:
        diff = diff - torch.tensor(margins, device=device)
    loss = -torch.nn.functional.logsigmoid(diff).mean()
    if center_rewards:
        loss = loss + center_rewards * ((chosen + rejected) ** 2).mean()
    return loss, diff


def _say(message: str) -> None:
    """A note about the run (checkpoints removed, skipped, resumed from) on stderr."""
    print(f"orchrm train: {message}", file=sys.stderr, flush=True)


def _resume(out: Path, model, optimizer, scheduler, *, main: bool) -> TrainState | None:
    """Load the newest intact checkpoint into model, optimizer and scheduler and return
    its state (None: there is none). The main process chooses, so every process resumes
    from the same one."""
    found = newest_intact(out, model, optimizer, say=_say) if main else None
    chosen = [found.path.name if found else None]
    broadcast_object_list(chosen)
    if chosen[0] is None:
        return None
    if found is None:
        found = read_checkpoint(out / "checkpoints" / chosen[0], model, optimizer)
    return apply_checkpoint(found, model, optimizer, scheduler)


def _param_groups(model, config: TrainConfig) -> list[dict]:
    """One AdamW group, or two when the score head gets its own learning rate."""
    prefix = getattr(model, "base_model_prefix", "")
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if config.head_lr is None or config.lora or not prefix:
        return [{"params": [p for _, p in named]}]
    head = [p for n, p in named if not n.startswith(prefix + ".")]
    body = [p for n, p in named if n.startswith(prefix + ".")]
    return [{"params": body}, {"params": head, "lr": config.head_lr}]


def _accelerator(cpu: bool, mixed_precision: str, grad_accumulation: int) -> Accelerator:
    """accelerate keeps one precision per process and refuses another one later. A
    process that is not part of a multi-process launch (a notebook, the demo, a test
    session) may train several models with different settings, so there it starts
    afresh; a launched process keeps the launch's state."""
    state = AcceleratorState._shared_state
    other = state and state.get("_mixed_precision") != mixed_precision
    if other and PartialState().num_processes == 1:
        AcceleratorState._reset_state()
    # cpu=True is what makes accelerate run several CPU processes over gloo (MULTI_CPU).
    return Accelerator(
        cpu=cpu, mixed_precision=mixed_precision, gradient_accumulation_steps=grad_accumulation
    )


@dataclass
class _Run:
    """Everything one training run holds: built by `_prepare`, advanced by `train`."""

    config: TrainConfig
    accelerator: Accelerator
    backbone: str
    model: object
    tokenizer: object
    optimizer: torch.optim.Optimizer
    scheduler: object
    train_records: list[dict]
    train_pairs: Pairs
    val_pairs: Pairs
    lengths: list[int]
    """Tokens of each training pair (chosen + rejected), for length-grouped batches."""
    per_process: int
    """Batches each process reads per epoch."""
    total_steps: int
    state: TrainState
    resumed_step: int | None
    bf16: bool

    @property
    def main(self) -> bool:
        return self.accelerator.is_main_process

    @property
    def out(self) -> Path:
        return Path(self.config.out)


def _prepare(config: TrainConfig, resume: bool) -> _Run:
    """Configure the accelerator, model, data, optimizer and schedule, and resume."""
    if config.num_threads:
        torch.set_num_threads(config.num_threads)
    cpu = not torch.cuda.is_available()
    device = torch.device("cpu" if cpu else "cuda")
    use_bf16 = bf16_supported(device) if config.bf16 is None else config.bf16
    accelerator = _accelerator(cpu, "bf16" if use_bf16 else "no", config.grad_accumulation)
    torch.manual_seed(config.seed)  # the score head's initialization
    # configure the model
    backbone = config.backbone or default_backbone()
    model, tokenizer = load_backbone(backbone, config.trust_remote_code)
    if config.lora:
        model = add_lora(model, config.lora_r, config.lora_alpha, config.lora_dropout)
    # configure the data
    train_records, val_records = load_splits(config.pairs, config.validation_share, config.seed)
    train_pairs = tokenize(train_records, tokenizer, config.max_length)
    val_pairs = tokenize(val_records, tokenizer, config.max_length)
    lengths = [
        len(c) + len(r) for c, r in zip(train_pairs.chosen, train_pairs.rejected, strict=True)
    ]
    batches = length_grouped_batches(lengths, config.batch_size, config.seed, 0)
    per_process = len(batches) // accelerator.num_processes
    steps_per_epoch = max(1, per_process // config.grad_accumulation)
    total_steps = math.ceil(config.epochs * steps_per_epoch)
    if config.max_steps is not None:
        total_steps = min(total_steps, config.max_steps)
    # configure the optimizer and schedule, then resume where a checkpoint stopped
    if config.disable_dropout:
        disable_dropout(model)
    optimizer = torch.optim.AdamW(
        _param_groups(model, config), lr=config.lr, weight_decay=config.weight_decay, fused=True
    )
    scheduler = get_linear_schedule_with_warmup(
        optimizer, int(config.warmup_ratio * total_steps), total_steps
    )
    out, main = Path(config.out), accelerator.is_main_process
    if main:
        remove_unfinished(out, _say)
    resumed = _resume(out, model, optimizer, scheduler, main=main) if resume else None
    model, optimizer = accelerator.prepare(model, optimizer)
    return _Run(
        config,
        accelerator,
        backbone,
        model,
        tokenizer,
        optimizer,
        scheduler,
        train_records,
        train_pairs,
        val_pairs,
        lengths,
        per_process,
        total_steps,
        state=resumed if resumed is not None else TrainState(),
        resumed_step=None if resumed is None else resumed.step,
        bf16=use_bf16,
    )


def _save_model(run: _Run, metrics: dict) -> None:
    """The model as it is now, with its metadata, into OUT/model."""
    config = run.config
    meta = {
        "backbone": run.backbone,
        "max_length": config.max_length,
        "step": run.state.step,
        "pair_data_hash": data_hash(run.train_records),
        "metrics": metrics,
        "reward_mean": metrics.get("reward_mean", 0.0),
        "reward_std": metrics.get("reward_std", 1.0),
        "lora": config.lora,
        "config": {k: v for k, v in asdict(config).items() if k != "extra"},
        "extra": config.extra,
    }
    unwrapped = run.accelerator.unwrap_model(run.model)
    if config.lora:  # merge a copy: training goes on with the adapters
        unwrapped = copy.deepcopy(unwrapped)
    save_model(unwrapped, run.tokenizer, run.out / "model", meta)


def _validate(run: _Run) -> bool:
    """Score the validation pairs, keep the model when it is the best so far; True when
    early stopping says to stop."""
    config, state = run.config, run.state
    metrics = pairwise_accuracy(
        run.accelerator.unwrap_model(run.model),
        run.val_pairs,
        run.tokenizer.pad_token_id,
        config.batch_size,
        run.accelerator.device,
        run.bf16,
    )
    state.history.append({"step": state.step, **metrics})
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
    if (state.step % config.eval_every == 0 or last) and run.main and len(run.val_pairs):
        stop = _validate(run)
    save_every = config.save_every or config.eval_every
    if run.main and (state.step % save_every == 0 or last or stop):
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


def _train_micro_batch(run: _Run, batch: list[int]) -> tuple[float, float]:
    """One forward and backward pass (an optimizer step when accumulation is done);
    returns (loss, share of pairs ranked right)."""
    config, state, pairs = run.config, run.state, run.train_pairs
    # Dropout seeded per micro-batch: a resumed run draws what the interrupted one would.
    torch.manual_seed(config.seed * 1_000_003 + state.epoch * 100_003 + state.micro)
    sequences = [pairs.chosen[i] for i in batch] + [pairs.rejected[i] for i in batch]
    margins = [pairs.margins[i] for i in batch] if config.margin else None
    with run.accelerator.accumulate(run.model), run.accelerator.autocast():
        loss, diff = pair_loss(
            run.model,
            sequences,
            margins,
            pad_id=run.tokenizer.pad_token_id,
            device=run.accelerator.device,
            center_rewards=config.center_rewards,
        )
        run.accelerator.backward(loss)
        run.optimizer.step()
        run.optimizer.zero_grad()
    state.micro += 1
    state.pairs_seen += len(batch)  # this process's; summed over processes at the end
    return loss.item(), (diff > 0).float().mean().item()


def _progress_text(recent: list[tuple[float, float]], best_accuracy: float) -> str:
    """The progress bar's description: recent loss and accuracy, best validation."""
    loss = statistics.fmean(x for x, _ in recent)
    acc = statistics.fmean(a for _, a in recent)
    val = f" val {best_accuracy:.3f}" if best_accuracy >= 0 else ""
    return f"training reward model: loss {loss:.3f} acc {acc:.2f}{val}"


def _loop(run: _Run, progress: bool) -> bool:
    """Train until `total_steps` or early stopping; True when it stopped early."""
    config, state, accelerator = run.config, run.state, run.accelerator
    world, rank = accelerator.num_processes, accelerator.process_index
    start, recent = time.perf_counter(), []
    run.model.train()
    with progress_bar("training reward model", run.total_steps, progress and run.main) as (
        bar,
        task,
    ):
        bar.update(task, completed=state.step)
        while state.step < run.total_steps:
            batches = length_grouped_batches(
                run.lengths, config.batch_size, config.seed, state.epoch
            )
            mine = batches[rank::world][: run.per_process]
            while state.micro < len(mine) and state.step < run.total_steps:
                recent = [*recent[-49:], _train_micro_batch(run, mine[state.micro])]
                if not accelerator.sync_gradients:
                    continue
                run.scheduler.step()
                state.step += 1
                state.train_seconds += time.perf_counter() - start
                text = _progress_text(recent, state.best_accuracy)
                bar.update(task, completed=state.step, description=text)
                if _finish_step(run):
                    return True
                start = time.perf_counter()  # evaluation and saving are not training
            if state.micro >= len(mine):
                state.epoch, state.micro = state.epoch + 1, 0
    return False


def train(config: TrainConfig, resume: bool = False, progress: bool = True) -> TrainSummary:
    """Train (or, with `resume`, continue) a reward model into OUT/model; returns the
    summary that is also stored in the saved model's metadata."""
    run = _prepare(config, resume)
    stopped = _loop(run, progress)
    state, accelerator = run.state, run.accelerator
    device = accelerator.device
    seen = int(accelerator.gather(torch.tensor([state.pairs_seen], device=device)).sum())
    summary = TrainSummary(
        steps=state.step,
        pairs_seen=seen,
        train_seconds=state.train_seconds,
        pairs_per_second=seen / state.train_seconds if state.train_seconds else 0,
        best_validation_accuracy=state.best_accuracy if state.best_accuracy >= 0 else None,
        history=state.history,
        train_pairs=len(run.train_pairs),
        validation_pairs=len(run.val_pairs),
        truncated_texts=run.train_pairs.truncated + run.val_pairs.truncated,
        bf16=run.bf16,
        processes=accelerator.num_processes,
        stopped_early=stopped,
        resumed_from_step=run.resumed_step,
    )
    if run.main:
        if not len(run.val_pairs):  # nothing to select on: the last model is the model
            _save_model(run, {})
        meta_path = run.out / "model" / "orchrm.json"
        meta = json.loads(meta_path.read_text())
        meta["training"] = summary.to_dict()
        meta_path.write_text(json.dumps(meta, indent=2))
    accelerator.wait_for_everyone()
    return summary


def main(argv: list[str] | None = None) -> None:
    """`python -m orchrm.rm.train --pairs DIR --out DIR [--key value ...]`: every
    scalar `TrainConfig` field is a flag, with the field's help (for `accelerate launch`)."""
    from orchrm.configs import argument_parser, given

    parser = argument_parser(TrainConfig, "Train an Orch-RM reward model.")
    parser.add_argument("--resume", action="store_true", help="Continue from the last checkpoint.")
    args = given(parser.parse_args(argv))
    resume = args.pop("resume")
    config = TrainConfig(**args)
    summary = train(config, resume=resume, progress=sys.stderr.isatty())
    if Accelerator().is_main_process:
        print(json.dumps({k: v for k, v in summary.to_dict().items() if k != "history"}, indent=2))


if __name__ == "__main__":
    main()

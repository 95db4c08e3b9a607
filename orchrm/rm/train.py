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
from dataclasses import asdict
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


def evaluate(model, pairs: Pairs, pad_id: int, batch_size: int, device, bf16: bool) -> dict:
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
    """`evaluate` a saved reward model on an exported pair file (e.g. the test split)."""
    from orchrm.rm.data import read_pair_file
    from orchrm.rm.model import OrchRM

    rm = OrchRM.load(model_dir, batch_size=batch_size)
    pairs = tokenize(read_pair_file(pairs_file), rm.tokenizer, rm.max_length)
    return evaluate(rm.model, pairs, rm.tokenizer.pad_token_id, batch_size, rm.device, rm.bf16)


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


def train(config: TrainConfig, resume: bool = False, progress: bool = True) -> dict:
    """Train (or, with `resume`, continue) a reward model; returns the summary that is
    also stored in the saved model's metadata."""
    if config.num_threads:
        torch.set_num_threads(config.num_threads)
    cpu = not torch.cuda.is_available()
    use_bf16 = (
        bf16_supported(torch.device("cpu" if cpu else "cuda"))
        if config.bf16 is None
        else config.bf16
    )
    accelerator = _accelerator(cpu, "bf16" if use_bf16 else "no", config.grad_accumulation)
    main = accelerator.is_main_process
    out = Path(config.out)
    torch.manual_seed(config.seed)  # the score head's initialization

    backbone = config.backbone or default_backbone()
    model, tokenizer = load_backbone(backbone, config.trust_remote_code)
    if config.lora:
        model = add_lora(model, config.lora_r, config.lora_alpha, config.lora_dropout)
    train_records, val_records = load_splits(config.pairs, config.validation_share, config.seed)
    train_pairs = tokenize(train_records, tokenizer, config.max_length)
    val_pairs = tokenize(val_records, tokenizer, config.max_length)
    lengths = [
        len(c) + len(r) for c, r in zip(train_pairs.chosen, train_pairs.rejected, strict=True)
    ]
    world, rank = accelerator.num_processes, accelerator.process_index
    per_process = len(length_grouped_batches(lengths, config.batch_size, config.seed, 0)) // world
    steps_per_epoch = max(1, per_process // config.grad_accumulation)
    total_steps = math.ceil(config.epochs * steps_per_epoch)
    if config.max_steps is not None:
        total_steps = min(total_steps, config.max_steps)

    if config.disable_dropout:
        disable_dropout(model)
    optimizer = torch.optim.AdamW(
        _param_groups(model, config), lr=config.lr, weight_decay=config.weight_decay, fused=True
    )
    scheduler = get_linear_schedule_with_warmup(
        optimizer, int(config.warmup_ratio * total_steps), total_steps
    )
    if main:
        remove_unfinished(out, _say)
    resumed = _resume(out, model, optimizer, scheduler, main=main) if resume else None
    state = resumed if resumed is not None else TrainState()
    resumed_step = None if resumed is None else resumed.step
    model, optimizer = accelerator.prepare(model, optimizer)
    pad = tokenizer.pad_token_id
    save_every = config.save_every or config.eval_every
    device = accelerator.device

    def finish_step() -> bool:
        """Evaluate and checkpoint on schedule; True when training should stop."""
        stop = False
        due_eval = state.step % config.eval_every == 0 or state.step >= total_steps
        if due_eval and main and len(val_pairs):
            metrics = evaluate(
                accelerator.unwrap_model(model), val_pairs, pad, config.batch_size, device, use_bf16
            )
            state.history.append({"step": state.step, **metrics})
            if metrics["accuracy"] > state.best_accuracy:
                state.best_accuracy, state.evals_since_best = metrics["accuracy"], 0
                _save_final(metrics)
            else:
                state.evals_since_best += 1
            stop = (
                config.early_stopping is not None
                and state.evals_since_best >= config.early_stopping
            )
        if main and (state.step % save_every == 0 or state.step >= total_steps or stop):
            save_checkpoint(
                out,
                accelerator.unwrap_model(model),
                optimizer,
                scheduler,
                state=state,
                keep=config.keep_checkpoints,
            )
        flag = [stop]
        broadcast_object_list(flag)
        return flag[0]

    def _save_final(metrics: dict) -> None:
        meta = {
            "backbone": backbone,
            "max_length": config.max_length,
            "step": state.step,
            "pair_data_hash": data_hash(train_records),
            "metrics": metrics,
            "reward_mean": metrics.get("reward_mean", 0.0),
            "reward_std": metrics.get("reward_std", 1.0),
            "lora": config.lora,
            "config": {k: v for k, v in asdict(config).items() if k != "extra"},
            "extra": config.extra,
        }
        unwrapped = accelerator.unwrap_model(model)
        if config.lora:  # merge a copy: training goes on with the adapters
            unwrapped = copy.deepcopy(unwrapped)
        save_model(unwrapped, tokenizer, out / "model", meta)

    start, recent = time.perf_counter(), []
    model.train()
    stopped = False
    with progress_bar("training reward model", total_steps, progress and main) as (bar, task):
        bar.update(task, completed=state.step)
        while state.step < total_steps and not stopped:
            batches = length_grouped_batches(lengths, config.batch_size, config.seed, state.epoch)
            mine = batches[rank::world][:per_process]
            while state.micro < len(mine) and state.step < total_steps:
                batch = mine[state.micro]
                torch.manual_seed(config.seed * 1_000_003 + state.epoch * 100_003 + state.micro)
                sequences = [train_pairs.chosen[i] for i in batch] + [
                    train_pairs.rejected[i] for i in batch
                ]
                inputs = {k: v.to(device) for k, v in collate(sequences, pad).items()}
                with accelerator.accumulate(model), accelerator.autocast():
                    scores = model(**inputs).logits.squeeze(-1).float()
                    chosen, rejected = scores.chunk(2)
                    diff = chosen - rejected
                    if config.margin:
                        diff = diff - torch.tensor(
                            [train_pairs.margins[i] for i in batch], device=device
                        )
                    loss = -torch.nn.functional.logsigmoid(diff).mean()
                    if config.center_rewards:
                        loss = loss + config.center_rewards * ((chosen + rejected) ** 2).mean()
                    accelerator.backward(loss)
                    optimizer.step()
                    optimizer.zero_grad()
                state.micro += 1
                state.pairs_seen += len(batch)  # this process's; summed over processes below
                recent = [*recent[-49:], (loss.item(), (diff > 0).float().mean().item())]
                if accelerator.sync_gradients:
                    scheduler.step()
                    state.step += 1
                    state.train_seconds += time.perf_counter() - start
                    loss_avg = statistics.fmean(x for x, _ in recent)
                    acc_avg = statistics.fmean(a for _, a in recent)
                    val = f" val {state.best_accuracy:.3f}" if state.best_accuracy >= 0 else ""
                    bar.update(
                        task,
                        completed=state.step,
                        description=(
                            f"training reward model: loss {loss_avg:.3f} acc {acc_avg:.2f}{val}"
                        ),
                    )
                    stopped = finish_step()
                    start = time.perf_counter()  # evaluation and saving are not training
                    if stopped:
                        break
            if not stopped and state.micro >= len(mine):
                state.epoch, state.micro = state.epoch + 1, 0

    seen = int(accelerator.gather(torch.tensor([state.pairs_seen], device=device)).sum())
    summary = {
        "steps": state.step,
        "pairs_seen": seen,
        "train_seconds": state.train_seconds,  # forward, backward, optimizer only
        "pairs_per_second": seen / state.train_seconds if state.train_seconds else 0,
        "best_validation_accuracy": state.best_accuracy if state.best_accuracy >= 0 else None,
        "history": state.history,
        "train_pairs": len(train_pairs),
        "validation_pairs": len(val_pairs),
        "truncated_texts": train_pairs.truncated + val_pairs.truncated,
        "bf16": use_bf16,
        "processes": world,
        "stopped_early": stopped,
        "resumed_from_step": resumed_step,
    }
    if main:
        if not len(val_pairs):  # nothing to select on: the last model is the model
            _save_final({})
        meta_path = out / "model" / "orchrm.json"
        meta = json.loads(meta_path.read_text())
        meta["training"] = summary
        meta_path.write_text(json.dumps(meta, indent=2))
    accelerator.wait_for_everyone()
    return summary


def main(argv: list[str] | None = None) -> None:
    """`python -m orchrm.rm.train --pairs DIR --out DIR [--key value ...]`: every
    `TrainConfig` field is a flag (for `accelerate launch`)."""
    import argparse

    parser = argparse.ArgumentParser(description="Train an Orch-RM reward model.")
    for name, f in TrainConfig.__dataclass_fields__.items():
        if name == "extra":
            continue
        kind = {"int": int, "float": float, "str": str}.get(str(f.type).split(" ")[0], str)
        if str(f.type).startswith("bool"):
            parser.add_argument(f"--{name.replace('_', '-')}", action="store_true", default=None)
        else:
            parser.add_argument(f"--{name.replace('_', '-')}", type=kind, default=None)
    parser.add_argument("--resume", action="store_true")
    args = vars(parser.parse_args(argv))
    resume = args.pop("resume")
    config = TrainConfig(**{k: v for k, v in args.items() if v is not None})
    summary = train(config, resume=resume, progress=sys.stderr.isatty())
    if Accelerator().is_main_process:
        print(json.dumps({k: v for k, v in summary.items() if k != "history"}, indent=2))


if __name__ == "__main__":
    main()

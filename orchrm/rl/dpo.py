"""DPO baseline through TRL's `DPOTrainer`, on pairs mined from the world logs.

The pairs are the reward model's (specialized-over-base and correct-over-incorrect,
1:3; `orchrm.experiments.rl_data.dpo_rows`) as raw orchestrator texts under the policy's prompt, so
DPO learns offline from the same executed logs the reward model learned from, with no
sampling and no reward in the loop.
"""

from __future__ import annotations

from pathlib import Path

from orchrm.errors import InputError
from orchrm.rl.config import RLConfig
from orchrm.rl.grpo import quiet_logs, shared_args
from orchrm.rl.policy import load_policy, save_policy


def train_dpo(config: RLConfig, policy_dir: str | Path, rows: list[dict], out: Path, callbacks=()):
    """Train a copy of the policy with DPO on preference `rows` (`prompt`, `chosen`,
    `rejected`); checkpoints under OUT/checkpoints, the final policy in OUT/model.
    Returns (model, tokenizer, the trainer's log history)."""
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    if not rows:
        raise InputError("DPO needs preference pairs; none were mined from the world log")
    model, tokenizer = load_policy(policy_dir)
    args = DPOConfig(
        output_dir=str(out / "checkpoints"),
        max_steps=config.steps,
        learning_rate=config.dpo_lr,
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=max(1, config.steps // 20),
        per_device_train_batch_size=config.num_generations * config.prompts_per_step // 2,
        beta=config.dpo_beta,
        loss_type=["sigmoid", "sft"] if config.dpo_sft_weight else ["sigmoid"],
        loss_weights=[1.0, config.dpo_sft_weight] if config.dpo_sft_weight else None,
        max_length=model.config.n_positions if hasattr(model.config, "n_positions") else None,
        use_cpu=True,
        bf16=False,
        activation_checkpointing=False,
        **shared_args(config, max(1, config.steps // max(1, config.curve_points))),
    )
    trainer = DPOTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        callbacks=list(callbacks),
    )
    quiet_logs(trainer, config.progress)
    trainer.train()
    save_policy(trainer.model, tokenizer, out / "model")
    return trainer.model, tokenizer, trainer.state.log_history

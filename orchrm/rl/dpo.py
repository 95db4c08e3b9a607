"""DPO baseline through TRL's `DPOTrainer`, on pairs mined from the world logs.

The pairs are the reward model's (specialized-over-base and correct-over-incorrect,
1:3; `orchrm.experiments.rl_world.data.dpo_rows`) as raw orchestrator texts under the
policy's prompt, so DPO learns offline from the same executed logs the reward model
learned from, with no sampling and no reward in the loop.
"""

from __future__ import annotations

from pathlib import Path

from orchrm.errors import InputError
from orchrm.rl.config import DPOConfig, PolicyConfig
from orchrm.rl.grpo import quiet_logs, shared_args
from orchrm.rl.policy import load_policy, save_policy


def train_dpo(policy: PolicyConfig, config: DPOConfig, rows: list[dict], out: Path, callbacks=()):
    """Train a copy of the policy `policy.model` with DPO on preference `rows` (`prompt`,
    `chosen`, `rejected`) for `policy.steps` steps at `config.lr`; checkpoints under
    OUT/checkpoints, the final policy in OUT/model. Returns (model, tokenizer, the
    trainer's log history)."""
    from datasets import Dataset
    from trl import DPOConfig as TRLDPOConfig
    from trl import DPOTrainer

    if not rows:
        raise InputError("DPO needs preference pairs; none were mined from the world log")
    model, tokenizer = load_policy(policy.require_model())
    args = TRLDPOConfig(
        output_dir=str(out / "checkpoints"),
        max_steps=policy.steps,
        learning_rate=config.lr,
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=max(1, policy.steps // 20),
        per_device_train_batch_size=config.batch_size,
        beta=config.beta,
        loss_type=["sigmoid", "sft"] if config.sft_weight else ["sigmoid"],
        loss_weights=[1.0, config.sft_weight] if config.sft_weight else None,
        max_length=model.config.n_positions if hasattr(model.config, "n_positions") else None,
        use_cpu=True,
        bf16=False,
        activation_checkpointing=False,
        **shared_args(policy),
    )
    trainer = DPOTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        callbacks=list(callbacks),
    )
    quiet_logs(trainer, policy.progress)
    trainer.train()
    save_policy(trainer.model, tokenizer, out / "model")
    return trainer.model, tokenizer, trainer.state.log_history

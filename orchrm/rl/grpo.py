"""GRPO through TRL's `GRPOTrainer`, with Orch-RM or execution as the reward.

Each step samples `GRPOConfig.num_generations` orchestrations for each of
`prompts_per_step` training questions, rewards them (`orchrm.rl.rewards`), and moves the
policy along the group-relative advantage r(x, z_n) - mean_j r(x, z_j)
(`scale_rewards="none"`, the paper's; `group` also divides by the group's spread). With
the Orch-RM reward no sub-agent runs at all. Everything runs on the CPU here; on a GPU
the same config takes `use_vllm=True` (`GRPOConfig.vllm`) and a LoRA `peft_config`
(`GRPOConfig.lora_r`); see docs/rl.md.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from orchrm.rl.config import GRPOConfig, PolicyConfig
from orchrm.rl.policy import load_policy, save_policy


def grpo_args(policy: PolicyConfig, config: GRPOConfig, out: Path):
    """TRL's `GRPOConfig` for `policy` and `config`. On a CPU: no vLLM, no mixed
    precision, no activation checkpointing (TRL defaults meant for GPUs). On CUDA: bf16
    where the GPU has it, activation checkpointing for a LoRA run, vLLM when
    `config.vllm`."""
    import torch
    from trl import GRPOConfig as TRLGRPOConfig

    cuda = torch.cuda.is_available()
    return TRLGRPOConfig(
        output_dir=str(out / "checkpoints"),
        max_steps=policy.steps,
        learning_rate=policy.lr,
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=max(1, policy.steps // 20),
        per_device_train_batch_size=config.batch_size,
        gradient_accumulation_steps=1,
        num_generations=config.num_generations,
        max_completion_length=policy.max_completion_length,
        temperature=policy.temperature,
        beta=config.beta,
        scale_rewards=config.scale_rewards,
        use_cpu=not cuda,
        bf16=cuda and torch.cuda.is_bf16_supported(),
        activation_checkpointing=cuda and config.lora_r > 0,
        use_vllm=config.vllm,
        **({"vllm_mode": "colocate"} if config.vllm else {}),
        **shared_args(policy),
    )


def shared_args(policy: PolicyConfig) -> dict:
    """The trainer arguments GRPO and DPO share: checkpoints, logging, seeds."""
    return {
        "disable_dropout": True,
        "save_strategy": "steps",
        "save_steps": policy.checkpoint_every,
        "save_total_limit": 2,
        "logging_steps": max(1, policy.steps // 20),
        "report_to": policy.report_to,
        "disable_tqdm": not policy.progress,
        "seed": policy.seed,
        "data_seed": policy.seed,
    }


def lora_config(config: GRPOConfig):
    """peft's `LoraConfig` on every linear layer when `config.lora_r`, else None."""
    if not config.lora_r:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=0.0,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )


def quiet_logs(trainer, progress: bool) -> None:
    """Keep the trainer's metrics in its log history (and the token ledger) but off the
    console: without a progress bar, transformers prints every log as a dict."""
    from transformers.trainer_callback import PrinterCallback

    if not progress:
        trainer.remove_callback(PrinterCallback)


def train_grpo(
    policy: PolicyConfig,
    config: GRPOConfig,
    reward_func,
    rows: list[dict],
    out: Path,
    callbacks=(),
):
    """Train a copy of the policy `policy.model` with GRPO on the prompt `rows` (`prompt`
    and the columns `reward_func` reads; `orchrm.experiments.rl_world.data.prompt_rows` builds
    them from tasks); checkpoints under OUT/checkpoints, the final policy in OUT/model.
    Returns (model, tokenizer, the trainer's log history)."""
    from datasets import Dataset
    from trl import GRPOTrainer

    model, tokenizer = load_policy(policy.require_model())
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward_func,
        args=grpo_args(policy, config, out),
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        callbacks=list(callbacks),
        peft_config=lora_config(config),
    )
    quiet_logs(trainer, policy.progress)
    with warnings.catch_warnings():  # transformers' own deprecated call, once per step
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")
        trainer.train()
    model = trainer.model
    if hasattr(model, "merge_and_unload"):  # a LoRA: OUT/model is the merged policy
        model = model.merge_and_unload()
    save_policy(model, tokenizer, out / "model")
    return model, tokenizer, trainer.state.log_history

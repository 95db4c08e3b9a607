"""One config per trainer, as TRL has them: `PolicyConfig` (what every method's training
of the policy shares), `GRPOConfig`, `RFTConfig` and `DPOConfig` (each method's own
settings), and `TinyPolicyConfig` (shape and supervised training of the offline default
policy). The defaults run offline on the world's `math` preset within 20 minutes on two
CPU cores; the run on the world (`orchrm rl`) is configured by
`orchrm.experiments.rl_world.config.RLExperimentConfig`, which holds one of each."""

from __future__ import annotations

import math
from typing import Literal

from orchrm.configs import config, setting
from orchrm.errors import ConfigError
from orchrm.training.tracking import REPORT_TO, check_report_to

REWARDS = ("orchrm", "execution")
PENALTIES = {"orchrm": -3.0, "execution": -1.0}
"""Default reward of an unparseable or invalid orchestration, per reward
(`GRPOConfig.penalty`)."""


@config
class TinyPolicyConfig:
    """Shape and supervised training of the offline default policy."""

    vocab_size: int = 4096
    """Most BPE tokens of the tokenizer trained on world texts (pieces as in
    `orchrm.rl.policy.PRE_TOKEN_PATTERN`; the math preset's texts fill ~1,400)."""
    n_layer: int = 2
    """GPT-2 blocks."""
    n_embd: int = 128
    """Hidden size."""
    n_head: int = 4
    """Attention heads per block."""
    n_positions: int = 384
    """Longest prompt + completion in tokens."""
    sft_steps: int | None = setting(None, min=1)
    """Optimizer steps of supervised fine-tuning on base-orchestrator outputs; None:
    `sft_epochs` passes over them (600 steps at the default 300 tasks x 8 samples)."""
    sft_epochs: float = setting(8.0, min=0.01)
    """Passes over the examples when `sft_steps` is None, so a small run builds a small
    policy quickly; at least 50 steps."""
    sft_batch_size: int = 32
    """Examples per supervised step."""
    sft_lr: float = 2e-3
    """Peak learning rate (AdamW, warmup then cosine decay); a model this small trained
    from scratch wants a large one."""
    seed: int = 0
    """Seeds the initialization and the supervised batches."""

    def steps_for(self, examples: int) -> int:
        """Supervised steps for `examples` examples."""
        if self.sft_steps is not None:
            return self.sft_steps
        return max(50, math.ceil(self.sft_epochs * examples / self.sft_batch_size))


@config
class PolicyConfig:
    """What every method's training of the policy shares: the starting policy, the
    optimizer steps, sampling, seeds, checkpoints."""

    model: str = ""
    """The starting policy: a causal-LM directory or hub name. Empty: `orchrm rl` builds
    the offline default into OUT/policy (or reuses it there); a trainer refuses it."""
    steps: int = setting(150, min=1)
    """Optimizer steps (GRPO, DPO; RFT: supervised steps over all its rounds)."""
    lr: float = 3e-4
    """Peak learning rate of GRPO and RFT (DPO has its own, `DPOConfig.lr`). At 1e-3
    execution-reward GRPO of the tiny policy collapsed into over-long invalid plans after
    ~100 steps; a 7B LoRA wants around 1e-5."""
    max_completion_length: int = 96
    """Most tokens a sampled orchestration may have (the offline policy's are ~35)."""
    temperature: float = 1.0
    """Sampling temperature while training (GRPO, RFT)."""
    save_steps: int | None = setting(None, min=1)
    """Optimizer steps between checkpoints under OUT/checkpoints (GRPO, DPO; the last two
    are kept). None: a quarter of `steps`."""
    seed: int = 0
    """Seeds sampling and training (`orchrm rl` seeds the world's tasks with it too)."""
    progress: bool = True
    """Progress bars on stderr."""
    report_to: Literal[REPORT_TO] = setting("none")
    """Where the training's scalars go: `tensorboard`, `wandb` or `none`. TRL's trainer
    (GRPO, DPO) logs its rewards, KL, loss, learning rate and gradient norm there (under
    OUT/<run>/checkpoints/runs/ for TensorBoard), and `orchrm rl` its evaluation curve on
    held-out tasks (every method; under OUT/<run>/runs/)."""

    def __post_init__(self) -> None:
        check_report_to(self.report_to)

    @property
    def checkpoint_every(self) -> int:
        """`save_steps`, or a quarter of `steps` when it is None."""
        return self.save_steps or max(1, self.steps // 4)

    def require_model(self) -> str:
        """`model`, or ConfigError when it is empty."""
        if not self.model:
            raise ConfigError("PolicyConfig.model is empty: name the starting policy")
        return self.model


@config
class GRPOConfig:
    """GRPO's own settings (`orchrm.rl.grpo`): its groups, loss and reward."""

    reward: Literal[REWARDS] = setting("orchrm")
    """The reward: `orchrm` (the reward model scores the plan; nothing runs) or
    `execution` (the plan runs on the sub-agents; 1 if the answer is right)."""
    num_generations: int = setting(8, min=2)
    """Samples per prompt: the group whose mean reward is each sample's baseline."""
    prompts_per_step: int = setting(4, min=1)
    """Prompts per optimizer step (so num_generations x prompts_per_step samples)."""
    beta: float = 0.0
    """KL coefficient against the starting policy (0: no reference model, as TRL's
    default and Dr. GRPO). Above 0, TRL keeps the starting policy as the reference and
    adds beta times its per-token KL estimate to the loss."""
    scale_rewards: Literal["none", "group", "batch"] = setting("none")
    """`none`: advantage r(x, z_n) - mean_j r(x, z_j), the paper's; `group`: also divided
    by the group's standard deviation; `batch`: by the batch's."""
    penalty: float | None = None
    """Reward of an unparseable or invalid orchestration. None: the reward's default
    (`orchrm`: -3.0, in units of the reward model's training-time spread; `execution`:
    -1.0, below a wrong answer's 0)."""
    normalize_rm: bool = True
    """Orch-RM reward: (score - mean) / std with the model's training-time statistics,
    so learning rates transfer between reward models."""
    centre: bool = False
    """Orch-RM reward centred on reference plans and bounded (PAR, arXiv 2502.18770):
    sigmoid(r - the mean r of the task's reference plans), in (0, 1). A plan the model
    scores far above the reference earns little more than one a little above it, so a
    structure the model overrates cannot pull the policy without limit. Reads a
    `reference` column (plan texts of the reference policy for the row's question);
    `orchrm rl` fills it from the world log's plans of the orchestrator the starting
    policy imitates."""
    diversity: float = setting(0.0, min=0.0)
    """Orch-RM reward: a bonus of up to this much for a valid plan whose structure (its
    sub-agent types and wiring) the other samples of its group do not write; against a
    group collapsing onto one structure. 0: none."""
    aggregate: str = ""
    """An ensemble reward model's aggregate for the reward (`mean`, `min`,
    `mean_minus_std`, `warm`); empty: the ensemble's own (`orchrm.rmodel.ensemble`)."""
    lora_r: int = setting(0, min=0)
    """LoRA rank of the policy's adapter (0: train every weight, as the tiny policy does;
    the paper's setting for a 7B orchestrator is a LoRA)."""
    lora_alpha: int = setting(32, min=1)
    """LoRA scaling numerator."""
    vllm: bool = False
    """Generate the samples with vLLM (TRL's colocate mode; a GPU with vllm installed)."""

    def __post_init__(self) -> None:
        from orchrm.rmodel.ensemble import AGGREGATES

        if self.aggregate and self.aggregate not in AGGREGATES:
            raise ConfigError(
                f"aggregate {self.aggregate!r}: choose one of {', '.join(AGGREGATES)}"
            )
        if self.beta < 0 or not math.isfinite(self.beta):
            raise ConfigError(f"beta {self.beta}: give a KL coefficient >= 0")

    @property
    def reward_penalty(self) -> float:
        """`penalty`, or the reward's default when it is None (`PENALTIES`)."""
        return self.penalty if self.penalty is not None else PENALTIES[self.reward]

    @property
    def batch_size(self) -> int:
        """Samples per optimizer step."""
        return self.num_generations * self.prompts_per_step


@config
class RFTConfig:
    """Rejection-sampling fine-tuning's own settings (`orchrm.rl.rft`); it keeps samples
    by execution, so it has no reward to choose."""

    samples: int = setting(8, min=1)
    """Samples per prompt from which RFT keeps the best (by execution correctness)."""
    rounds: int = setting(2, min=1)
    """Sample-filter-fine-tune rounds; each samples with the latest policy."""
    batch_size: int = setting(32, min=1)
    """Kept examples per supervised step."""


@config
class DPOConfig:
    """DPO's own settings (`orchrm.rl.dpo`); it learns from preference pairs, with no
    sampling and no reward."""

    beta: float = 0.1
    """Temperature on the log-ratio margin."""
    lr: float = 5e-5
    """Peak learning rate (instead of `PolicyConfig.lr`): at GRPO's, the tiny policy's
    likelihood of both sides collapses within 50 steps (docs/results.md#why-the-defaults)."""
    sft_weight: float = setting(1.0, min=0.0)
    """Weight of a negative log-likelihood term on the chosen side (RPO; TRL's `sft` loss
    type) beside the DPO loss, which keeps the plans well-formed; 0: plain DPO."""
    batch_size: int = setting(16, min=1)
    """Preference pairs per optimizer step."""

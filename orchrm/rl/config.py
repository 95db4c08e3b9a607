"""`RLConfig`: everything `orchrm rl` can set, with defaults that run offline on the
world's `math` preset within 20 minutes on two CPU cores."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from orchrm.configs import check, setting
from orchrm.errors import ConfigError
from orchrm.training.config import SMALL_DATA_LR, SMALL_DATA_STEPS

METHODS = ("grpo", "rft", "dpo")
REWARDS = ("orchrm", "execution")


@dataclass
class PolicyConfig:
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

    def __post_init__(self) -> None:
        check(self)

    def steps_for(self, examples: int) -> int:
        """Supervised steps for `examples` examples."""
        if self.sft_steps is not None:
            return self.sft_steps
        return max(50, math.ceil(self.sft_epochs * examples / self.sft_batch_size))


@dataclass
class RLConfig:
    """How the orchestrator is trained and evaluated."""

    out: str = "runs/rl"
    """Folder for the world logs, the default policy and reward model when built here,
    each run's checkpoints, token log, curve and the report."""
    method: str = setting("grpo", choices=METHODS)
    """`grpo` (TRL's GRPOTrainer), `rft` (rejection-sampling fine-tuning) or `dpo`
    (TRL's DPOTrainer on pairs mined from the world logs)."""
    reward: str = setting("orchrm", choices=REWARDS)
    """GRPO's reward: `orchrm` (the reward model scores the plan; nothing runs) or
    `execution` (the plan runs on the world's sub-agents; 1 if the answer is right).
    RFT always keeps samples by execution; DPO has no reward."""
    steps: int = setting(150, min=1)
    """Optimizer steps (GRPO, DPO; RFT: supervised steps over all its rounds)."""
    policy: str = ""
    """The starting policy: a causal-LM directory. Empty: the offline default, built
    (supervised, on the world's base-orchestrator outputs) into OUT/policy, or reused
    from there when present."""
    rm: str = ""
    """The reward-model directory (`orchrm train`'s model/). Empty: one is trained into
    OUT/rm from the world logs (pairs mined as `orchrm demo` does), or reused."""
    rm_url: str = ""
    """The Orch-RM reward through a reward server instead of a model loaded here
    (`.../classify` vLLM or SGLang, `.../get_reward` OpenRLHF, `.../score` orchrm serve;
    docs/remote-scoring.md), built with `orchrm.scoring.load.load_scorer(rm, rm_url)`: `rm`,
    when given, is the served model's local copy, which says how to render."""
    preset: str = "math"
    """World preset of the training and held-out tasks."""
    tasks: str = ""
    """Train on your own tasks instead of the world's: a JSONL file of questions
    (`orchrm.tasks.run.load_tasks`), or `NAME:PATH` for a benchmark file
    (`orchrm.loaders.load_benchmark`: aime, hotpotqa, browsecomp-plus, gpqa). Only
    Orch-RM-reward GRPO (nothing to execute, so no LLM server) and it needs `rm`; there
    are no world tasks to evaluate on, so evaluate the trained policy with `orchrm run`
    and `orchrm eval`."""
    chat: bool | None = None
    """Give the policy the full orchestrator prompt (`orchrm.runtime.prompts`) as chat
    messages. None: when its tokenizer has a chat template (an instruct LLM), else the
    tiny policy's compact prompt."""
    lora_r: int = setting(0, min=0)
    """LoRA rank of the policy's adapter (0: train every weight, as the tiny policy does;
    the paper's setting for a 7B orchestrator is a LoRA)."""
    lora_alpha: int = setting(32, min=1)
    """LoRA scaling numerator."""
    vllm: bool = False
    """Generate GRPO's samples with vLLM (TRL's colocate mode; a GPU with vllm
    installed)."""
    train_tasks: int = setting(300, min=1)
    """World tasks whose logs build the default policy, the reward model and DPO pairs,
    and whose questions are the training prompts."""
    log_samples: int = 8
    """World-log samples per training task and world orchestrator (base, specialized)."""
    rm_steps: int = SMALL_DATA_STEPS
    """Reward-model training steps when one is built here (batch 16, MiniLM; the demo's)."""
    rm_lr: float = SMALL_DATA_LR
    """Reward-model learning rate when one is built here (the demo's)."""
    rm_max_length: int = 128
    """Reward-model tokens per text when one is built here."""
    eval_tasks: int = setting(300, min=1)
    """Held-out world tasks (another seed than training) for the final evaluation."""
    eval_samples: int = setting(8, min=1)
    """Orchestrations sampled per held-out task (majority vote is over these)."""
    curve_points: int = 4
    """Evaluations during training (plus the start and the end), on `curve_tasks`."""
    curve_tasks: int = 100
    """Held-out tasks of each curve point (the first of the evaluation tasks)."""
    seed: int = 0
    """Seeds the world (training tasks; held-out tasks use seed + 1), sampling and
    training."""

    # GRPO
    num_generations: int = setting(8, min=2)
    """Samples per prompt: the group whose mean reward is each sample's baseline."""
    prompts_per_step: int = setting(4, min=1)
    """Prompts per optimizer step (so num_generations x prompts_per_step samples)."""
    lr: float = 3e-4
    """Peak learning rate (GRPO and RFT; DPO has `dpo_lr`). At 1e-3 execution-reward GRPO
    of the tiny policy collapsed into over-long invalid plans after ~100 steps; a 7B LoRA
    wants around 1e-5."""
    beta: float = 0.0
    """KL coefficient against the starting policy (0: no reference model, as TRL's
    default and Dr. GRPO)."""
    scale_rewards: str = setting("none", choices=("none", "group", "batch"))
    """`none`: advantage r(x, z_n) - mean_j r(x, z_j), the paper's; `group`: also divided
    by the group's standard deviation; `batch`: by the batch's."""
    temperature: float = 1.0
    """Sampling temperature while training."""
    max_completion_length: int = 96
    """Most tokens a sampled orchestration may have (the offline policy's are ~35)."""
    penalty: float | None = None
    """Reward of an unparseable or invalid orchestration. None: the reward's default
    (`orchrm`: -3.0, in units of the reward model's training-time spread; `execution`:
    -1.0, below a wrong answer's 0)."""
    normalize_rm: bool = True
    """Orch-RM reward: (score - mean) / std with the model's training-time statistics,
    so learning rates transfer between reward models."""

    # RFT
    rft_samples: int = 8
    """Samples per prompt from which RFT keeps the best (by execution correctness)."""
    rft_rounds: int = 2
    """Sample-filter-fine-tune rounds; each samples with the latest policy."""

    # DPO
    dpo_beta: float = 0.1
    """DPO's temperature on the log-ratio margin."""
    dpo_lr: float = 5e-5
    """DPO's peak learning rate: at GRPO's, the tiny policy's likelihood of both sides
    collapses within 50 steps (docs/results.md#why-the-defaults)."""
    dpo_sft_weight: float = 1.0
    """Weight of a negative log-likelihood term on the chosen side (RPO; TRL's `sft` loss
    type) beside the DPO loss, which keeps the plans well-formed; 0: plain DPO."""

    policy_config: PolicyConfig = field(default_factory=PolicyConfig)
    """The offline default policy, when it is built here."""
    num_threads: int = setting(1, min=1)
    """CPU threads for PyTorch. One: on shared cores, spin-waiting threads slow every step
    down (docs/results.md#why-the-defaults)."""
    progress: bool = True
    """Progress bars on stderr."""

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ConfigError on a setting that cannot work (run at construction)."""
        check(self)
        if self.tasks:
            if self.method != "grpo" or self.reward != "orchrm":
                raise ConfigError(
                    "training on --tasks is Orch-RM-reward GRPO only (--method grpo --reward "
                    "orchrm): the execution reward, RFT and DPO run on the offline world"
                )
            if not self.rm and not self.rm_url:
                raise ConfigError(
                    "training on --tasks needs a reward model (--rm DIR or --rm-url URL)"
                )

    @property
    def run_name(self) -> str:
        """The run's folder name under OUT: `grpo-orchrm`, `grpo-execution`, `rft`, `dpo`."""
        return f"grpo-{self.reward}" if self.method == "grpo" else self.method

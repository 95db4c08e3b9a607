"""`RLExperimentConfig`: what `orchrm rl` runs on the world (which method, the world's
tasks, the reward model it builds, the evaluation), holding one config per trainer of
`orchrm.rl.config`."""

from __future__ import annotations

import re
from dataclasses import field, replace
from typing import Literal

from orchrm.configs import config, setting
from orchrm.errors import ConfigError
from orchrm.rl.config import DPOConfig, GRPOConfig, PolicyConfig, RFTConfig, TinyPolicyConfig
from orchrm.training.config import SMALL_DATA_LR, SMALL_DATA_STEPS

METHODS = ("grpo", "rft", "dpo")
RUNS = {
    "grpo-orchrm": ("grpo", "orchrm"),
    "grpo-execution": ("grpo", "execution"),
    "rft": ("rft", None),
    "dpo": ("dpo", None),
}
"""The runs `orchrm rl --compare` knows, by the name they get in OUT and in the table:
(method, GRPO's reward)."""


@config
class RLExperimentConfig:
    """How the orchestrator is trained on the world and evaluated. The policy's settings
    (`policy`) seed the world too: its training tasks use `policy.seed`, the held-out
    tasks `policy.seed + 1`."""

    out: str = "runs/rl"
    """Folder for the world logs, the default policy and reward model when built here,
    each run's checkpoints, token log, curve and the report."""
    method: Literal[METHODS] = setting("grpo")
    """`grpo` (TRL's GRPOTrainer), `rft` (rejection-sampling fine-tuning) or `dpo`
    (TRL's DPOTrainer on pairs mined from the world logs)."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    """What every method shares. An empty `policy.model` is the offline default, built
    (supervised, on the world's base-orchestrator outputs) into OUT/policy, or reused
    from there when present."""
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    """GRPO's settings; its `reward` names the run (`grpo-orchrm`, `grpo-execution`)."""
    rft: RFTConfig = field(default_factory=RFTConfig)
    """RFT's settings (it always keeps samples by execution)."""
    dpo: DPOConfig = field(default_factory=DPOConfig)
    """DPO's settings (its pairs are mined from the world log)."""
    tiny_policy: TinyPolicyConfig = field(default_factory=TinyPolicyConfig)
    """The offline default policy, when it is built here."""
    rm: str = ""
    """The reward-model directory (`orchrm train`'s model/). Empty: one is trained into
    OUT/rm from the world logs (pairs mined as `orchrm demo` does), or reused."""
    rm_url: str = ""
    """The Orch-RM reward through a reward server instead of a model loaded here
    (`.../classify` vLLM or SGLang, `.../get_reward` OpenRLHF, `.../score` orchrm serve;
    docs/remote-scoring.md), built with `orchrm.scoring.load.load_scorer(rm, rm_url)`: `rm`,
    when given, is the served model's local copy, which says how to render."""
    rm_steps: int = SMALL_DATA_STEPS
    """Reward-model training steps when one is built here (batch 16, MiniLM; the demo's)."""
    rm_lr: float = SMALL_DATA_LR
    """Reward-model learning rate when one is built here (the demo's)."""
    rm_max_length: int = 128
    """Reward-model tokens per text when one is built here."""
    rm_members: int = setting(2, min=1)
    """Reward models trained when one is built here: above 1, an ensemble (`orchrm train
    --ensemble`) whose aggregate the reward takes from `grpo.aggregate` (the ensemble's
    own: the worst case). Two by default: on the world, GRPO against one model's reward
    collapsed while two members' worst case held and matched execution reward at a tenth
    of its training tokens (docs/results.md, "GRPO against reward hacking on the world")."""
    reference_plans: int = setting(4, min=1)
    """Reference plans per training question for the centred reward (`grpo.centre`): the
    world log's plans of the base orchestrator, the one the starting policy imitates."""
    tag: str = ""
    """A suffix of the run's folder name (`grpo-orchrm-TAG`): runs of one method with
    other settings side by side in OUT."""
    preset: str = "math"
    """World preset of the training and held-out tasks."""
    tasks: str = ""
    """Train on your own tasks instead of the world's: a JSONL file of questions
    (`orchrm.tasks.task.load_tasks`), or `NAME:PATH` for a benchmark file
    (`orchrm.tasks.benchmarks.registry.load_benchmark`: aime, hotpotqa, browsecomp-plus,
    gpqa). Only
    Orch-RM-reward GRPO (nothing to execute, so no LLM server) and it needs `rm`; there
    are no world tasks to evaluate on, so evaluate the trained policy with `orchrm run`
    and `orchrm eval`."""
    chat: bool | None = None
    """Give the policy the full orchestrator prompt (`orchrm.runtime.prompts`) as chat
    messages. None: when its tokenizer has a chat template (an instruct LLM), else the
    tiny policy's compact prompt."""
    train_tasks: int = setting(300, min=1)
    """World tasks whose logs build the default policy, the reward model and DPO pairs,
    and whose questions are the training prompts."""
    log_samples: int = 8
    """World-log samples per training task and world orchestrator (base, specialized)."""
    eval_tasks: int = setting(300, min=1)
    """Held-out world tasks (another seed than training) for the final evaluation."""
    eval_samples: int = setting(8, min=1)
    """Orchestrations sampled per held-out task (majority vote is over these)."""
    curve_points: int = setting(4, min=0)
    """Evaluations during training (plus the start and the end), on `curve_tasks`; the
    GRPO and DPO checkpoints are saved at them unless `policy.save_steps` is set."""
    curve_tasks: int = 100
    """Held-out tasks of each curve point (the first of the evaluation tasks)."""
    num_threads: int = setting(1, min=1)
    """CPU threads for PyTorch. One: on shared cores, spin-waiting threads slow every step
    down (docs/results.md#why-the-defaults)."""

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ConfigError on a setting that cannot work (run at construction)."""
        if self.tag and not re.fullmatch(r"[A-Za-z0-9_.-]+", self.tag):
            raise ConfigError(
                f"tag {self.tag!r}: letters, digits, '.', '_' and '-' only (it names a folder)"
            )
        if self.tasks:
            if self.method != "grpo" or self.grpo.reward != "orchrm":
                raise ConfigError(
                    "training on --tasks is Orch-RM-reward GRPO only (--method grpo --reward "
                    "orchrm): the execution reward, RFT and DPO run on the offline world"
                )
            if self.grpo.centre:
                raise ConfigError(
                    "the centred reward (--centre) reads reference plans from the world log: "
                    "it runs on the offline world, not on --tasks"
                )
            if not self.rm and not self.rm_url:
                raise ConfigError(
                    "training on --tasks needs a reward model (--rm DIR or --rm-url URL)"
                )

    @property
    def seed(self) -> int:
        """The run's seed, `policy.seed`: it seeds the world, sampling and training."""
        return self.policy.seed

    @property
    def progress(self) -> bool:
        """Progress bars on stderr (`policy.progress`)."""
        return self.policy.progress

    @property
    def run_name(self) -> str:
        """The run's folder name under OUT: `grpo-orchrm`, `grpo-execution`, `rft`, `dpo`,
        with `-TAG` when `tag` is set."""
        name = f"grpo-{self.grpo.reward}" if self.method == "grpo" else self.method
        return f"{name}-{self.tag}" if self.tag else name

    @property
    def needs_rm(self) -> bool:
        """Whether the run reads a reward model (Orch-RM-reward GRPO)."""
        return self.method == "grpo" and self.grpo.reward == "orchrm"

    def for_run(self, name: str) -> RLExperimentConfig:
        """This config with the method (and GRPO's reward) of the run `name` in `RUNS`."""
        if name not in RUNS:
            raise ConfigError(f"unknown run {name!r}: choose from {', '.join(RUNS)}")
        method, reward = RUNS[name]
        grpo = replace(self.grpo, reward=reward) if reward else self.grpo
        return replace(self, method=method, grpo=grpo)

    def trainer_policy(self, model: str) -> PolicyConfig:
        """`policy` as a trainer takes it: starting from `model`, with a checkpoint at each
        curve point unless `policy.save_steps` is set."""
        every = self.policy.save_steps or max(1, self.policy.steps // max(1, self.curve_points))
        return replace(self.policy, model=model, save_steps=every)


@config
class RLCommandConfig(RLExperimentConfig):
    """`RLExperimentConfig`, and whether `orchrm rl` compares runs and shows progress."""

    compare: bool = False
    """Train every run in --runs from the same start; one table."""
    runs: str = ",".join(RUNS)
    """Runs for --compare."""
    quiet: bool = False
    """No progress bars."""

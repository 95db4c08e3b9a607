"""GRPO of SmolLM2-135M-Instruct as the orchestrator, three ways from one warm-up, its
plans executed by the same model on llama.cpp (`orchrm.experiments.rl_real.run`).

    .venv/bin/python benchmarks/rl_real.py --out runs/rl-real          # the comparison
    .venv/bin/python benchmarks/rl_real.py --quick --out runs/rl-quick  # a few minutes
    .venv/bin/python benchmarks/rl_real.py --tasks-only                 # the split, no run

Prints each stage's figures and the table; OUT/report.md, report.json and reward.png
hold them. Stages already in OUT with the same settings are reused.
"""

from __future__ import annotations

import dataclasses

from orchrm.cli.console import csv_values
from orchrm.cli.script import run_script
from orchrm.configs import config, setting
from orchrm.errors import ConfigError
from orchrm.experiments.rl_real.run import FULL, METHODS, QUICK, RLRealSettings, run

DEFAULTS = RLRealSettings()


@config(frozen=True)
class RLRealOptions:
    """The comparison's options: `RLRealSettings`'s, and a size whose parts may be given."""

    out: str = DEFAULTS.out
    """Where the run's files go."""
    quick: bool = False
    """Tiny sizes: a few minutes."""
    policy: str = DEFAULTS.policy
    """The orchestrator: smollm2 (the bundled GGUF), a causal-LM directory or a GGUF."""
    rm: str = DEFAULTS.rm
    """A reward model directory (empty: one is trained into OUT)."""
    methods: tuple[str, ...] = DEFAULTS.methods
    """Comma-separated, of warmup, orchrm, execution."""
    train_tasks: int = setting(0, min=0, panel="Sizes (0: the size's own)")
    """Training tasks: the reward model's plans and GRPO's prompts."""
    test_tasks: int = setting(0, min=0, panel="Sizes (0: the size's own)")
    """Held-out tasks of the evaluation."""
    rm_samples: int = setting(0, min=0, panel="Sizes (0: the size's own)")
    """Plans a training task from each template orchestrator."""
    rm_steps: int = setting(0, min=0, panel="Sizes (0: the size's own)")
    """Reward-model training steps."""
    warmup_steps: int = setting(0, min=0, panel="Sizes (0: the size's own)")
    """Supervised warm-up steps."""
    warmup_tasks: int = setting(0, min=0, panel="Sizes (0: the size's own)")
    """Tasks a warm-up step."""
    warmup_plans: int = setting(0, min=0, panel="Sizes (0: the size's own)")
    """Base template plans a training task in the warm-up's data."""
    steps: int = setting(0, min=0, panel="Sizes (0: the size's own)")
    """GRPO steps."""
    prompts_per_step: int = setting(0, min=0, panel="Sizes (0: the size's own)")
    """Tasks a GRPO step."""
    num_generations: int = setting(0, min=0, panel="Sizes (0: the size's own)")
    """Samples a task a GRPO step (the group)."""
    eval_samples: int = setting(0, min=0, panel="Sizes (0: the size's own)")
    """Plans a held-out task (M)."""
    eval_runs: int = setting(0, min=0, panel="Sizes (0: the size's own)")
    """Executions a held-out plan (K)."""
    untrained_tasks: int = setting(0, min=0, panel="Sizes (0: the size's own)")
    """Held-out tasks the untrained model writes one plan for."""
    max_new_tokens: int = setting(0, min=0, panel="Sizes (0: the size's own)")
    """Most tokens of a sampled plan."""
    lr: float = setting(DEFAULTS.lr, min=0.0)
    """GRPO's learning rate."""
    warmup_lr: float = setting(DEFAULTS.warmup_lr, min=0.0)
    """The supervised warm-up's learning rate."""
    lora_r: int = setting(DEFAULTS.lora_r, min=1)
    """The LoRA's rank."""
    prompt_grad: bool = DEFAULTS.prompt_grad
    """Back-propagate through the prompt too."""
    threads: int = setting(DEFAULTS.threads, min=0)
    """PyTorch threads (0: every core)."""
    seed: int = DEFAULTS.seed
    """Seed of the tasks, plans and training."""
    quiet: bool = False
    """No progress bars."""
    tasks_only: bool = DEFAULTS.tasks_only
    """Write the training and held-out tasks to OUT/logs/{train,test}.tasks.jsonl and
    stop, executing nothing."""

    def __post_init__(self) -> None:
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown or not self.methods:
            raise ConfigError(f"--methods {','.join(self.methods)}: choose of {', '.join(METHODS)}")

    def settings(self) -> RLRealSettings:
        """The run's settings: the size's own, with the parts given over it."""
        names = [f.name for f in dataclasses.fields(FULL)]
        given = {n: getattr(self, n) for n in names if getattr(self, n)}
        return RLRealSettings(
            out=self.out,
            sizes=dataclasses.replace(QUICK if self.quick else FULL, **given),
            methods=self.methods,
            policy=self.policy,
            rm=self.rm,
            lora_r=self.lora_r,
            lr=self.lr,
            warmup_lr=self.warmup_lr,
            prompt_grad=self.prompt_grad,
            threads=self.threads,
            seed=self.seed,
            tasks_only=self.tasks_only,
            progress=not self.quiet,
        )


def main(options: RLRealOptions) -> None:
    """Run the comparison."""
    run(options.settings())


if __name__ == "__main__":
    listed = {"parser": csv_values, "spell": ",".join}
    run_script(RLRealOptions, main, doc=__doc__, settings={"methods": listed})

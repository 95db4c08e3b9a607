"""`DemoConfig`: what `orchrm demo` can set (kept apart from the demo's code so the
command line reads it without loading PyTorch)."""

from __future__ import annotations

from typing import Literal

from orchrm.configs import config, setting
from orchrm.errors import ConfigError
from orchrm.rmodel.precision import DTYPES
from orchrm.training.config import SMALL_DATA_LR, SMALL_DATA_STEPS

WORLD_PRESETS = ("math", "search", "multihop", "science")
"""The offline world's presets (`orchrm.world.tasks.PRESETS`)."""


@config
class DemoConfig:
    """Sizes of the demo; docs/results.md#the-demo says how long the defaults take."""

    out: str = setting("orchrm-demo", panel="Output")
    """Folder for logs, store, pairs, models and the report."""
    presets: tuple[str, ...] = setting(("math",), panel="Data")
    """World presets, each with its own reward model and table: math, search, multihop,
    science (the default keeps the demo within 10 minutes on two CPU cores)."""
    mixed: bool = setting(False, panel="Model")
    """Also train one reward model on every preset's pairs mixed, as `orchrm-mixed` (with
    two presets or more)."""
    unified: bool = setting(False, panel="Model")
    """Also train one reward model on every preset's pairs with each text's domain line,
    as `orchrm-unified` (with two presets or more)."""
    train_tasks: int = setting(300, min=10, panel="Data")
    """World tasks per preset whose logs train the reward models: at the same steps, more
    tasks mean more distinct pairs (docs/results.md#training-tasks-and-steps)."""
    test_tasks: int = setting(200, min=10, panel="Data")
    """Held-out world tasks per preset (another seed) for best-of-N: on 100, a paired
    interval around a 5-point gain over majority still reaches below 0."""
    samples: int = setting(8, min=2, panel="Data")
    """Orchestrations per task and orchestrator (N of best-of-N)."""
    steps: int = setting(SMALL_DATA_STEPS, min=1, panel="Optimization")
    """Training steps (batch 16) of the math and the mixed reward model."""
    multihop_steps: int = setting(45, min=1, panel="Optimization")
    """Training steps of the multihop reward model: its pairs carry little to learn (the
    orchestration matters little there), and fewer steps keep the demo near 15 minutes
    on two CPU cores without bf16."""
    dtype: Literal[DTYPES] = setting("auto", panel="Model")
    """Precision the reward models train and score in; auto: bf16 where the hardware runs
    it fast, else fp32 (`orchrm.rmodel.precision`; ORCHRM_BF16 overrides the detection)."""
    lr: float = setting(SMALL_DATA_LR, panel="Optimization")
    """Learning rate of the three reward models."""
    max_length: int = setting(128, min=16, panel="Model")
    """Reward-model tokens per text."""
    seed: int = setting(0, panel="Data")
    """Seeds the world, the pair splits and training."""
    search_curve: bool = setting(False, panel="Data")
    """Run orchrm-search at every N of the accuracy-over-N curves too, not only at the
    full N (the table): it then scores about eight times the edits, and the evaluation
    takes about three times as long (docs/results.md#where-the-demos-time-goes)."""
    edited: int = setting(0, min=0, panel="Data")
    """Edited plans per training task added to the training logs: each an edit of a plan
    the world's orchestrators logged for it (the moves orchrm-search makes), executed on
    the world, so the reward model sees what edits do; 0: none
    (docs/results.md#improving-a-plan-before-it-runs)."""
    reruns: int = setting(20, min=0, panel="Data")
    """Re-executions of every held-out candidate, from which majority and the weighted
    vote get an expected accuracy (`orchrm.evaluation.reruns`); 0: none."""

    def __post_init__(self) -> None:
        unknown = [p for p in self.presets if p not in WORLD_PRESETS]
        if unknown or not self.presets or len(set(self.presets)) < len(self.presets):
            raise ConfigError(
                f"presets must be distinct names among {', '.join(WORLD_PRESETS)}; got "
                f"{', '.join(self.presets) or 'none'}"
            )
        for name in ("mixed", "unified"):
            if getattr(self, name) and len(self.presets) < 2:
                raise ConfigError(f"a {name} reward model needs two presets or more (--presets)")

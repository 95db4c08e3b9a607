"""`LotoConfig`: what `orchrm cross-validate` can set (kept apart from the cross-validation
code so the command line reads it without loading the selectors and DuckDB)."""

from __future__ import annotations

from dataclasses import dataclass, field

from orchrm.rm.config import TrainConfig
from orchrm.store.config import MineConfig


@dataclass
class LotoConfig:
    """What to mine, how to train each fold, and what to evaluate."""

    out: str = "runs/loto"
    """Folder for the folds' pairs and models and the report."""
    n: int = 8
    """Candidates per task (tasks with fewer are left out)."""
    orchestrator: str | None = None
    """Whose samples are the candidates (None: every orchestrator's)."""
    folds: int | None = None
    """Folds of tasks; None: one per task (leave-one-task-out)."""
    mine: MineConfig = field(default_factory=lambda: MineConfig(dataset="loto"))
    """Pair mining; its split is ignored (folds decide what is held out)."""
    train: TrainConfig = field(default_factory=lambda: TrainConfig(epochs=3.0))
    """Reward-model training per fold; `pairs` and `out` are set per fold."""
    keep_models: bool = False
    """Keep every fold's model (by default only its scores are kept)."""
    seed: int = 0
    """Seeds the folds (by hash of the task id), the pair mining and every fold's training."""

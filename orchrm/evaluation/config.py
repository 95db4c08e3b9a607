"""`LotoConfig`, `EvalConfig` and `SelectorOptions`: what `orchrm cross-validate` and
`orchrm eval` can set, and how the selectors built on the reward model's scores choose
(eval and `orchrm serve` both read those), kept apart from their code so the command line
reads them without loading the selectors and DuckDB."""

from __future__ import annotations

from dataclasses import field
from typing import Literal

from orchrm.configs import config, setting
from orchrm.errors import ConfigError
from orchrm.rmodel.precision import DTYPES
from orchrm.selection.options import SelectorOptions
from orchrm.store.config import MineConfig
from orchrm.training.config import TrainConfig


@config
class LotoConfig:
    """What to mine, how to train each fold, and what to evaluate."""

    out: str = setting("runs/loto", panel="Output")
    """Folder for the folds' pairs and models and the report."""
    n: int = setting(8, min=1, panel="Data")
    """Candidates per task (tasks with fewer are left out)."""
    orchestrator: str | None = setting(None, panel="Data")
    """Whose samples are the candidates (None: every orchestrator's)."""
    folds: int | None = setting(None, min=2, panel="Data")
    """Folds of tasks; None: one per task (leave-one-task-out)."""
    mine: MineConfig = field(
        default_factory=lambda: MineConfig(dataset="loto"),
        metadata={"panel": "Pair mining", "internal": ("split", "seed")},
    )
    """Pair mining; its split is ignored (folds decide what is held out)."""
    train: TrainConfig = field(
        default_factory=lambda: TrainConfig(epochs=3.0),
        metadata={"panel": "Training per fold", "internal": ("pairs", "out", "seed")},
    )
    """Reward-model training per fold; `pairs` and `out` are set per fold."""
    keep_models: bool = setting(False, panel="Output")
    """Keep every fold's model (by default only its scores are kept)."""
    seed: int = setting(0, panel="Data")
    """Seeds the folds (by hash of the task id), the pair mining and every fold's training."""


@config
class EvalConfig:
    """Which held-out tasks, which models and judges, and where the report goes."""

    logs: tuple[str, ...] = setting((), panel="Data")
    """orchrm.run/1 logs of the held-out tasks (or give --store)."""
    store: str | None = setting(None, panel="Data")
    """Read the tasks from this store instead of logs."""
    held_out_of: str | None = setting(None, panel="Data")
    """With --store: leave out the tasks in this pair dataset's train and validation splits."""
    rm: str | None = setting(None, panel="Model")
    """The Orch-RM reward model directory (without it and --rm-url, no orchrm selector
    runs); with --rm-url, its local copy (rendering version and budget)."""
    rm_url: str | None = setting(None, panel="Model")
    """Score through a reward server instead: .../classify (vLLM, SGLang), .../get_reward
    (OpenRLHF), .../score (orchrm serve)."""
    rm_protocol: Literal["vllm", "sglang", "openrlhf", "orchrm"] | None = setting(
        None, panel="Model"
    )
    """With --rm-url: the server's protocol (default: read from the URL's route)."""
    external_rm: str | None = setting(None, panel="Model")
    """Any Hugging Face sequence-classification reward model directory, as a baseline."""
    dtype: Literal[DTYPES] = setting("auto", panel="Model")
    """Precision the reward models loaded here score in (--rm, --external-rm); auto: bf16
    where the hardware runs it fast, else fp32 (ORCHRM_BF16 overrides the detection). A
    server (--rm-url) scores in its own."""
    orchestrator: str | None = setting(None, panel="Data")
    """Whose samples are the candidates (None: every orchestrator's)."""
    n: int = setting(8, min=1, panel="Data")
    """Candidates per task (tasks with fewer are left out)."""
    world_tasks: tuple[str, ...] = setting((), panel="Data")
    """PRESET.tasks.jsonl files of world logs: the world plays the judges and re-executes
    candidates for the votes' expected accuracy."""
    reruns: int = setting(20, min=0, panel="Data")
    """With --world-tasks: re-executions of every candidate (0: none)."""
    judge_base_url: str | None = setting(None, panel="Judges")
    """An OpenAI-compatible server that plays the LLM judges (without --world-tasks)."""
    judge_model: str = setting("default", panel="Judges")
    """Model name the judge server answers to."""
    domain: str | None = setting(None, panel="Data")
    """Only this domain (None: every domain, a table each)."""
    out: str = setting("runs/eval", panel="Output")
    """Folder for the report (Markdown, PNGs, JSON)."""
    search_curve: bool = setting(False, panel="Selectors")
    """Run orchrm-search at every N of the accuracy-over-N curves too, not only at the
    full N (the table): it then scores about eight times the edits."""
    selector_options: SelectorOptions = field(
        default_factory=SelectorOptions, metadata={"panel": "Selectors"}
    )
    """How orchrm-adaptive and orchrm-cost choose."""

    def __post_init__(self) -> None:
        if self.logs and self.store:
            raise ConfigError("give either log files or --store, not both")
        if self.held_out_of and not self.store:
            raise ConfigError("--held-out-of needs --store (pair datasets live in the store)")

"""World logs to reward models, the way a user goes with real logs: ingest the logs into
a store, mine win/lose pairs (specialized-over-base and correct-over-incorrect), export
them cut to the reward model's own token budget, and train a reward model on each pair
dataset. The demo, orchestrator training (`orchrm.experiments.rl_data`) and the world benchmarks
all go through `world_reward_models`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from orchrm.store.pairs import MineSummary
from orchrm.training.config import TrainConfig


@dataclass(frozen=True)
class PairDataset:
    """One pair dataset to mine, and the reward model to train on it."""

    name: str
    """The dataset's name in the store."""
    domain: str | None = None
    """Mine only this domain's tasks (None: every domain, mixed)."""
    steps: int | None = None
    """Training steps of its reward model; None: pairs only, no model."""
    eval_every: int | None = None
    """Validate every this many steps (None: the training settings')."""
    folder: str = ""
    """Subfolder of OUT/pairs and OUT/rm for this dataset ('': OUT/pairs and OUT/rm)."""
    domain_in_text: bool = False
    """Texts start with the task's domain line: one model that reads the domain."""


@dataclass
class WorldRMConfig:
    """What to ingest, mine and train."""

    out: str
    """Folder for the store, the exported pairs (OUT/pairs) and the models (OUT/rm)."""
    logs: list[str]
    """`orchrm.run/1` world logs to ingest (both orchestrators' samples)."""
    datasets: tuple[PairDataset, ...]
    store: str = "orchrm.duckdb"
    """The store's file name in OUT; replaced when `fresh_store`."""
    fresh_store: bool = True
    """Start from an empty store (False: ingest into the one in OUT)."""
    split: tuple[float, float, float] = (0.85, 0.15, 0.0)
    """Train, validation and test shares of the tasks."""
    seed: int = 0
    """Seeds the pair splits."""
    budget: tuple[int, object] | None = None
    """(max_tokens, count_tokens) the exported texts are cut to; None: the budget of the
    reward model `train` describes (`orchrm.scoring.backbone.backbone_budget`)."""
    train: TrainConfig = field(default_factory=TrainConfig)
    """Training settings of every model; `pairs`, `out` and `max_steps` are set per
    dataset."""
    calibration: str | None = "platt"
    """How each trained model's scores are mapped to P(correct), fitted on the executed
    samples of its validation tasks and stored with it (`orchrm.calibration.methods`);
    None: not calibrated."""
    progress: bool = True


@dataclass
class TrainedPairs:
    """One dataset's pairs and, when it was trained, its reward model."""

    dataset: PairDataset
    mined: MineSummary
    pairs: Path
    """The export folder (train.jsonl, validation.jsonl, ...)."""
    model: Path | None = None
    """The saved reward model (OUT/rm/.../model)."""
    summary: object | None = None
    """Its `orchrm.training.train.TrainSummary`."""
    validation_tasks: frozenset[str] = frozenset()
    """The tasks of its validation pairs, on whose executed samples it is calibrated."""
    calibration: object | None = None
    """Its `orchrm.calibration.methods.CalibrationSummary` (None: not calibrated)."""


@dataclass
class WorldRMResult:
    """The store and every dataset's pairs and model, by dataset name."""

    store: Path
    datasets: dict[str, TrainedPairs]


def world_reward_models(
    config: WorldRMConfig, stage_done: Callable[[str], None] | None = None
) -> WorldRMResult:
    """Ingest, mine, export every dataset, then train the models asked for.
    `stage_done` is called after "ingest and mine" and after each "train NAME"."""
    from orchrm.scoring.backbone import backbone_budget
    from orchrm.store.db import Store
    from orchrm.store.ingest import ingest_file
    from orchrm.store.pairs import MineConfig, export, mine
    from orchrm.training.train import train

    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    store_path = out / config.store
    if config.fresh_store:
        store_path.unlink(missing_ok=True)
    t = config.train
    budget = config.budget or backbone_budget(t.backbone, t.max_length, t.trust_remote_code)
    done: dict[str, TrainedPairs] = {}
    with Store(store_path) as store:
        for log in config.logs:
            ingest_file(store, log)
        for d in config.datasets:
            mine_config = MineConfig(
                dataset=d.name,
                domain=d.domain,
                seed=config.seed,
                specialized=("specialized",),
                base=("base",),
                split=config.split,
            )
            mined = mine(store, mine_config)
            pairs = out / "pairs" / d.folder
            export(store, pairs, d.name, "jsonl", *budget, domain_in_text=d.domain_in_text)
            done[d.name] = TrainedPairs(d, mined, pairs, validation_tasks=_validation(store, d))
    if stage_done:
        stage_done("ingest and mine")
    tasks = frozenset().union(*(t.validation_tasks for t in done.values()))
    executed = _executed_records(config.logs, tasks) if config.calibration else []
    for trained in done.values():
        if trained.dataset.steps is None:
            continue
        run = dataset_train_config(config, trained.dataset)
        rm_dir = Path(run.out)
        trained.summary = train(run, progress=config.progress)
        trained.model = rm_dir / "model"
        if config.calibration and trained.validation_tasks:
            trained.calibration = _calibrate(trained, executed, config.calibration)
        if stage_done:
            stage_done(f"train {trained.dataset.name}")
    return WorldRMResult(store_path, done)


def dataset_train_config(config: WorldRMConfig, dataset: PairDataset) -> TrainConfig:
    """The `TrainConfig` the model of `dataset` trains with: `config.train` on its
    exported pairs (OUT/pairs/FOLDER), into OUT/rm/FOLDER, for its steps."""
    out = Path(config.out)
    return replace(
        config.train,
        pairs=str(out / "pairs" / dataset.folder),
        out=str(out / "rm" / dataset.folder),
        max_steps=dataset.steps,
        eval_every=dataset.eval_every or config.train.eval_every,
    )


def _validation(store, dataset: PairDataset) -> frozenset[str]:
    rows = store.db.execute(
        "SELECT DISTINCT task_id FROM pairs WHERE dataset = ? AND split = 'validation'",
        [dataset.name],
    ).fetchall()
    return frozenset(task_id for (task_id,) in rows)


def _executed_records(logs: list[str], tasks: frozenset[str]) -> list[dict]:
    """The executed records of `tasks` in the logs, read once for every model's
    calibration (only these are kept in memory)."""
    from orchrm.calibration.calibrate import executed
    from orchrm.jsonl import read_jsonl

    return [
        r for log in logs for _, r in read_jsonl(log) if executed(r) and r.get("task_id") in tasks
    ]


def _calibrate(trained: TrainedPairs, executed: list[dict], method: str):
    """Fit the model's calibration on its validation tasks' executed samples."""
    from orchrm.calibration.methods import calibrate_model_dir

    records = [r for r in executed if r.get("task_id") in trained.validation_tasks]
    return calibrate_model_dir(trained.model, records, method)

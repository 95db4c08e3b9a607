"""World logs to reward models, the way a user goes with real logs, as two stages
(`orchrm.experiments.stages`): the pairs (`mine_pairs`: ingest the logs into a fresh
store, mine win/lose pairs, specialized-over-base and correct-over-incorrect, and export
them cut to the reward model's own token budget) and a reward model per pair dataset
(`train_reward_model`: trained, then calibrated on its validation tasks' executed
samples). `world_reward_models` runs both; the demo, orchestrator training
(`orchrm.experiments.rl_world.data`) and the world benchmarks all go through it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from orchrm.experiments.stages import (
    STAGE_JSON,
    WorldLog,
    file_fingerprint,
    fingerprint,
    run_stage,
)
from orchrm.store.pairs import MINING_VERSION, MineSummary
from orchrm.training.config import TrainConfig

PAIR_SPLIT = (0.85, 0.15, 0.0)
"""Train, validation and test shares of the tasks whose pairs a reward model trains on."""


@dataclass(frozen=True)
class Cut:
    """How the exported texts are cut to a reward model's token budget."""

    max_length: int = 512
    """Tokens of a whole text."""
    backbone: str | None = None
    """The backbone whose tokenizer counts the tokens ('': the default MiniLM), leaving
    room for its special tokens (`orchrm.rmodel.tokens.render_budget`); None:
    `approx_token_count` counts them, up to `max_length`."""
    trust_remote_code: bool = False

    def budget(self) -> tuple[int, object]:
        """(max_tokens, count_tokens) for `orchrm.store.pairs.export`."""
        from orchrm.rmodel.tokens import backbone_budget

        if self.backbone is None:
            return self.max_length, None
        return backbone_budget(self.backbone, self.max_length, self.trust_remote_code)


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
    logs: list
    """The logs to ingest (both orchestrators' samples): `WorldLog` stages, or paths of
    other `orchrm.run/1` logs, whose fingerprint is their content's."""
    datasets: tuple[PairDataset, ...]
    store: str = "orchrm.duckdb"
    """The store's file name in OUT, made afresh whenever the pairs are mined again."""
    split: tuple[float, float, float] = PAIR_SPLIT
    """Train, validation and test shares of the tasks."""
    seed: int = 0
    """Seeds the pair splits."""
    budget: Cut | None = None
    """How the exported texts are cut; None: to the budget of the reward model `train`
    describes."""
    train: TrainConfig = field(default_factory=TrainConfig)
    """Training settings of every model; `pairs`, `out` and `max_steps` are set per
    dataset."""
    denoise_runs: int = 0
    """Mine correct-over-incorrect on each plan's success rate over this many executions
    or more (`MineConfig.denoise` with `min_runs`; plans run fewer times are left out);
    0: on single runs."""
    min_gap: float = 0.25
    """With `denoise_runs`: the least success-rate gap of a denoised pair."""
    calibration: str | None = "platt"
    """How each trained model's scores are mapped to P(correct), fitted on the executed
    samples of its validation tasks and stored with it (`orchrm.calibration.methods`);
    None: not calibrated."""
    progress: bool = True

    def cut(self) -> Cut:
        """`budget`, or the cut of the model `train` describes."""
        t = self.train
        return self.budget or Cut(t.max_length, t.backbone, t.trust_remote_code)

    def log_paths(self) -> list[str]:
        return [str(log.path if isinstance(log, WorldLog) else log) for log in self.logs]


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
    """Its `orchrm.training.summary.TrainSummary`."""
    validation_tasks: frozenset[str] = frozenset()
    """The tasks of its validation pairs, on whose executed samples it is calibrated."""
    calibration: object | None = None
    """Its `orchrm.calibration.methods.CalibrationSummary` (None: not calibrated)."""
    fingerprint: str = ""
    """The fingerprint of its model's stage, or of its pairs when no model is trained."""
    reused: bool = False
    """The last stage that made it (its model's, else the pairs') was reused."""


@dataclass
class WorldRMResult:
    """The store and every dataset's pairs and model, by dataset name."""

    store: Path
    datasets: dict[str, TrainedPairs]


def _mine_and_export(
    config: WorldRMConfig, store_path: Path, datasets: dict[str, dict], upstream: list[str]
) -> dict:
    """The work of the pairs stage (`mine_pairs`): the logs ingested into a fresh store at
    `store_path`, every dataset mined and exported into OUT/pairs/FOLDER; returns, by
    dataset, its fingerprint (from its values in `datasets` and `upstream`), what was mined
    and its validation tasks."""
    from orchrm.store.db import Store
    from orchrm.store.ingest import ingest_file
    from orchrm.store.pairs import MineConfig, export, mine

    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    store_path.unlink(missing_ok=True)
    budget = config.cut().budget()
    info = {}
    with Store(store_path) as store:
        for log in config.log_paths():
            ingest_file(store, log)
        for d in config.datasets:
            mine_config = MineConfig(
                dataset=d.name,
                domain=d.domain,
                seed=config.seed,
                specialized=("specialized",),
                base=("base",),
                split=config.split,
                **_denoising(config),
            )
            mined = mine(store, mine_config)
            pairs = out / "pairs" / d.folder
            export(store, pairs, d.name, "jsonl", *budget, domain_in_text=d.domain_in_text)
            info[d.name] = {
                "fingerprint": fingerprint("pairs", datasets[d.name], upstream),
                "mined": asdict(mined),
                "validation_tasks": sorted(_validation(store, d)),
            }
    return info


def mine_pairs(config: WorldRMConfig) -> WorldRMResult:
    """The pairs stage: ingest the logs into a fresh OUT/STORE, mine and export every
    dataset into OUT/pairs/FOLDER. Its manifest is OUT/pairs/stage.json; each dataset
    gets a fingerprint of its own (its settings, the cut, the split and seed, the logs),
    so adding a dataset leaves the others' models reused."""
    out = Path(config.out)
    store_path = out / config.store
    cut = config.cut()
    upstream = [
        log.fingerprint if isinstance(log, WorldLog) else file_fingerprint(log)
        for log in config.logs
    ]
    shared = {"split": config.split, "seed": config.seed, "cut": asdict(cut)}
    shared |= {"mining": MINING_VERSION, **_denoising(config)}
    datasets = {d.name: {**_pair_values(d), **shared} for d in config.datasets}
    values = {"datasets": datasets, "store": config.store}

    def build() -> dict:
        return _mine_and_export(config, store_path, datasets, upstream)

    outputs = [store_path, *(out / "pairs" / d.folder / "train.jsonl" for d in config.datasets)]
    manifest = out / "pairs" / STAGE_JSON
    run = run_stage(manifest, "pairs", values, upstream, outputs, build)
    done = {}
    for d in config.datasets:
        got = run.info[d.name]
        done[d.name] = TrainedPairs(
            d,
            MineSummary(**got["mined"]),
            out / "pairs" / d.folder,
            validation_tasks=frozenset(got["validation_tasks"]),
            fingerprint=got["fingerprint"],
            reused=run.reused,
        )
    return WorldRMResult(store_path, done)


def _denoising(config: WorldRMConfig) -> dict:
    """The `MineConfig` settings of denoised mining (none when `denoise_runs` is 0, so
    single-run pairs keep their fingerprint)."""
    if not config.denoise_runs:
        return {}
    return {"denoise": True, "min_runs": config.denoise_runs, "min_gap": config.min_gap}


def _pair_values(d: PairDataset) -> dict:
    """A dataset's settings that its pairs depend on (not its model's)."""
    return {
        "name": d.name,
        "domain": d.domain,
        "folder": d.folder,
        "domain_in_text": d.domain_in_text,
    }


def train_reward_model(
    config: WorldRMConfig, trained: TrainedPairs, executed: Callable[[], list[dict]]
) -> None:
    """The reward-model stage of one dataset: train on its exported pairs into
    OUT/rm/FOLDER (manifest OUT/rm/FOLDER/stage.json) and calibrate it on the records
    `executed()` returns (the logs' executed samples), kept to its validation tasks.
    Fills `trained`'s model, summary, calibration, fingerprint and reused."""
    from orchrm.calibration.methods import CalibrationSummary, calibration_from_dict
    from orchrm.training.summary import TrainSummary

    run = dataset_train_config(config, trained.dataset)
    folder = Path(run.out)
    values = {"train": asdict(run), "calibration": config.calibration}

    def build() -> dict:
        from orchrm.training.train import train

        summary = train(run, progress=config.progress)
        info = {"summary": summary.to_dict(), "calibration": None}
        if config.calibration and trained.validation_tasks:
            c = _calibrate(folder / "model", trained.validation_tasks, executed(), config)
            info["calibration"] = {
                "map": c.calibration.to_dict(),
                "candidates": c.candidates,
                "ece_raw": c.ece_raw,
                "ece": c.ece,
            }
        return info

    outputs = [folder / "model" / "config.json", folder / "model" / "orchrm.json"]
    stage = run_stage(
        folder / STAGE_JSON, "reward model", values, [trained.fingerprint], outputs, build
    )
    trained.model = folder / "model"
    trained.summary = TrainSummary(**stage.info["summary"])
    c = stage.info["calibration"]
    trained.calibration = c and CalibrationSummary(
        calibration_from_dict(c["map"]), c["candidates"], c["ece_raw"], c["ece"]
    )
    trained.fingerprint, trained.reused = stage.fingerprint, stage.reused


def world_reward_models(
    config: WorldRMConfig, stage_done: Callable[[str], None] | None = None
) -> WorldRMResult:
    """The pairs stage, then the reward-model stage of every dataset with steps (each
    reused while its inputs stay the same). `stage_done` is called after "ingest and
    mine" and after each "train NAME"."""
    result = mine_pairs(config)
    if stage_done:
        stage_done("ingest and mine")
    tasks = frozenset().union(*(t.validation_tasks for t in result.datasets.values()))
    read: list[list[dict]] = []

    def executed() -> list[dict]:
        """The logs' executed records of every validation task, read once for all the
        models that are calibrated here (only these are kept in memory)."""
        if not read:
            read.append(_executed_records(config.log_paths(), tasks))
        return read[0]

    for trained in result.datasets.values():
        if trained.dataset.steps is None:
            continue
        train_reward_model(config, trained, executed)
        if stage_done:
            stage_done(f"train {trained.dataset.name}")
    return result


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
    """The executed records of `tasks` in the logs."""
    from orchrm.calibration.calibrate import executed
    from orchrm.jsonl import read_jsonl

    return [
        r for log in logs for _, r in read_jsonl(log) if executed(r) and r.get("task_id") in tasks
    ]


def _calibrate(model: Path, tasks: frozenset[str], executed: list[dict], config: WorldRMConfig):
    """Fit the model's calibration on its validation tasks' executed samples."""
    from orchrm.calibration.methods import calibrate_model_dir

    records = [r for r in executed if r.get("task_id") in tasks]
    return calibrate_model_dir(model, records, config.calibration)

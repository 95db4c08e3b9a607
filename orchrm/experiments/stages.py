"""The pipelines' stages, each reused while its inputs stay the same.

A stage writes its output and a small manifest beside it (`stage.json` in its folder, or
NAME.stage.json beside a file of a shared folder) that holds its inputs' fingerprint: a
hash of its config values, the fingerprints of the stages it reads from (upstream) and
orchrm's version. Called again with the same inputs while its outputs are all there, a
stage returns what its manifest recorded without doing the work; a changed input reruns
it, and, since its fingerprint then changes, every stage downstream of it. The manifest
is removed before a stage runs and written after it finishes, so an interrupted run is
never taken for a complete one.

Here are the mechanism (`run_stage`), the world logs (`world_log`) and best-of-N on a
held-out world log (`best_of_n`); the pairs and the reward models are
`orchrm.experiments.world_models`'s. The demo, `orchrm rl`'s data and the world
benchmarks are strung from them.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from orchrm import __version__
from orchrm.jsonl import atomic_file, read_jsonl, write_jsonl
from orchrm.world.tasks import Preset, WorldTask, generate_tasks

STAGE_JSON = "stage.json"
"""A stage's manifest in its output folder."""


@dataclass
class StageRun:
    """What `run_stage` returns: the stage's fingerprint and what it recorded."""

    fingerprint: str
    info: dict
    """What the stage recorded about its output (counts, summaries), read back from the
    manifest when it was reused."""
    reused: bool
    """The output was there for the same inputs and nothing ran."""


def fingerprint(stage: str, values: dict, upstream: Sequence[str] = ()) -> str:
    """The hex SHA-256 of a stage's name, its config values (JSON; paths as text), its
    upstream stages' fingerprints in order, and orchrm's version."""
    document = {"stage": stage, "values": values, "upstream": list(upstream)}
    text = json.dumps({**document, "orchrm": __version__}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def file_fingerprint(path: str | Path) -> str:
    """The hex SHA-256 of a file's bytes: the fingerprint of an input no stage made (a
    log of real executions)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def run_stage(
    manifest: Path,
    stage: str,
    values: dict,
    upstream: Sequence[str],
    outputs: Sequence[Path],
    build: Callable[[], dict],
) -> StageRun:
    """Return the manifest's record when it holds this fingerprint and every file of
    `outputs` exists; else remove the manifest, call `build` (which writes the outputs
    and returns what to record) and write the manifest."""
    key = fingerprint(stage, values, upstream)
    try:
        old = json.loads(manifest.read_text())
    except (OSError, ValueError):
        old = None
    if isinstance(old, dict) and old.get("fingerprint") == key and all(map(Path.exists, outputs)):
        return StageRun(key, old.get("info") or {}, True)
    manifest.unlink(missing_ok=True)
    info = build()
    record = {"stage": stage, "fingerprint": key, "orchrm": __version__, "values": values}
    shown = [os.path.relpath(p, manifest.parent) for p in outputs]
    record |= {"upstream": list(upstream), "outputs": shown, "info": info}
    with atomic_file(manifest) as f:
        json.dump(record, f, indent=1, default=str)
    return StageRun(key, info, False)


@dataclass
class WorldLog:
    """One world log: both world orchestrators' samples on a preset's tasks, executed
    (`orchrm.run/1` records), and the tasks it was generated from."""

    path: Path
    tasks_path: Path
    """The `WorldTask`s, hidden attributes included (`orchrm world generate`'s form)."""
    preset: str | Preset
    n_tasks: int
    seed: int
    fingerprint: str
    info: dict
    """`records`, `execution_tokens`, `executions_per_s` and `seconds` of its generation."""
    reused: bool

    def records(self) -> list[dict]:
        """The log's records, read from its file."""
        return [r for _, r in read_jsonl(self.path)]

    def tasks(self) -> list[WorldTask]:
        """The world tasks the log was generated from (made again from the seed)."""
        return generate_tasks(self.preset, self.n_tasks, self.seed)

    @property
    def execution_tokens(self) -> int:
        """Sub-agent tokens spent executing the log's samples."""
        return self.info["execution_tokens"]


def world_log(
    folder: str | Path,
    name: str,
    preset: str | Preset,
    tasks: int,
    samples: int,
    seed: int,
    *,
    specialized: dict | None = None,
    edits_of: int = 0,
    progress: bool = True,
) -> WorldLog:
    """The world-log stage: `samples` executed orchestrations per task from each world
    orchestrator on `tasks` tasks of `preset` (a name or a `Preset` variant) from world
    `seed`, into FOLDER/NAME.jsonl with the tasks in FOLDER/NAME.tasks.jsonl.
    `specialized`: fields to change on the specialized orchestrator (e.g. `follow`).
    `edits_of` > 0: `samples` edited plans per task instead, each an edit of one of the
    first `edits_of` plans a world orchestrator wrote for it (`EditingOrchestrator`,
    orchestrator name `edited`)."""
    import time

    from orchrm.world.generate import generate
    from orchrm.world.orchestrators import EditingOrchestrator, orchestrators

    folder = Path(folder)
    path, tasks_path = folder / f"{name}.jsonl", folder / f"{name}.tasks.jsonl"
    values = {
        "preset": preset if isinstance(preset, str) else asdict(preset),
        "tasks": tasks,
        "samples": samples,
        "seed": seed,
        "specialized": specialized or {},
        **({"edits_of": edits_of} if edits_of else {}),
    }

    def build() -> dict:
        writers = None
        if specialized:
            writers = orchestrators(seed)
            writers["specialized"] = replace(writers["specialized"], **specialized)
        if edits_of:
            logged = tuple((writers or orchestrators(seed)).values())
            editor = EditingOrchestrator(logged, edits_of, seed=seed)
            writers = {editor.name: editor}
        start = time.perf_counter()
        generated = generate(preset, tasks, samples, seed, progress, writers)
        write_jsonl(generated.records, path)
        write_jsonl([t.to_dict() for t in generated.tasks], tasks_path)
        return {
            "records": len(generated.records),
            "execution_tokens": sum(r["tokens"]["execution"] for r in generated.records),
            "executions_per_s": generated.executions_per_s,
            "seconds": time.perf_counter() - start,
        }

    manifest = folder / f"{name}.{STAGE_JSON}"
    run = run_stage(manifest, "world log", values, (), (path, tasks_path), build)
    return WorldLog(path, tasks_path, preset, tasks, seed, run.fingerprint, run.info, run.reused)


@dataclass
class BestOfN:
    """A held-out world log's best-of-N evaluation."""

    evaluation: object
    """Its `orchrm.evaluation.metrics.Evaluation` (every selector at N = 1, 2, 4, ...)."""
    views: list = field(default_factory=list)
    """Its tasks (the first N candidates) with every selector's pick, as
    `orchrm.viewer.task.ViewTask`s."""
    fingerprint: str = ""
    reused: bool = False


def _load_model(model, loaded: dict, dtype: str):
    """The `OrchRM` of a stage's reward model (`model.model`, its folder), loaded once
    into `loaded` and taken from there afterwards."""
    from orchrm.scoring.local import OrchRM

    if model.model not in loaded:
        loaded[model.model] = OrchRM.load(model.model, dtype=dtype)
    return loaded[model.model]


def _evaluate_best_of_n(
    folder: Path,
    test: WorldLog,
    scorers: dict,
    *,
    samples: int,
    reruns: int,
    seed: int,
    domain: str,
    progress: bool,
    search_curve: bool,
) -> dict:
    """The work of the best-of-N stage (`best_of_n`) with the line-up's reward models
    loaded (`scorers`, by role): FOLDER/evaluation.json, FOLDER/view.json and its page;
    returns what its manifest records."""
    from orchrm.evaluation.lineup import (
        build_lineup,
        evaluate_tasks,
        first_candidates,
        offline_selectors,
    )
    from orchrm.evaluation.loading import tasks_from_logs
    from orchrm.viewer.page import selections, write_evaluation_view

    tasks = tasks_from_logs([str(test.path)], "specialized", samples)
    lineup = build_lineup(tasks, **scorers, world_tasks=test.tasks(), reruns=reruns, seed=seed)
    ev = evaluate_tasks(
        lineup.tasks, lineup.selectors, samples, domain, progress, curve=search_curve
    )
    shown = first_candidates(lineup.tasks, samples)
    picks = selections(shown, offline_selectors(lineup))
    (folder / "evaluation.json").write_text(json.dumps(ev.to_dict(), indent=1))
    write_evaluation_view(folder, shown, picks, title=f"orchrm best-of-{samples}: {domain}")
    return {"tasks": ev.tasks}


def best_of_n(
    folder: str | Path,
    test: WorldLog,
    models: dict,
    *,
    samples: int,
    reruns: int,
    seed: int,
    domain: str,
    dtype: str = "auto",
    loaded: dict | None = None,
    progress: bool = True,
    search_curve: bool = False,
) -> BestOfN:
    """The best-of-N stage: the specialized orchestrator's first `samples` candidates of
    each task of `test`, every candidate re-executed `reruns` times, against the whole
    line-up (`orchrm.evaluation.lineup.build_lineup`), into FOLDER/evaluation.json and
    FOLDER/view.json (with its page, view.html). `models`: the line-up's reward models by
    role (`rm`, `external_rm`, `mixed_rm`, `unified_rm`), each with its `model` folder and
    its stage's `fingerprint`; `loaded`: models already loaded, by folder (filled here);
    `search_curve`: orchrm-search at every N, not only the full N
    (`orchrm.evaluation.lineup.CURVE_COSTLY`)."""
    from orchrm.viewer.json_form import read_view_json

    folder = Path(folder)
    loaded = {} if loaded is None else loaded
    values = {"samples": samples, "reruns": reruns, "seed": seed, "domain": domain}
    values |= {"dtype": dtype, "roles": sorted(models), "search_curve": search_curve}
    upstream = [test.fingerprint, *(models[role].fingerprint for role in sorted(models))]

    def build() -> dict:
        scorers = {role: _load_model(m, loaded, dtype) for role, m in models.items()}
        return _evaluate_best_of_n(
            folder,
            test,
            scorers,
            samples=samples,
            reruns=reruns,
            seed=seed,
            domain=domain,
            progress=progress,
            search_curve=search_curve,
        )

    outputs = (folder / "evaluation.json", folder / "view.json")
    folder.mkdir(parents=True, exist_ok=True)
    run = run_stage(folder / STAGE_JSON, "best of n", values, upstream, outputs, build)
    ev = evaluation_from_dict(json.loads((folder / "evaluation.json").read_text()))
    return BestOfN(ev, read_view_json(folder / "view.json"), run.fingerprint, run.reused)


def evaluation_from_dict(data: dict):
    """The `orchrm.evaluation.metrics.Evaluation` that `to_dict` gave `data` (intervals as
    tuples again, the calibration report and its bins as their dataclasses)."""
    from orchrm.evaluation.metrics import Evaluation, SelectorResult
    from orchrm.evaluation.reliability import CalibrationBin, CalibrationReport

    def tuples(d: dict) -> dict:
        return {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}

    results = [SelectorResult(**tuples(r)) for r in data["results"]]
    calibration = data.get("calibration")
    if calibration is not None:
        bins = {k: tuple(CalibrationBin(**b) for b in calibration[k]) for k in ("bins", "raw_bins")}
        calibration = CalibrationReport(**{**calibration, **bins})
    return Evaluation(**{**data, "results": results, "calibration": calibration})

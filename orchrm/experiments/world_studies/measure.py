"""What the world benchmarks compute (`benchmarks/rm_ceiling.py`, `rm_scaling.py`,
`world_headroom.py`, `rm_recipe.py`, `beyond_trained.py`, `decoder_backbone.py`): the
world data they share (`world_pairs`, built from the stages of
`orchrm.experiments.stages`), and each study's figures, set against `features-BT`
(`orchrm.experiments.world_studies.features_bt`), majority vote, random and bayes.
"""

from __future__ import annotations

import dataclasses
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from orchrm.errors import MissingInput
from orchrm.evaluation.lineup import build_lineup, evaluate_tasks, read_world_tasks
from orchrm.evaluation.loading import tasks_from_logs
from orchrm.evaluation.metrics import evaluate_selectors
from orchrm.evaluation.report import points
from orchrm.evaluation.reruns import with_reruns
from orchrm.experiments.stages import world_log
from orchrm.experiments.world_models import Cut, PairDataset, WorldRMConfig, world_reward_models
from orchrm.experiments.world_studies.features_bt import (
    FeatureFit,
    bayes_p,
    chosen_p,
    cue_gap,
    fit_features,
    linear_scores,
    random_p,
    rm_scores,
)
from orchrm.selection.selectors import (
    CandidateSet,
    RewardModelSelector,
    bayes_selector,
    majority_selector,
    random_selector,
)
from orchrm.store.pairs import MineSummary
from orchrm.training.config import TrainConfig
from orchrm.world.orchestrators import WorldOrchestrator
from orchrm.world.tasks import PRESETS, Preset

SAMPLES = 8
"""Candidates per task and orchestrator in the world benchmarks (best-of-8)."""
RERUNS = 20
"""Re-executions of every held-out candidate, as the demo measures votes."""
APPROX_512 = Cut(512)
"""Texts cut at 512 approximate tokens (`orchrm.store.pairs.export`'s default)."""
ORCHESTRATOR_FIELDS = {f.name for f in dataclasses.fields(WorldOrchestrator)} - {"name", "seed"}
"""What a world variant may set on the specialized orchestrator (`follow`, ...)."""


@dataclass
class WorldPairs:
    """The world data a benchmark trains and evaluates on."""

    train: list[CandidateSet]
    """Training tasks, once per orchestrator (specialized, then base)."""
    test: list[CandidateSet]
    """Held-out tasks with exactly SAMPLES specialized candidates, re-executed RERUNS
    times (so votes have an expected accuracy)."""
    pairs: Path
    """The export folder (train.jsonl, validation.jsonl)."""
    mined: MineSummary


def world_pairs(
    preset: str | Preset,
    train_tasks: int,
    test_tasks: int,
    seed: int,
    out: str | Path,
    cut: Cut = APPROX_512,
    split: tuple[float, float, float] = (1.0, 0.0, 0.0),
    specialized: dict | None = None,
) -> WorldPairs:
    """Training logs from world `seed`, held-out logs from `seed + 1`, both in OUT/logs;
    pairs mined as the demo mines them and exported, cut by `cut`, into OUT/pairs (the
    world-log and pairs stages, reused while their inputs stay the same).
    `specialized`: fields to change on the specialized orchestrator (e.g. `follow`)."""
    out = Path(out)
    logs = {
        part: world_log(
            out / "logs", part, preset, n, SAMPLES, s, specialized=specialized, progress=False
        )
        for part, n, s in (("train", train_tasks, seed), ("test", test_tasks, seed + 1))
    }
    name = preset if isinstance(preset, str) else preset.name
    result = world_reward_models(
        WorldRMConfig(
            out=str(out),
            logs=[logs["train"]],
            datasets=(PairDataset("world", name),),
            store="store.duckdb",
            split=split,
            budget=cut,
        )
    )
    train_log, test_log = str(logs["train"].path), str(logs["test"].path)
    test = [
        t
        for t in tasks_from_logs([test_log], "specialized", SAMPLES)
        if len(t.candidates) == SAMPLES
    ]
    return WorldPairs(
        train=[
            t for o in ("specialized", "base") for t in tasks_from_logs([train_log], o, SAMPLES)
        ],
        test=with_reruns(test, logs["test"].tasks(), RERUNS),
        pairs=out / "pairs",
        mined=result.datasets["world"].mined,
    )


def references(tasks: list[CandidateSet]) -> dict:
    """Majority vote, random and bayes at best-of-SAMPLES (`SelectorResult`s by name)."""
    chosen = {"majority": majority_selector, "random": random_selector(0), "bayes": bayes_selector}
    return evaluate_tasks(tasks, chosen, SAMPLES, progress=False).at(SAMPLES)


@dataclass
class Ceiling:
    """A demo reward model against features-BT on the demo's held-out tasks."""

    tasks: int
    fit: FeatureFit
    results: dict[str, float]
    """Mean true success probability of each selector's pick, `random` and `bayes`."""
    cue_gaps: dict[str, float]
    """`cue_gap` of each scored selector (and of bayes: the size of the real effect)."""


def ceiling(demo: Path, domain: str, rms: list[Path], n: int) -> Ceiling:
    """The demo's `domain` model, and the models `rms`, against features-BT and
    features-ridge fit on the demo's training logs and pairs, on its held-out tasks."""
    from orchrm.scoring.local import OrchRM

    train_logs = demo / "logs" / f"{domain}.train.jsonl"
    test_logs = demo / "logs" / f"{domain}.test.jsonl"
    pairs = demo / "pairs" / domain / "train.jsonl"
    for path in (train_logs, test_logs, pairs):
        if not path.exists():
            raise MissingInput(f"{path} is missing: run `orchrm demo --out {demo}` first")
    train = [
        t
        for orchestrator in ("specialized", "base")
        for t in tasks_from_logs([str(train_logs)], orchestrator, n)
    ]
    test = [
        t for t in tasks_from_logs([str(test_logs)], "specialized", n) if len(t.candidates) >= n
    ]
    # The demo cuts its pairs to the reward model's budget: match them the same way.
    demo_rm = demo / "rm" / domain / "model"
    rm = OrchRM.load(demo_rm)
    fit = fit_features(train, pairs, (rm.budget, (512, None)))  # and the export's default
    scored = {
        "features-BT (same pairs)": linear_scores(test, fit.keys, fit.bt),
        "features-ridge (true p labels)": linear_scores(test, fit.keys, fit.ridge),
    }
    results = {"random": random_p(test), "bayes": bayes_p(test)}
    results |= {name: chosen_p(test, scores) for name, scores in scored.items()}
    for folder in [demo_rm, *map(Path, rms)]:
        rm = rm if folder == demo_rm else OrchRM.load(folder)
        scored[f"reward model {folder}"] = rm_scores(rm, test)
        results[f"reward model {folder}"] = chosen_p(test, scored[f"reward model {folder}"])
    scored["bayes"] = [[c.p_success for c in t.candidates] for t in test]
    return Ceiling(len(test), fit, results, {k: cue_gap(test, s) for k, s in scored.items()})


def parse_variant(text: str) -> tuple[str, dict[str, float]]:
    """`NAME:KEY=VALUE,...` -> (name, settings); ValueError says what is wrong."""
    name, _, body = text.partition(":")
    if not name or not body:
        raise ValueError(f"--variant {text!r}: expected NAME:KEY=VALUE[,KEY=VALUE]")
    known = {f.name for f in dataclasses.fields(PRESETS["math"])} | ORCHESTRATOR_FIELDS
    settings = {}
    for item in body.split(","):
        key, _, value = item.partition("=")
        if key not in known:
            raise ValueError(f"--variant {text!r}: unknown field {key!r}")
        try:
            settings[key] = float(value)
        except ValueError:
            raise ValueError(f"--variant {text!r}: {key} needs a number, got {value!r}") from None
    return name, settings


def headroom(preset: str, settings: dict, train_n: int, test_n: int, seed: int, out: Path):
    """Expected accuracy of each reference selector on one world variant: `random`,
    `majority`, `features-BT`, `features-ridge` and `bayes`."""
    variant = dataclasses.replace(
        PRESETS[preset], **{k: v for k, v in settings.items() if k not in ORCHESTRATOR_FIELDS}
    )
    writer_settings = {k: v for k, v in settings.items() if k in ORCHESTRATOR_FIELDS}
    world = world_pairs(variant, train_n, test_n, seed, out, specialized=writer_settings)
    test = world.test
    fit = fit_features(world.train, world.pairs / "train.jsonl", ((512, None),))
    voted = evaluate_tasks(test, {"majority": majority_selector}, SAMPLES, progress=False)
    return {
        "random": random_p(test),
        "majority": voted.at(SAMPLES)["majority"].expected_accuracy,
        "features-BT": chosen_p(test, linear_scores(test, fit.keys, fit.bt)),
        "features-ridge": chosen_p(test, linear_scores(test, fit.keys, fit.ridge)),
        "bayes": bayes_p(test),
    }


@dataclass
class ScalingRow:
    """One trained model of `rm_scaling.py` beside features-BT on as many pairs."""

    steps: int
    pairs_seen: int
    seconds: float
    validation_accuracy: float | None
    expected: float
    """Mean true success probability of the model's pick."""
    versus_majority: str
    """Its expected accuracy minus majority's, task by task, with the paired interval."""
    cue_gap: float
    features_expected: float
    features_cue_gap: float


def scaling_row(world: WorldPairs, steps: int, out: Path, max_length: int, lr: float, cut: Cut):
    """Train MiniLM for `steps` on the world's pairs into OUT/rm-STEPS, evaluate it on
    the held-out tasks, and fit features-BT on a random sample of as many training pairs
    as it saw (cut by `cut`, as the pairs were)."""
    from orchrm.scoring.local import OrchRM
    from orchrm.training.train import train

    tasks = world.test
    started = time.perf_counter()
    summary = train(
        TrainConfig(
            pairs=str(world.pairs),
            out=str(out / f"rm-{steps}"),
            max_steps=steps,
            max_length=max_length,
            lr=lr,
            eval_every=max(1, steps // 2),
            seed=0,
        ),
        progress=False,
    )
    seconds = time.perf_counter() - started
    orchrm = RewardModelSelector(OrchRM.load(out / f"rm-{steps}" / "model"))
    versus = evaluate_selectors(tasks, {"orchrm": orchrm, "majority": majority_selector}, [SAMPLES])
    versus = versus.at(SAMPLES)["orchrm"]
    scores = [list(orchrm(t).scores) for t in tasks]  # looked up, not scored again
    pair_lines = (world.pairs / "train.jsonl").read_text().splitlines()
    seen = min(summary.pairs_seen, len(pair_lines))
    sample = world.pairs / f"sample-{seen}.jsonl"
    sample.write_text("\n".join(random.Random(0).sample(pair_lines, seen)) + "\n")
    fit = fit_features(world.train, sample, (cut.budget(),))
    features = linear_scores(tasks, fit.keys, fit.bt)
    return ScalingRow(
        steps,
        seen,
        seconds,
        summary.best_validation_accuracy,
        chosen_p(tasks, scores),
        points(versus.expected_vs_baseline, versus.expected_vs_baseline_ci),
        cue_gap(tasks, scores),
        chosen_p(tasks, features),
        cue_gap(tasks, features),
    )


def versus_majority(demo: Path, model: Path, samples: int, reruns: int) -> str:
    """The model's argmax minus majority on the demo's held-out math tasks, expected
    accuracy in points with its paired 95% interval."""
    from orchrm.scoring.local import OrchRM

    tasks = tasks_from_logs([str(demo / "logs" / "math.test.jsonl")], "specialized", samples)
    lineup = build_lineup(
        tasks,
        rm=OrchRM.load(model),
        world_tasks=read_world_tasks([demo / "logs" / "math.test.tasks.jsonl"]),
        reruns=reruns,
        seed=0,
    )
    chosen = {k: v for k, v in lineup.selectors.items() if k in ("orchrm", "majority")}
    ev = evaluate_tasks(lineup.tasks, chosen, samples, domain="math", progress=False)
    r = ev.at(samples)["orchrm"]
    return points(r.expected_vs_baseline, r.expected_vs_baseline_ci)


def demo_pairs(demo: Path, domain: str = "math") -> Path:
    """The demo's exported pairs of `domain`; raises MissingInput when they are not there."""
    pairs = demo / "pairs" / domain
    if not (pairs / "train.jsonl").is_file():
        raise MissingInput(f"{pairs}/train.jsonl is missing: run `orchrm demo --out {demo}`")
    return pairs


def recipe_run(demo: Path, train: TrainConfig, samples: int, reruns: int):
    """Train `train` (its `pairs` and `out` set here) on the demo's math pairs into a
    temporary folder; returns its `TrainSummary` and `versus_majority` of the model."""
    from orchrm.training.train import train as train_model

    with tempfile.TemporaryDirectory() as out:
        run = dataclasses.replace(train, pairs=str(demo_pairs(demo)), out=out)
        summary = train_model(run, progress=False)
        return summary, versus_majority(demo, Path(out) / "model", samples, reruns)


TOLERANCES = (0.005, 0.01, 0.02, 0.05)
"""`orchrm-adaptive`'s tolerances in `beyond_trained`."""
WEIGHTS = (0.1, 0.25, 0.5)
"""`orchrm-cost`'s weights in `beyond_trained`."""


@dataclass
class BeyondTrained:
    """The selectors beyond argmax with a demo's trained models on one preset."""

    tasks: int
    evaluation: object
    """Every selector against majority (`orchrm.evaluation.metrics.Evaluation`, with the
    calibration of argmax's model)."""
    versus_argmax: dict
    """Every selector's `SelectorResult` against plain argmax (`orchrm`), by name."""


def beyond_trained(demo: Path, preset: str, models: dict, reruns: int) -> BeyondTrained:
    """Best-of-8 on the demo's held-out `preset` tasks: the line-up without judges, logp
    and random, with `orchrm-adaptive` at each of TOLERANCES and `orchrm-cost` at each of
    WEIGHTS; `models`: loaded reward models by name (the preset's, `mixed`, `unified`)."""
    from orchrm.evaluation.reliability import selector_calibration
    from orchrm.selection.selectors import AdaptiveSelector, CostAwareSelector

    logs = [str(demo / "logs" / f"{preset}.test.jsonl")]
    world = read_world_tasks([demo / "logs" / f"{preset}.test.tasks.jsonl"])
    lineup = build_lineup(
        tasks_from_logs(logs, "specialized", SAMPLES),
        rm=models[preset],
        mixed_rm=models.get("mixed"),
        unified_rm=models.get("unified"),
        world_tasks=world,
        reruns=reruns,
        seed=0,
    )
    chosen = dict(lineup.selectors)
    for name in ("judge-orch", "judge-traj", "logp", "random"):
        chosen.pop(name, None)  # not this benchmark's question; the demo's report has them
    base, info = chosen["orchrm"], models[preset].info
    for tolerance in TOLERANCES:
        chosen[f"adaptive tol {tolerance}"] = AdaptiveSelector(base, info, tolerance=tolerance)
    for weight in WEIGHTS:
        chosen[f"cost weight {weight}"] = CostAwareSelector(base, info, cost_weight=weight)
    evs = {
        against: evaluate_selectors(
            lineup.tasks, chosen, [SAMPLES], domain=preset, baseline=against
        )
        for against in ("majority", "orchrm")
    }
    evs["majority"].calibration = selector_calibration(lineup.tasks, base)
    return BeyondTrained(len(lineup.tasks), evs["majority"], evs["orchrm"].at(SAMPLES))


def pareto_figure(ev, folder: Path) -> Path | None:
    """The evaluation's Pareto plot copied to FOLDER/beyond_PRESET_pareto.png."""
    import shutil

    from orchrm.evaluation.plots import plots

    with tempfile.TemporaryDirectory() as work:
        for path in plots(ev, Path(work)):
            if path.name.endswith("_pareto.png"):
                target = Path(folder) / f"beyond_{path.name}"
                shutil.copyfile(path, target)
                return target
    return None

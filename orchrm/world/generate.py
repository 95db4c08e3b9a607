"""Generate world logs through the real run path, and the statistics that show the world
is non-trivial: selection headroom, majority vote, and that no surface feature of an
orchestration predicts its success on its own.

`generate` runs `orchrm.tasks.run.run_tasks` with the world's backend standing in for
the LLMs, so its records have exactly the schema of `orchrm run`, plus a `world` field
with the true success probability of each orchestration.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import partial

from orchrm.errors import ConfigError
from orchrm.orchestration import AGENT_TYPES, Orchestration
from orchrm.parse import from_dict
from orchrm.runtime.config import RunConfig
from orchrm.tasks.run import run_tasks
from orchrm.tasks.task import Task
from orchrm.world.backend import WorldBackend
from orchrm.world.model import success_probability
from orchrm.world.orchestrators import WorldOrchestrator, orchestrators
from orchrm.world.tasks import PRESETS, Preset, WorldTask, generate_tasks


def world_config() -> RunConfig:
    """The run policy for world executions: MAS-Orchestra's call patterns, no waiting."""
    return RunConfig(concurrency=64, backoff_s=0.0, call_timeout_s=60.0)


@dataclass
class Generated:
    """A preset's tasks, its log records, and how fast the executions ran."""

    preset: str
    tasks: list[WorldTask]
    records: list[dict]
    executions: int = 0
    execution_s: float = 0.0

    @property
    def executions_per_s(self) -> float:
        return self.executions / self.execution_s if self.execution_s else 0.0


def generate(
    preset: str | Preset,
    n_tasks: int,
    samples: int,
    seed: int = 0,
    progress: bool = True,
    writers: dict[str, WorldOrchestrator] | None = None,
) -> Generated:
    """`samples` orchestrations per task from each world orchestrator (base and
    specialized, or `writers` by name), executed on the world; one record per sample.
    `preset`: a name in `PRESETS` or a `Preset` (a variant of one, to study the world)."""
    if isinstance(preset, str) and preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}: choose one of {', '.join(PRESETS)}")
    config = world_config()
    tasks = generate_tasks(preset, n_tasks, seed)
    by_id = {t.id: t for t in tasks}
    run_list = [Task(t.id, t.question, t.answer, t.domain) for t in tasks]
    name_of_preset = preset if isinstance(preset, str) else preset.name
    out = Generated(name_of_preset, tasks, [])
    for name, orchestrator in (writers or orchestrators(seed)).items():
        backend = WorldBackend(tasks, seed, orchestrator, config)
        start = time.perf_counter()
        records = asyncio.run(
            run_tasks(
                run_list,
                backend,
                samples=samples,
                orchestrator=name,
                config=config,
                progress=progress,
            )
        )
        out.execution_s += time.perf_counter() - start
        for r in records:
            out.executions += r["execution"] is not None
            o = from_dict(r["orchestration"]) if r["orchestration"] else None
            p = success_probability(by_id[r["task_id"]], o, config) if o else 0.0
            r["world"] = {"preset": name_of_preset, "seed": seed, "p_success": p}
        out.records += records
    return out


# --------------------------------------------------------------------------- statistics


def _count_type(agent_type: str, record: dict, o: Orchestration | None) -> int:
    return sum(a.type == agent_type for a in o.agents) if o else 0


SURFACE_FEATURES = {
    "text length": lambda r, o: len(r["raw"]),
    "thinking length": lambda r, o: len(o.thinking) if o else 0,
    "agent count": lambda r, o: len(o.agents) if o else 0,
    "edge count": lambda r, o: len(o.edges) if o else 0,
    "debate roles": lambda r, o: sum(len(a.debate_roles or ()) for a in o.agents) if o else 0,
    **{f"has {t}": partial(_count_type, t) for t in AGENT_TYPES},
}
"""Features read off an orchestration's text alone, each tried as a predictor of success."""
LOGPROB_FEATURE = "orchestrator logprob"
"""Not a surface feature, but reported beside them: the orchestrator's own belief."""


@dataclass
class SelectorStats:
    """Accuracy at N of the reference selectors over one orchestrator's samples."""

    mean_success: float
    mean_p_success: float
    pass_at_n: float
    majority_at_n: float
    bayes_at_n: float
    random_at_n: float
    diversity: float
    """Mean share of distinct plan structures among a task's N samples."""


@dataclass
class WorldStats:
    """Everything `orchrm world stats` reports for one preset."""

    preset: str
    tasks: int
    samples: int
    by_orchestrator: dict[str, SelectorStats] = field(default_factory=dict)
    pairs: int = 0
    best_feature: str = ""
    best_feature_accuracy: float = 0.0
    feature_accuracy: dict[str, float] = field(default_factory=dict)
    executions_per_s: float = 0.0


def _structure(o: Orchestration | None) -> str:
    if o is None:
        return "unparseable"
    shape = [(a.id, a.type, a.debate_roles, a.input) for a in o.agents]
    return json.dumps([shape, [(e.source, e.target) for e in o.edges], o.answer])


def selector_stats(records: list[dict]) -> SelectorStats:
    """Reference selectors over records of one orchestrator, grouped by task."""
    by_task: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by_task[r["task_id"]].append(r)
    rows = defaultdict(list)
    for group in by_task.values():
        group.sort(key=lambda r: r["sample_index"])
        correct = [bool(r["correct"]) for r in group]
        rows["mean"].append(sum(correct) / len(correct))
        rows["p"].append(sum(r["world"]["p_success"] for r in group) / len(group))
        rows["pass"].append(any(correct))
        answers = [r["answer"] for r in group if r["answer"] is not None]
        if answers:
            counts = Counter(answers)
            top = max(counts.values())
            voted = next(a for a in answers if counts[a] == top)
            rows["majority"].append(any(r["answer"] == voted and r["correct"] for r in group))
        else:
            rows["majority"].append(False)
        best = max(range(len(group)), key=lambda i: group[i]["world"]["p_success"])
        rows["bayes"].append(correct[best])
        structures = {
            _structure(from_dict(r["orchestration"]) if r["orchestration"] else None) for r in group
        }
        rows["diversity"].append(len(structures) / len(group))

    def mean(key: str) -> float:
        return sum(rows[key]) / len(rows[key]) if rows[key] else 0.0

    return SelectorStats(
        mean_success=mean("mean"),
        mean_p_success=mean("p"),
        pass_at_n=mean("pass"),
        majority_at_n=mean("majority"),
        bayes_at_n=mean("bayes"),
        random_at_n=mean("mean"),
        diversity=mean("diversity"),
    )


def feature_accuracy(records: list[dict]) -> tuple[int, dict[str, float]]:
    """Pairwise accuracy of each surface feature on correct-vs-incorrect pairs of the
    same task (ties count half), taken in its better direction."""
    by_task: dict[str, list[tuple[bool, dict]]] = defaultdict(list)
    for r in records:
        o = from_dict(r["orchestration"]) if r["orchestration"] else None
        values = {name: f(r, o) for name, f in SURFACE_FEATURES.items()}
        values[LOGPROB_FEATURE] = r["orchestrator_logprob"] or 0.0
        by_task[r["task_id"]].append((bool(r["correct"]), values))
    wins: Counter = Counter()
    pairs = 0
    for group in by_task.values():
        right = [v for ok, v in group if ok]
        wrong = [v for ok, v in group if not ok]
        for a in right:
            for b in wrong:
                pairs += 1
                for name in a:
                    wins[name] += 1.0 if a[name] > b[name] else 0.5 if a[name] == b[name] else 0.0
    names = [*SURFACE_FEATURES, LOGPROB_FEATURE]
    accuracy = {n: max(wins[n] / pairs, 1 - wins[n] / pairs) if pairs else 0.5 for n in names}
    return pairs, accuracy


def world_stats(generated: Generated, samples: int) -> WorldStats:
    """The statistics of one generated preset."""
    stats = WorldStats(generated.preset, len(generated.tasks), samples)
    for name in orchestrators():
        records = [r for r in generated.records if r["orchestrator"] == name]
        stats.by_orchestrator[name] = selector_stats(records)
    stats.pairs, stats.feature_accuracy = feature_accuracy(generated.records)
    stats.best_feature = max(SURFACE_FEATURES, key=stats.feature_accuracy.get)
    stats.best_feature_accuracy = stats.feature_accuracy[stats.best_feature]
    stats.executions_per_s = generated.executions_per_s
    return stats

"""Best-of-N against N with a trained reward-model ensemble on the world (the form of Gao
et al.'s over-optimization curves, with the world's truth as the gold reward).

Per preset: world logs of `train_tasks` tasks (world seed S) train an ensemble of
`members` MiniLM reward models as `orchrm demo` trains one (`orchrm train --ensemble`,
each member on a bootstrap draw of the training tasks); `test_tasks` held-out tasks
(world seed S + 1: fresh draws of everything that decides success) get `candidates`
plans each from the specialized orchestrator. Every distinct plan is scored once by
every member. For N = 1, 2, 4, ... the candidates of a task are cut, in sample order,
into groups of N, and each group's pick is the plan with the best proxy score (the
first on a tie); a proxy's value at N is the mean true success probability of its picks
over every group and task (an unbiased estimate of best-of-N's expected accuracy, from
all the candidates). Proxies: one member (member 0, a single model), the ensemble's
mean, its worst case (min), mean - lambda x spread for each `spread_weights`, and the
averaged weights (WARM); the oracle (the truly best of the N) and N = 1 (a random plan)
bound them. Each proxy's drop at the largest N below its best N comes with a paired 95%
interval over tasks.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from orchrm.configs import config, setting
from orchrm.evaluation.metrics import Bootstrap
from orchrm.rmodel.ensemble import combine
from orchrm.rmodel.precision import DTYPES
from orchrm.training.config import SMALL_DATA_LR, SMALL_DATA_STEPS
from orchrm.world.tasks import PRESETS


@config(frozen=True)
class OveroptimizationSettings:
    """The study's options."""

    presets: tuple[str, ...] = ("math",)
    """Comma-separated world presets, a curve each."""
    train_tasks: int = setting(300, min=10)
    """World tasks whose logs train the ensemble (as `orchrm demo`)."""
    samples: int = setting(8, min=2)
    """Plans per training task and orchestrator."""
    test_tasks: int = setting(100, min=2)
    """Held-out world tasks (world seed + 1)."""
    candidates: int = setting(256, min=2)
    """Plans per held-out task: the largest N."""
    members: int = setting(4, min=2)
    """Ensemble members."""
    steps: int = setting(SMALL_DATA_STEPS, min=1)
    """Training steps of each member."""
    lr: float = setting(SMALL_DATA_LR, min=0.0)
    """Learning rate of each member (`orchrm demo`'s)."""
    max_length: int = setting(128, min=16)
    """Tokens per text (`orchrm demo`'s)."""
    dtype: str = setting("auto")
    """Precision of training and scoring: auto, bf16 or fp32."""
    spread_weights: tuple[float, ...] = (0.5, 1.0, 2.0)
    """lambda of each mean - lambda x spread curve."""
    seed: int = 0
    """World seed of the training tasks; held-out tasks use seed + 1."""
    out: str = "runs/overoptimization"
    """Logs, pairs, ensembles and results (reused when there)."""

    def __post_init__(self) -> None:
        from orchrm.errors import ConfigError

        unknown = [p for p in self.presets if p not in PRESETS]
        if unknown or not self.presets:
            raise ConfigError(f"--presets: choose from {', '.join(sorted(PRESETS))}")
        if self.dtype not in DTYPES:
            raise ConfigError(f"--dtype {self.dtype}: choose one of {', '.join(DTYPES)}")


@dataclass
class Scored:
    """One held-out task's candidates: true success probability and every proxy's
    score, in sample order."""

    task_id: str
    truth: list[float]
    proxies: dict[str, list[float]] = field(default_factory=dict)


def ensemble_for(preset: str, s: OveroptimizationSettings, say) -> Path:
    """Train (or reuse) the preset's ensemble on its world training logs' pairs; returns
    its model directory."""
    from orchrm.experiments.stages import world_log
    from orchrm.experiments.world_models import PairDataset, WorldRMConfig, mine_pairs
    from orchrm.rmodel.ensemble import ensemble_settings
    from orchrm.rmodel.files import read_metadata
    from orchrm.training.config import TrainConfig
    from orchrm.training.train import train

    out = Path(s.out)
    log = world_log(out / "logs", f"{preset}.train", preset, s.train_tasks, s.samples, s.seed)
    base = TrainConfig(max_length=s.max_length, lr=s.lr, dtype=s.dtype, seed=s.seed)
    mined = mine_pairs(
        WorldRMConfig(
            out=str(out),
            logs=[log],
            datasets=(PairDataset(preset, preset, folder=preset),),
            seed=s.seed,
            train=base,
            progress=False,
        )
    ).datasets[preset]
    folder = out / "rm" / preset
    wanted = {"pairs": str(mined.pairs), "members": s.members, "steps": s.steps, "lr": s.lr,
              "max_length": s.max_length, "dtype": s.dtype, "seed": s.seed}  # fmt: skip
    stamp = folder / "study.json"
    model = folder / "model"
    same = stamp.is_file() and json.loads(stamp.read_text()) == wanted
    if same and model.is_dir() and ensemble_settings(read_metadata(model)):
        say(f"{preset}: ensemble reused from {model}")
        return model
    say(f"{preset}: training {s.members} members of {s.steps} steps on {mined.pairs}")
    config = TrainConfig(
        pairs=str(mined.pairs), out=str(folder), max_steps=s.steps, eval_every=s.steps,
        max_length=s.max_length, lr=s.lr, dtype=s.dtype, seed=s.seed, ensemble=s.members,
    )  # fmt: skip
    train(config, progress=False)
    stamp.write_text(json.dumps(wanted))
    return model


def held_out(preset: str, s: OveroptimizationSettings):
    """The held-out tasks with `candidates` specialized plans each (world seed + 1)."""
    from orchrm.evaluation.loading import tasks_from_logs
    from orchrm.experiments.stages import world_log

    log = world_log(
        Path(s.out) / "logs", f"{preset}.test", preset, s.test_tasks, s.candidates, s.seed + 1
    )
    return tasks_from_logs([str(log.path)], "specialized", s.candidates)


def score_tasks(tasks, model: Path, s: OveroptimizationSettings) -> list[Scored]:
    """Every proxy's score of every candidate; each distinct (question, plan) is scored
    once per member, and once by the averaged weights."""
    from orchrm.scoring.ensemble import EnsembleScorer
    from orchrm.scoring.local import OrchRM

    ensemble = EnsembleScorer.load(model, dtype=s.dtype)
    warm = OrchRM.load(model, dtype=s.dtype)
    items = {}
    for task in tasks:
        for c in task.candidates:
            if c.orchestration is not None:
                items.setdefault((task.question, c.orchestration, task.domain or ""), None)
    keys = list(items)
    members = dict(zip(keys, (r.members for r in ensemble.score(keys)), strict=True))
    warm_scores = dict(
        zip(keys, warm.info.normalize([r.score for r in warm.score(keys)]), strict=True)
    )
    out = []
    for task in tasks:
        row = Scored(task.task_id, [c.p_success or 0.0 for c in task.candidates])
        keyed = [
            (task.question, c.orchestration, task.domain or "") if c.orchestration else None
            for c in task.candidates
        ]
        values = [members.get(k) if k else None for k in keyed]
        row.proxies["one model"] = [v[0] if v else -math.inf for v in values]
        row.proxies["mean"] = [combine(v, "mean", 0) if v else -math.inf for v in values]
        row.proxies["min"] = [combine(v, "min", 0) if v else -math.inf for v in values]
        for weight in s.spread_weights:
            row.proxies[f"mean - {weight:g} spread"] = [
                combine(v, "mean_minus_std", weight) if v else -math.inf for v in values
            ]
        row.proxies["warm"] = [warm_scores[k] if k else -math.inf for k in keyed]
        out.append(row)
    return out


def ns_of(candidates: int) -> list[int]:
    """1, 2, 4, ... up to `candidates`."""
    return [2**k for k in range(int(math.log2(candidates)) + 1)]


def pick_value(truth: list[float], proxy: list[float] | None, n: int) -> float:
    """The mean true success probability of the picks of one task's groups of `n`
    (the proxy's best, the first on a tie; None: the oracle's)."""
    picks = []
    for start in range(0, len(truth) - n + 1, n):
        group = range(start, start + n)
        if proxy is None:
            picks.append(max(truth[i] for i in group))
        else:
            best = max(group, key=lambda i: (proxy[i], -i))
            picks.append(truth[best])
    return sum(picks) / len(picks)


def curves(rows: list[Scored]) -> dict:
    """Per proxy (and the oracle): per N the per-task values, their mean, the best N and
    the drop at the largest N below it with its paired 95% interval."""
    ns = ns_of(len(rows[0].truth))
    names = [*rows[0].proxies, "oracle"]
    out = {}
    for name in names:
        per_n = {n: [pick_value(r.truth, r.proxies.get(name), n) for r in rows] for n in ns}
        means = {n: sum(v) / len(v) for n, v in per_n.items()}
        best = max(ns, key=lambda n: (means[n], -n))
        last = ns[-1]
        drop = means[last] - means[best]
        ci = Bootstrap().difference(per_n[last], per_n[best]) if best != last else (0.0, 0.0)
        out[name] = {"accuracy": means, "best_n": best, "drop": drop, "drop_ci": ci,
                     "per_task": per_n}  # fmt: skip
    return out


def table(preset: str, found: dict, precision: str) -> str:
    """The curves as text: expected accuracy (%) per N, the best N and the drop."""
    ns = list(next(iter(found.values()))["accuracy"])
    head = f"{preset} ({precision}): true expected accuracy (%) of the pick among N"
    lines = [
        head,
        f"{'proxy':<20}" + "".join(f"{n:>7}" for n in ns) + "   best N  drop at N max (95% CI)",
    ]
    for name, f in found.items():
        cells = "".join(f"{100 * f['accuracy'][n]:>7.1f}" for n in ns)
        low, high = f["drop_ci"]
        drop = f"{100 * f['drop']:+.1f} ({100 * low:+.1f} to {100 * high:+.1f})"
        lines.append(f"{name:<20}{cells}   {f['best_n']:>6}  {drop}")
    return "\n".join(lines)


def plot(preset: str, found: dict, precision: str, path: Path) -> Path:
    """One PNG: true expected accuracy against N (log scale) per proxy."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.2))
    ax = fig.add_subplot()
    for name, f in found.items():
        ns = list(f["accuracy"])
        style = ":" if name == "oracle" else "-"
        ax.plot(ns, [100 * f["accuracy"][n] for n in ns], style, marker="o", ms=3, label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("N (plans the reward model chooses among)")
    ax.set_ylabel("true expected accuracy of the pick (%)")
    ax.set_title(f"best-of-N on world {preset}: {precision}", fontsize=9)
    ax.legend(fontsize=7, ncols=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def run(s: OveroptimizationSettings, say=print) -> dict:
    """Every preset's ensemble, scores and curves; writes OUT/overoptimization.json, a
    PNG per preset and prints the tables."""
    import torch

    from orchrm.rmodel.precision import resolve_dtype

    precision = resolve_dtype(s.dtype, torch.device("cpu"))
    out = Path(s.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    for preset in s.presets:
        model = ensemble_for(preset, s, say)
        tasks = held_out(preset, s)
        say(f"{preset}: scoring {len(tasks)} held-out tasks x {s.candidates} plans")
        found = curves(score_tasks(tasks, model, s))
        label = f"{s.members} MiniLM members, {precision}"
        say(table(preset, found, label))
        plot(preset, found, label, out / f"overoptimization_{preset}.png")
        results[preset] = {
            k: {kk: vv for kk, vv in v.items() if kk != "per_task"} for k, v in found.items()
        }
    (out / "overoptimization.json").write_text(json.dumps(results, indent=2))
    return results

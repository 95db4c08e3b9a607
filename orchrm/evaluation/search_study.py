"""The search over edits of the sampled plans (`orchrm.selection.search`) measured on the
world, whose true success probabilities are known: how it compares with choosing among
the plans, and where it starts to fool itself (reward over-optimization).

A `Preset` is one world preset's held-out tasks, their world truth and the reward models
(the first is `orchrm`'s, the others make an ensemble): `stand_in_preset` makes them with
the world's stand-in reward model (`orchrm.scoring.world.WorldScorer`, the true log-odds
plus seeded noise), `trained_preset` from the models an `orchrm demo` trained, training
the ensemble's other members as it trained them. With the settings of a `SearchStudy`:

1. `table`: expected accuracy and mean total tokens per task of `orchrm-search` (at the
   study's budget, leash and cost weight; with the ensemble's mean, its conservative
   mean minus spread and its worst case; and at other cost weights) against argmax of
   the same candidates (`orchrm`), the top-3 vote, majority and bayes (the best any
   selector of those plans reaches), with paired 95% intervals against argmax and
   against bayes. An edited plan's expected accuracy is its true success probability and
   its tokens one world execution (`orchrm.evaluation.reruns.world_outcome`).
2. `curves`: the reward model's score (in reward spreads) and the true success
   probability of the plan the search returns, averaged over tasks, as the budget grows
   (0 being the cost-aware argmax) and as the leash loosens (edits at most, then a
   penalty per edit at the loosest leash and the largest budget), for one model, the
   ensemble's mean, the conservative score and the worst case. Each search runs once per task at the
   largest budget: a smaller budget's result is a prefix of it
   (`orchrm.selection.search.SearchResult.best_within`). `curves_text` writes them and
   `plot` draws them.
"""

from __future__ import annotations

import math
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from orchrm.evaluation.lineup import build_lineup, read_world_tasks
from orchrm.evaluation.loading import tasks_from_logs
from orchrm.evaluation.metrics import evaluate_selectors
from orchrm.evaluation.report import points
from orchrm.evaluation.reruns import world_outcome
from orchrm.jsonl import write_jsonl
from orchrm.scoring.world import WorldScorer
from orchrm.selection.options import SelectorOptions
from orchrm.selection.search import PlanSearch, SearchSelector
from orchrm.selection.selectors import RewardModelSelector
from orchrm.world.generate import generate, world_config
from orchrm.world.model import success_probability

SAMPLES = 8
"""Candidates per task of a stand-in preset (the specialized orchestrator's samples)."""
COMPARED = ("orchrm", "orchrm-top3-vote", "majority", "bayes")
"""The selectors of the line-up the search is tabulated against."""


@dataclass(frozen=True)
class SearchStudy:
    """The settings of a study: the search in the table, the curves' axes and the
    evaluation."""

    budget: int = 32
    """Edited plans scored per task in the table."""
    max_edits: int = 2
    """The leash in the table and the budget curves: edits at most from a sampled plan."""
    cost_weight: float = 0.1
    cost_weights: tuple[float, ...] = (0.0, 0.25)
    """More cost weights to tabulate, one model each."""
    spread_weight: float = 1.0
    """The conservative score: the ensemble's mean minus this times its spread."""
    budgets: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
    """The budget curve's budgets (0 is added first)."""
    leashes: tuple[int, ...] = (1, 2, 3, 4, 6)
    """The leash curve's edits at most, at the largest budget."""
    penalties: tuple[float, ...] = (0.0, 0.1, 0.25, 0.5)
    """Distance penalties per edit, at the loosest leash and the largest budget."""
    reruns: int = 20
    """Re-executions of every candidate for the votes."""
    bootstrap: int = 1000
    """Bootstrap resamples of the paired intervals."""
    seed: int = 31


@dataclass
class Preset:
    """A preset's held-out tasks, their world truth and the reward models."""

    name: str
    tasks: list
    world: list
    members: list
    """The reward models (`Scorer`s), the first is `orchrm`'s."""
    precision: str
    samples: int = SAMPLES
    """Candidates per task."""
    scorers: list = field(default_factory=list)
    """One `RewardModelSelector` per model, made once (`member_selectors`): every search
    of the table and the curves shares their caches, so a plan is scored once per model."""


def member_selectors(p: Preset) -> list[RewardModelSelector]:
    """The preset's `RewardModelSelector` of each model, made on first use."""
    if not p.scorers:
        p.scorers.extend(RewardModelSelector(m) for m in p.members)
    return p.scorers


def stand_in_preset(name: str, tasks: int, noise: float, members: int, seed: int) -> Preset:
    """`tasks` world tasks of preset `name` (seed `seed`) with `SAMPLES` specialized
    plans each, scored by `members` stand-in reward models of noise sd `noise` and seeds
    0, 1, ... (float64, nothing trained)."""
    generated = generate(name, tasks, SAMPLES, seed=seed, progress=False)
    with tempfile.TemporaryDirectory() as folder:
        write_jsonl(generated.records, Path(folder) / "held.jsonl")
        held = tasks_from_logs([str(Path(folder) / "held.jsonl")], "specialized", SAMPLES)
    scorers = [WorldScorer(generated.tasks, noise, seed=k) for k in range(members)]
    precision = f"stand-in reward model (true log-odds + N(0, {noise:g})), float64"
    return Preset(name, held, generated.tasks, scorers, precision)


def trained_preset(
    name: str,
    demo: Path,
    *,
    samples: int,
    steps: int,
    max_length: int,
    lr: float,
    members: int,
    dtype: str,
    out: Path,
) -> Preset:
    """Preset `name` of the `orchrm demo` in `demo`: its held-out tasks (`samples`
    specialized plans each) and its reward model DEMO/rm/NAME/model, with `members` - 1
    more trained as the demo trained it (`steps`, `max_length`, `lr`) on its pairs
    DEMO/pairs/NAME with training seeds 1, 2, ... into OUT/ensemble (a model already
    there is reused); every model loaded in `dtype`. Where DEMO/rm/NAME/model is an
    ensemble (`orchrm train --ensemble K`), its first `members` members are the models."""
    from orchrm.scoring.load import is_ensemble
    from orchrm.scoring.local import OrchRM
    from orchrm.training.config import TrainConfig
    from orchrm.training.train import train

    logs = [str(demo / "logs" / f"{name}.test.jsonl")]
    held = tasks_from_logs(logs, "specialized", samples)
    world = read_world_tasks([demo / "logs" / f"{name}.test.tasks.jsonl"])
    model = demo / "rm" / name / "model"
    if is_ensemble(model):
        from orchrm.scoring.ensemble import EnsembleScorer

        found = EnsembleScorer.load(model, dtype=dtype).members[:members]
        precision = f"the members of a trained ensemble, scored in {dtype}"
        return Preset(name, held, world, found, precision, samples)
    folders = [model]
    for seed in range(1, members):
        folder = out / "ensemble" / f"{name}-seed{seed}"
        if not (folder / "model").is_dir():
            settings = TrainConfig(
                pairs=str(demo / "pairs" / name),
                out=str(folder),
                max_length=max_length,
                lr=lr,
                max_steps=steps,
                eval_every=steps,
                dtype=dtype,
                seed=seed,
            )
            train(settings, progress=False)
        folders.append(folder / "model")
    models = [OrchRM.load(folder, dtype=dtype) for folder in folders]
    precision = f"trained reward models scored in {dtype}"
    return Preset(name, held, world, models, precision, samples)


def search(selectors, infos, study: SearchStudy, **settings) -> PlanSearch:
    """A `PlanSearch` with the study's budget, leash, cost weight and seed, unless
    `settings` set them."""
    base = dict(
        budget=study.budget,
        max_edits=study.max_edits,
        cost_weight=study.cost_weight,
        seed=study.seed,
    )
    return PlanSearch(selectors, infos, **(base | settings))


def table(p: Preset, study: SearchStudy) -> tuple[dict, str]:
    """The selectors' expected accuracy and tokens, paired against argmax and bayes: the
    rows by selector, and their markdown table under a heading."""
    options = SelectorOptions(
        search_budget=study.budget, search_max_edits=study.max_edits, cost_weight=study.cost_weight
    )
    lineup = build_lineup(
        p.tasks,
        rm=p.members[0],
        world_tasks=p.world,
        reruns=study.reruns,
        options=options,
        seed=study.seed,
    )
    chosen = {name: lineup.selectors[name] for name in (*COMPARED, "orchrm-search")}
    outcome = world_outcome(p.world)
    selectors = member_selectors(p)
    infos = [m.info for m in p.members]
    if len(p.members) > 1:
        chosen["search ensemble"] = SearchSelector(search(selectors, infos, study), outcome)
        conservative = search(selectors, infos, study, spread_weight=study.spread_weight)
        chosen["search conservative"] = SearchSelector(conservative, outcome)
        worst = search(selectors, infos, study, aggregate="min")
        chosen["search worst case"] = SearchSelector(worst, outcome)
    for weight in study.cost_weights:
        single = search(selectors[:1], infos[:1], study, cost_weight=weight)
        chosen[f"search cost weight {weight:g}"] = SearchSelector(single, outcome)
    evaluations = {
        against: evaluate_selectors(
            lineup.tasks,
            chosen,
            [p.samples],
            domain=p.name,
            bootstrap=study.bootstrap,
            baseline=against,
        ).at(p.samples)
        for against in ("orchrm", "bayes")
    }
    rows = {}
    size = f"best-of-{p.samples} on {len(lineup.tasks)} held-out tasks"
    lines = [
        f"\n### {p.name}: {size} ({p.precision})\n",
        "| selector | expected % | vs argmax | vs bayes | total tokens | verification tokens |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in chosen:
        r, b = evaluations["orchrm"][name], evaluations["bayes"][name]
        vs_argmax = (
            "-" if name == "orchrm" else points(r.expected_vs_baseline, r.expected_vs_baseline_ci)
        )
        vs_bayes = (
            "-" if name == "bayes" else points(b.expected_vs_baseline, b.expected_vs_baseline_ci)
        )
        lines.append(
            f"| {name} | {100 * r.expected_accuracy:.1f} | {vs_argmax} | {vs_bayes} | "
            f"{r.total_tokens:,.0f} | {r.verification_tokens:,.0f} |"
        )
        rows[name] = {
            "expected_accuracy": r.expected_accuracy,
            "vs_argmax": r.expected_vs_baseline,
            "vs_argmax_ci": r.expected_vs_baseline_ci,
            "vs_bayes": b.expected_vs_baseline,
            "vs_bayes_ci": b.expected_vs_baseline_ci,
            "total_tokens": r.total_tokens,
            "verification_tokens": r.verification_tokens,
        }
    return rows, "\n".join(lines)


def _curve_of(p: Preset, found_by: PlanSearch, budgets: list[int]) -> dict:
    """Mean RM score and true success probability of the returned plan at each budget
    (one search per task at the largest), and the mean edits from a sampled plan."""
    truth = {t.id: t for t in p.world}
    config = world_config()
    score = {b: [] for b in budgets}
    true_p = {b: [] for b in budgets}
    depth = {b: [] for b in budgets}
    for task in p.tasks:
        found = found_by(task)
        if found is None:
            continue
        for b in budgets:
            node = found.best_within(b)
            score[b].append(node.score)
            true_p[b].append(success_probability(truth[task.task_id], node.plan, config))
            depth[b].append(node.depth)
    return {
        "budgets": budgets,
        "score": [statistics.fmean(score[b]) for b in budgets],
        "true_p": [statistics.fmean(true_p[b]) for b in budgets],
        "edits": [statistics.fmean(depth[b]) for b in budgets],
    }


def _at_top(rows: list[dict]) -> dict:
    """The score, true p and edits of single-budget curves, one value per curve."""
    return {key: [r[key][0] for r in rows] for key in ("score", "true_p", "edits")}


def curves(p: Preset, study: SearchStudy) -> dict:
    """The over-optimization curves: `budget` (per variant: one model, the ensemble's
    mean, the conservative score, its worst case), `leash` (per variant, at the largest
    budget) and `penalty` (one model, at the loosest leash and the largest budget)."""
    budgets = [0, *study.budgets]
    top = budgets[-1]
    selectors = member_selectors(p)
    infos = [m.info for m in p.members]
    variants = {"one model": (selectors[:1], infos[:1], {})}
    if len(p.members) > 1:
        variants["ensemble mean"] = (selectors, infos, {})
        conservative = {"spread_weight": study.spread_weight}
        variants[f"mean - {study.spread_weight:g} spread"] = (selectors, infos, conservative)
        variants["worst case"] = (selectors, infos, {"aggregate": "min"})
    out = {"budget": {}, "leash": {}, "penalty": {}}
    for name, (members, member_infos, how) in variants.items():
        found_by = search(members, member_infos, study, budget=top, **how)
        out["budget"][name] = _curve_of(p, found_by, budgets)
    leashes = list(study.leashes)
    for name, (members, member_infos, how) in variants.items():
        rows = [
            _curve_of(
                p, search(members, member_infos, study, budget=top, max_edits=m, **how), [top]
            )
            for m in leashes
        ]
        out["leash"][name] = {"max_edits": leashes, **_at_top(rows)}
    penalties = list(study.penalties)
    rows = [
        _curve_of(
            p,
            search(
                selectors[:1],
                infos[:1],
                study,
                budget=top,
                max_edits=max(leashes),
                distance_penalty=d,
            ),
            [top],
        )
        for d in penalties
    ]
    out["penalty"] = {"distance_penalty": penalties, **_at_top(rows)}
    return out


def _peak(budgets: list[int], values: list[float]) -> int:
    """The smallest budget at which `values` reach their maximum."""
    best = max(values)
    return next(b for b, v in zip(budgets, values, strict=True) if v >= best - 1e-12)


def curves_text(name: str, found: dict, study: SearchStudy) -> str:
    """The curves of preset `name` as text: the budget table, where the true success
    probability and the score peak, the leash and the distance penalty."""
    top = [0, *study.budgets][-1]
    lines = [f"\n{name}: the returned plan as the budget grows (leash {study.max_edits} edits)"]
    lines.append("| budget | " + " | ".join(f"{v}: score, true p" for v in found["budget"]) + " |")
    lines.append("|---:|" + "---:|" * len(found["budget"]))
    first = next(iter(found["budget"].values()))
    for i, b in enumerate(first["budgets"]):
        cells = [
            f"{c['score'][i]:+.2f}, {100 * c['true_p'][i]:.1f}%" for c in found["budget"].values()
        ]
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    for variant, c in found["budget"].items():
        lines.append(
            f"{variant}: true p peaks at budget {_peak(c['budgets'], c['true_p'])}, "
            f"the score at {_peak(c['budgets'], c['score'])}"
        )
    lines.append(f"\n{name}: the leash at budget {top}")
    for variant, c in found["leash"].items():
        cells = ", ".join(
            f"{m} edits: {s:+.2f} / {100 * q:.1f}% ({d:.1f} made)"
            for m, s, q, d in zip(c["max_edits"], c["score"], c["true_p"], c["edits"], strict=True)
        )
        lines.append(f"{variant}: {cells}")
    c = found["penalty"]
    cells = ", ".join(
        f"{d:g}/edit: {s:+.2f} / {100 * q:.1f}% ({e:.1f} made)"
        for d, s, q, e in zip(
            c["distance_penalty"], c["score"], c["true_p"], c["edits"], strict=True
        )
    )
    lines.append(f"one model, distance penalty (score / true p): {cells}")
    return "\n".join(lines)


def plot(name: str, found: dict, precision: str, path: Path) -> Path:
    """The budget and leash curves of preset `name` side by side, true P(success) solid
    and the RM score dashed, as a PNG at `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    colours = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd")
    for axis, key, x_key, x_label in (
        (left, "budget", "budgets", "edited plans scored per task (0: argmax of 8)"),
        (right, "leash", "max_edits", "leash: edits at most from a sampled plan"),
    ):
        twin = axis.twinx()
        for colour, (variant, c) in zip(colours, found[key].items(), strict=False):
            xs = [math.log2(1 + x) for x in c[x_key]] if key == "budget" else c[x_key]
            axis.plot(
                xs, [100 * q for q in c["true_p"]], "-o", color=colour, label=f"{variant}: true"
            )
            twin.plot(xs, c["score"], "--", color=colour, alpha=0.6, label=f"{variant}: RM score")
        if key == "budget":
            ticks = c[x_key]
            axis.set_xticks([math.log2(1 + x) for x in ticks], [str(x) for x in ticks])
        axis.set_xlabel(x_label)
        axis.set_ylabel("true P(success) of the returned plan (%)")
        twin.set_ylabel("its RM score (reward spreads), dashed")
        if key == "leash":
            axis.set_xticks(c[x_key])
        axis.grid(alpha=0.3)
    left.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"{name}: search over edits of the 8 sampled plans ({precision})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

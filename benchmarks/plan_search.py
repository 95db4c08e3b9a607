"""Improve a plan with the reward model before anything runs: `orchrm-search` (a search
over edits of the 8 sampled plans) against choosing among them, on the world's held-out
tasks, and where the search starts to fool itself (reward over-optimization).

    .venv/bin/python benchmarks/plan_search.py --quick
    .venv/bin/python benchmarks/plan_search.py [--tasks 200] [--img docs/img]
    .venv/bin/orchrm demo --out runs/beyond --presets math,search,multihop --test-tasks 200
    .venv/bin/python benchmarks/plan_search.py --demo runs/beyond --members 3 [--img docs/img]

Per preset (math, search, multihop), best-of-8 over the specialized orchestrator's
samples:

1. The table: expected accuracy and mean total tokens per task of `orchrm-search` (at
   `--budget` edits scored, `--max-edits`, `--cost-weight`; and with the ensemble's
   mean and its conservative mean minus spread, and at other cost weights) against
   argmax of the same 8 (`orchrm`), the top-3 vote, majority and bayes-of-8 (the best any
   selector of those 8 plans reaches), with paired 95% intervals against argmax and
   against bayes. An edited plan's expected accuracy is its true success probability
   and its tokens one world execution (`orchrm.evaluation.reruns.world_outcome`).
2. The over-optimization curves: the reward model's score (in reward spreads) and the
   true success probability of the plan the search returns, averaged over tasks, as the
   budget grows (`--budgets`, 0 being the cost-aware argmax) and as the leash loosens
   (`--leashes` edits at most, and `--penalties` per edit at the loosest leash at the
   largest budget), for one model, the ensemble's mean and the conservative score.
   Each search runs once per task at the largest budget: a smaller budget's result is a
   prefix of it (`orchrm.selection.search.SearchResult.best_within`). One PNG per preset
   (OUT/plan_search_PRESET.png, OUT/plan_search_PRESET_trained.png with `--demo`, copied
   to `--img`), and OUT/plan_search.json.

Reward models: without `--demo`, the world's stand-in (`orchrm.scoring.world.WorldScorer`:
the true log-odds plus seeded noise of sd `--noise`, whose error is independent from
plan to plan; `--members` stand-ins of other seeds make the ensemble) on `--tasks` tasks
generated here; nothing is trained and scores are float64. With `--demo`, the models an
`orchrm demo` trained (DEMO/rm/PRESET/model, loaded in `--dtype`) on its held-out tasks,
and `--members` - 1 more trained here as the demo trained it (DEMO/config.yaml) on its
pairs (DEMO/pairs/PRESET) with training seeds 1, 2, ... into OUT/ensemble, for the
ensemble; candidates per task are the demo's `samples`.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from orchrm.evaluation.lineup import build_lineup, read_world_tasks
from orchrm.evaluation.metrics import evaluate_selectors, tasks_from_logs
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
COMPARED = ("orchrm", "orchrm-top3-vote", "majority", "bayes")
QUICK = {
    "tasks": 16,
    "reruns": 3,
    "budget": 16,
    "budgets": "1,2,4,8,16,32",
    "leashes": "1,2,3",
    "penalties": "0,0.25",
    "members": 2,
    "bootstrap": 200,
}


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default="math,search,multihop")
    parser.add_argument("--tasks", type=int, default=200, help="Held-out tasks per preset.")
    parser.add_argument("--demo", type=Path, default=None, help="An `orchrm demo` folder.")
    parser.add_argument("--dtype", default="fp32", help="Precision of trained models.")
    parser.add_argument("--noise", type=float, default=1.0, help="Stand-in noise (log-odds).")
    parser.add_argument("--members", type=int, default=3, help="Reward models in the ensemble.")
    parser.add_argument(
        "--spread-weight", type=float, default=1.0, help="Conservative: mean - this x spread."
    )
    parser.add_argument("--budget", type=int, default=32, help="Edits scored in the table.")
    parser.add_argument("--max-edits", type=int, default=2, help="The leash in the table.")
    parser.add_argument("--cost-weight", type=float, default=0.1)
    parser.add_argument("--cost-weights", default="0,0.25", help="More cost weights to tabulate.")
    parser.add_argument("--budgets", default="1,2,4,8,16,32,64,128,256")
    parser.add_argument("--leashes", default="1,2,3,4,6")
    parser.add_argument("--penalties", default="0,0.1,0.25,0.5")
    parser.add_argument("--reruns", type=int, default=20, help="Re-executions for the votes.")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--out", type=Path, default=Path("runs/plan_search"))
    parser.add_argument("--img", type=Path, default=None, help="Copy each PNG here.")
    parser.add_argument("--quick", action="store_true", help="A small run: " + str(QUICK))
    args = parser.parse_args()
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    return args


def _numbers(text: str, kind=float) -> list:
    return [kind(x) for x in text.split(",") if x]


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
    """Candidates per task (the demo's `samples` with `--demo`)."""


def _stand_in(name: str, args) -> Preset:
    generated = generate(name, args.tasks, SAMPLES, seed=args.seed, progress=False)
    with tempfile.TemporaryDirectory() as folder:
        write_jsonl(generated.records, Path(folder) / "held.jsonl")
        tasks = tasks_from_logs([str(Path(folder) / "held.jsonl")], "specialized", SAMPLES)
    members = [WorldScorer(generated.tasks, args.noise, seed=k) for k in range(args.members)]
    precision = f"stand-in reward model (true log-odds + N(0, {args.noise:g})), float64"
    return Preset(name, tasks, generated.tasks, members, precision)


def _trained(name: str, args) -> Preset:
    from orchrm.cli import quiet_third_party
    from orchrm.configs import load_config
    from orchrm.experiments.demo_config import DemoConfig
    from orchrm.scoring.local import OrchRM
    from orchrm.training.config import TrainConfig
    from orchrm.training.train import train

    quiet_third_party()  # transformers' load reports would bury the tables
    demo = args.demo
    made = demo / "config.yaml"
    config = load_config(DemoConfig, made) if made.is_file() else DemoConfig()
    logs = [str(demo / "logs" / f"{name}.test.jsonl")]
    tasks = tasks_from_logs(logs, "specialized", config.samples)
    world = read_world_tasks([demo / "logs" / f"{name}.test.tasks.jsonl"])
    folders = [demo / "rm" / name / "model"]
    steps = config.multihop_steps if name == "multihop" else config.steps
    for seed in range(1, args.members):
        out = args.out / "ensemble" / f"{name}-seed{seed}"
        if not (out / "model").is_dir():
            settings = TrainConfig(
                pairs=str(demo / "pairs" / name),
                out=str(out),
                max_length=config.max_length,
                lr=config.lr,
                max_steps=steps,
                eval_every=steps,
                dtype=args.dtype,
                seed=seed,
            )
            train(settings, progress=False)
        folders.append(out / "model")
    members = [OrchRM.load(folder, dtype=args.dtype) for folder in folders]
    precision = f"trained reward models scored in {args.dtype}"
    return Preset(name, tasks, world, members, precision, config.samples)


def _search(selectors, infos, args, **settings) -> PlanSearch:
    base = dict(
        budget=args.budget,
        max_edits=args.max_edits,
        cost_weight=args.cost_weight,
        seed=args.seed,
    )
    return PlanSearch(selectors, infos, **(base | settings))


def _table(p: Preset, args) -> dict:
    """The selectors' expected accuracy and tokens, paired against argmax and bayes."""
    options = SelectorOptions(
        search_budget=args.budget, search_max_edits=args.max_edits, cost_weight=args.cost_weight
    )
    lineup = build_lineup(
        p.tasks,
        rm=p.members[0],
        world_tasks=p.world,
        reruns=args.reruns,
        options=options,
        seed=args.seed,
    )
    chosen = {name: lineup.selectors[name] for name in (*COMPARED, "orchrm-search")}
    outcome = world_outcome(p.world)
    selectors = [chosen["orchrm"], *(RewardModelSelector(m) for m in p.members[1:])]
    infos = [m.info for m in p.members]
    if len(p.members) > 1:
        chosen["search ensemble"] = SearchSelector(_search(selectors, infos, args), outcome)
        conservative = _search(selectors, infos, args, spread_weight=args.spread_weight)
        chosen["search conservative"] = SearchSelector(conservative, outcome)
    for weight in _numbers(args.cost_weights):
        single = _search(selectors[:1], infos[:1], args, cost_weight=weight)
        chosen[f"search cost weight {weight:g}"] = SearchSelector(single, outcome)
    evaluations = {
        against: evaluate_selectors(
            lineup.tasks,
            chosen,
            [p.samples],
            domain=p.name,
            bootstrap=args.bootstrap,
            baseline=against,
        ).at(p.samples)
        for against in ("orchrm", "bayes")
    }
    rows = {}
    size = f"best-of-{p.samples} on {len(lineup.tasks)} held-out tasks"
    print(f"\n### {p.name}: {size} ({p.precision})\n")
    print("| selector | expected % | vs argmax | vs bayes | total tokens | verification tokens |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in chosen:
        r, b = evaluations["orchrm"][name], evaluations["bayes"][name]
        vs_argmax = (
            "-" if name == "orchrm" else points(r.expected_vs_baseline, r.expected_vs_baseline_ci)
        )
        vs_bayes = (
            "-" if name == "bayes" else points(b.expected_vs_baseline, b.expected_vs_baseline_ci)
        )
        print(
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
    return rows


def _curve_of(p: Preset, search: PlanSearch, budgets: list[int]) -> dict:
    """Mean RM score and true success probability of the returned plan at each budget
    (one search per task at the largest), and the mean edits from a sampled plan."""
    truth = {t.id: t for t in p.world}
    config = world_config()
    score = {b: [] for b in budgets}
    true_p = {b: [] for b in budgets}
    depth = {b: [] for b in budgets}
    for task in p.tasks:
        found = search(task)
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


def _curves(p: Preset, args) -> dict:
    budgets = [0, *_numbers(args.budgets, int)]
    top = budgets[-1]
    selectors = [RewardModelSelector(m) for m in p.members]
    infos = [m.info for m in p.members]
    variants = {"one model": (selectors[:1], infos[:1], 0.0)}
    if len(p.members) > 1:
        variants["ensemble mean"] = (selectors, infos, 0.0)
        variants[f"mean - {args.spread_weight:g} spread"] = (selectors, infos, args.spread_weight)
    out = {"budget": {}, "leash": {}, "penalty": {}}
    for name, (members, member_infos, spread) in variants.items():
        search = _search(members, member_infos, args, budget=top, spread_weight=spread)
        out["budget"][name] = _curve_of(p, search, budgets)
    leashes = _numbers(args.leashes, int)
    for name, (members, member_infos, spread) in variants.items():
        rows = [
            _curve_of(
                p,
                _search(members, member_infos, args, budget=top, max_edits=m, spread_weight=spread),
                [top],
            )
            for m in leashes
        ]
        out["leash"][name] = {
            "max_edits": leashes,
            "score": [r["score"][0] for r in rows],
            "true_p": [r["true_p"][0] for r in rows],
            "edits": [r["edits"][0] for r in rows],
        }
    penalties = _numbers(args.penalties)
    rows = [
        _curve_of(
            p,
            _search(
                selectors[:1],
                infos[:1],
                args,
                budget=top,
                max_edits=max(leashes),
                distance_penalty=d,
            ),
            [top],
        )
        for d in penalties
    ]
    out["penalty"] = {
        "distance_penalty": penalties,
        "score": [r["score"][0] for r in rows],
        "true_p": [r["true_p"][0] for r in rows],
        "edits": [r["edits"][0] for r in rows],
    }
    _print_curves(p.name, out, args, top)
    return out


def _peak(budgets: list[int], values: list[float]) -> int:
    """The smallest budget at which `values` reach their maximum."""
    best = max(values)
    return next(b for b, v in zip(budgets, values, strict=True) if v >= best - 1e-12)


def _print_curves(name: str, curves: dict, args, top: int) -> None:
    print(f"\n{name}: the returned plan as the budget grows (leash {args.max_edits} edits)")
    print("| budget | " + " | ".join(f"{v}: score, true p" for v in curves["budget"]) + " |")
    print("|---:|" + "---:|" * len(curves["budget"]))
    first = next(iter(curves["budget"].values()))
    for i, b in enumerate(first["budgets"]):
        cells = [
            f"{c['score'][i]:+.2f}, {100 * c['true_p'][i]:.1f}%" for c in curves["budget"].values()
        ]
        print(f"| {b} | " + " | ".join(cells) + " |")
    for variant, c in curves["budget"].items():
        print(
            f"{variant}: true p peaks at budget {_peak(c['budgets'], c['true_p'])}, "
            f"the score at {_peak(c['budgets'], c['score'])}"
        )
    print(f"\n{name}: the leash at budget {top}")
    for variant, c in curves["leash"].items():
        cells = ", ".join(
            f"{m} edits: {s:+.2f} / {100 * q:.1f}% ({d:.1f} made)"
            for m, s, q, d in zip(c["max_edits"], c["score"], c["true_p"], c["edits"], strict=True)
        )
        print(f"{variant}: {cells}")
    c = curves["penalty"]
    cells = ", ".join(
        f"{d:g}/edit: {s:+.2f} / {100 * q:.1f}% ({e:.1f} made)"
        for d, s, q, e in zip(
            c["distance_penalty"], c["score"], c["true_p"], c["edits"], strict=True
        )
    )
    print(f"one model, distance penalty (score / true p): {cells}")


def _plot(name: str, curves: dict, precision: str, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    colours = ("#d62728", "#1f77b4", "#2ca02c")
    for axis, key, x_key, x_label in (
        (left, "budget", "budgets", "edited plans scored per task (0: argmax of 8)"),
        (right, "leash", "max_edits", "leash: edits at most from a sampled plan"),
    ):
        twin = axis.twinx()
        for colour, (variant, c) in zip(colours, curves[key].items(), strict=False):
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


def main() -> None:
    args = _arguments()
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"settings": {k: str(v) for k, v in vars(args).items()}, "presets": {}}
    for name in [p for p in args.presets.split(",") if p]:
        started = time.perf_counter()
        preset = _trained(name, args) if args.demo else _stand_in(name, args)
        rows = _table(preset, args)
        curves = _curves(preset, args)
        kind = "_trained" if args.demo else ""  # never over a stand-in run's figure
        png = _plot(name, curves, preset.precision, args.out / f"plan_search_{name}{kind}.png")
        if args.img:
            args.img.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(png, args.img / png.name)
            print(f"\n![{name}: search over edits]({args.img / png.name})")
        seconds = time.perf_counter() - started
        print(f"\n{name}: {seconds:.0f} s; figure {png}")
        report["presets"][name] = {
            "precision": preset.precision,
            "table": rows,
            "curves": curves,
            "seconds": seconds,
        }
    (args.out / "plan_search.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

"""The selectors beyond argmax with trained reward models, on a demo's held-out tasks:
every selector's expected accuracy with paired intervals against majority and against
plain argmax (`orchrm`), its share of argmax's orchestrator tokens and its total tokens;
`orchrm-adaptive` at several tolerances and `orchrm-cost` at several weights; the
per-domain, naive mixed and unified models side by side; and the Pareto plot per preset.

    .venv/bin/orchrm demo --out runs/beyond --presets math,search,multihop --mixed \\
        --unified --test-tasks 200
    .venv/bin/python benchmarks/beyond_trained.py --demo runs/beyond [--img docs/img]

It reads the demo's folder: OUT/logs/<preset>.test.jsonl and their task files, and the
models OUT/rm/<preset>/model, OUT/rm/mixed/model and OUT/rm/unified/model, each
calibrated on its validation tasks by the demo. Nothing is trained here.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from orchrm.evaluation.lineup import build_lineup, read_world_tasks
from orchrm.evaluation.metrics import evaluate_selectors, tasks_from_logs
from orchrm.evaluation.plots import plots
from orchrm.evaluation.reliability import selector_calibration
from orchrm.scoring.local import OrchRM
from orchrm.selection.selectors import AdaptiveSelector, CostAwareSelector

TOLERANCES = (0.005, 0.01, 0.02, 0.05)
WEIGHTS = (0.1, 0.25, 0.5)


def _points(value: float | None, ci) -> str:
    if value is None:
        return "-"
    return f"{100 * value:+.1f} ({100 * ci[0]:+.1f}..{100 * ci[1]:+.1f})"


def preset_table(demo: Path, preset: str, models: dict, args) -> None:
    logs = [str(demo / "logs" / f"{preset}.test.jsonl")]
    world = read_world_tasks([demo / "logs" / f"{preset}.test.tasks.jsonl"])
    tasks = tasks_from_logs(logs, "specialized", 8)
    lineup = build_lineup(
        tasks,
        rm=models[preset],
        mixed_rm=models.get("mixed"),
        unified_rm=models.get("unified"),
        world_tasks=world,
        reruns=args.reruns,
        seed=0,
    )
    chosen = dict(lineup.selectors)
    for name in ("judge-orch", "judge-traj", "logp", "random"):
        chosen.pop(name, None)  # not this benchmark's question; the demo's report has them
    base, rm = chosen["orchrm"], models[preset]
    for tolerance in TOLERANCES:
        chosen[f"adaptive tol {tolerance}"] = AdaptiveSelector(base, rm, tolerance=tolerance)
    for weight in WEIGHTS:
        chosen[f"cost weight {weight}"] = CostAwareSelector(base, rm, cost_weight=weight)
    evs = {
        against: evaluate_selectors(lineup.tasks, chosen, [8], domain=preset, baseline=against)
        for against in ("majority", "orchrm")
    }
    at_majority, at_argmax = evs["majority"].at(8), evs["orchrm"].at(8)
    argmax = at_argmax["orchrm"]
    calibration = selector_calibration(lineup.tasks, base)
    print(f"\n### {preset}: best-of-8 on {len(lineup.tasks)} held-out tasks\n")
    if calibration is not None:
        print(
            f"orchrm's calibrated P(correct) on {calibration.candidates:,} held-out candidates: "
            f"ECE {calibration.ece:.3f} (raw sigmoid {calibration.ece_raw:.3f}); against the true "
            f"P(success) {calibration.ece_true:.3f}\n"
        )
    print("| selector | expected % | vs majority | vs argmax | orch. tokens | total tokens |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in sorted(at_majority.items(), key=lambda kv: -(kv[1].expected_accuracy or 0)):
        if r.expected_accuracy is None:
            continue
        other = at_argmax[name]
        share = r.orchestrator_tokens / argmax.orchestrator_tokens
        print(
            f"| {name} | {100 * r.expected_accuracy:.1f} | "
            f"{_points(r.expected_vs_baseline, r.expected_vs_baseline_ci)} | "
            f"{_points(other.expected_vs_baseline, other.expected_vs_baseline_ci)} | "
            f"{share:.0%} | {r.total_tokens:,.0f} |"
        )
    if args.img:
        ev = evs["majority"]
        ev.calibration = calibration
        with tempfile.TemporaryDirectory() as folder:
            for path in plots(ev, Path(folder)):
                if path.name.endswith("_pareto.png"):
                    target = Path(args.img) / f"beyond_{path.name}"
                    shutil.copyfile(path, target)
                    print(f"\n![{preset} Pareto]({target})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", required=True, help="An `orchrm demo` output folder.")
    parser.add_argument("--presets", default="math,search,multihop")
    parser.add_argument("--reruns", type=int, default=20, help="Re-executions for votes.")
    parser.add_argument("--img", default=None, help="Copy each Pareto PNG here.")
    args = parser.parse_args()
    demo = Path(args.demo)
    presets = [p for p in args.presets.split(",") if p]
    models = {
        name: OrchRM.load(demo / "rm" / name / "model")
        for name in (*presets, "mixed", "unified")
        if (demo / "rm" / name / "model").exists()
    }
    for preset in presets:
        preset_table(demo, preset, models, args)


if __name__ == "__main__":
    main()

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

from pathlib import Path

from orchrm.cli.console import csv_values
from orchrm.cli.script import run_script
from orchrm.configs import config, setting
from orchrm.errors import ConfigError, MissingInput
from orchrm.experiments.demo.config import WORLD_PRESETS
from orchrm.experiments.world_studies.measure import (
    RERUNS,
    SAMPLES,
    beyond_trained,
    pareto_figure,
)


@config(frozen=True)
class TrainedSettings:
    """The benchmark's options."""

    demo: str | None = None
    """An `orchrm demo` output folder (required)."""
    presets: tuple[str, ...] = ("math", "search", "multihop")
    """Comma-separated presets of the demo, a table each."""
    reruns: int = setting(RERUNS, min=0)
    """Re-executions for votes."""
    img: str | None = None
    """Copy each Pareto PNG here."""

    def __post_init__(self) -> None:
        unknown = [p for p in self.presets if p not in WORLD_PRESETS]
        if unknown or not self.presets:
            what = f"unknown {', '.join(unknown)}" if unknown else "none given"
            raise ConfigError(f"--presets: {what}; choose from {', '.join(WORLD_PRESETS)}")


def _points(value: float | None, ci) -> str:
    if value is None:
        return "-"
    return f"{100 * value:+.1f} ({100 * ci[0]:+.1f}..{100 * ci[1]:+.1f})"


def preset_table(demo: Path, preset: str, models: dict, args: TrainedSettings) -> None:
    got = beyond_trained(demo, preset, models, args.reruns)
    ev, at_argmax = got.evaluation, got.versus_argmax
    calibration, argmax = ev.calibration, at_argmax["orchrm"]
    print(f"\n### {preset}: best-of-{SAMPLES} on {got.tasks} held-out tasks\n")
    if calibration is not None:
        print(
            f"orchrm's calibrated P(correct) on {calibration.candidates:,} held-out candidates: "
            f"ECE {calibration.ece:.3f} (raw sigmoid {calibration.ece_raw:.3f}); against the true "
            f"P(success) {calibration.ece_true:.3f}\n"
        )
    print("| selector | expected % | vs majority | vs argmax | orch. tokens | total tokens |")
    print("|---|---:|---:|---:|---:|---:|")
    at_majority = ev.at(SAMPLES)
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
        target = pareto_figure(ev, Path(args.img))
        if target is not None:
            print(f"\n![{preset} Pareto]({target})")


def main(args: TrainedSettings) -> None:
    """A table (and a Pareto plot) per preset."""
    from orchrm.scoring.local import OrchRM

    demo, presets = Path(args.demo), args.presets
    for preset in presets:
        for path in (demo / "logs" / f"{preset}.test.jsonl", demo / "rm" / preset / "model"):
            if not path.exists():
                raise MissingInput(f"{path} is missing: run `orchrm demo --out {demo}` first")
    models = {
        name: OrchRM.load(demo / "rm" / name / "model")
        for name in (*presets, "mixed", "unified")
        if (demo / "rm" / name / "model").exists()
    }
    for preset in presets:
        preset_table(demo, preset, models, args)


if __name__ == "__main__":
    run_script(
        TrainedSettings,
        main,
        doc=__doc__,
        required=["demo"],
        settings={"presets": {"parser": csv_values, "spell": ",".join}},
    )

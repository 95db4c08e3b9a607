"""The selectors beyond argmax on world logs, before any reward model is trained: each
selector's expected accuracy against argmax, its share of argmax's orchestrator tokens,
and its total tokens, with a stand-in reward model that knows the world up to noise.

    .venv/bin/python benchmarks/beyond_argmax.py [--tasks 80] [--noise 1.0] [--reruns 10]

The stand-in scores a plan by the log-odds of its true success probability plus normal
noise of sd `--noise` (seeded by the plan), on a spread of 2 (`normalize` halves it). Per
preset, the first half of the tasks fits a Platt calibration of those scores (its ECE on
the second half is printed); the second half is evaluated at N = 8 over the specialized
orchestrator's samples, with `orchrm-adaptive` at several confidences (no calibration)
and tolerances (calibrated) and `orchrm-cost` at several weights. It measures the rules,
not a trained model: a trained model's scores rank worse and call for its own sweep.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from orchrm.calibration.methods import expected_calibration_error, fit_calibration, scored_outcomes
from orchrm.cli.console import csv_values
from orchrm.cli.script import run_script
from orchrm.configs import config, setting
from orchrm.errors import ConfigError
from orchrm.evaluation.lineup import build_lineup
from orchrm.evaluation.loading import tasks_from_logs
from orchrm.evaluation.metrics import evaluate_selectors
from orchrm.jsonl import write_jsonl
from orchrm.scoring.world import WorldScorer
from orchrm.selection.selectors import AdaptiveSelector, CostAwareSelector
from orchrm.world.generate import generate
from orchrm.world.tasks import PRESETS


@config(frozen=True)
class ArgmaxSettings:
    """The benchmark's options."""

    presets: tuple[str, ...] = ("math", "search", "multihop")
    """Comma-separated world presets, a table each."""
    tasks: int = setting(80, min=2)
    """World tasks per preset."""
    noise: float = setting(1.0, min=0.0)
    """Score noise (log-odds)."""
    reruns: int = setting(10, min=0)
    """Re-executions for votes."""
    seed: int = 21
    """World seed of the tasks."""

    def __post_init__(self) -> None:
        unknown = [p for p in self.presets if p not in PRESETS]
        if unknown or not self.presets:
            what = f"unknown {', '.join(unknown)}" if unknown else "none given"
            raise ConfigError(f"--presets: {what}; choose from {', '.join(sorted(PRESETS))}")


def preset_rows(preset: str, args: ArgmaxSettings) -> None:
    generated = generate(preset, args.tasks, 8, seed=args.seed, progress=False)
    scorer = WorldScorer(generated.tasks, args.noise)
    fit_ids = {t.id for t in generated.tasks[: args.tasks // 2]}
    fit = [r for r in generated.records if r["task_id"] in fit_ids]
    held = [r for r in generated.records if r["task_id"] not in fit_ids]
    calibration = fit_calibration(*scored_outcomes(scorer, fit), "platt")
    scores, outcomes = scored_outcomes(scorer, held)
    ece = expected_calibration_error(calibration.probability(scores), outcomes)
    with tempfile.TemporaryDirectory() as folder:
        write_jsonl(held, Path(folder) / "held.jsonl")
        tasks = tasks_from_logs([str(Path(folder) / "held.jsonl")], "specialized", 8)
    lineup = build_lineup(tasks, rm=scorer, world_tasks=generated.tasks, reruns=args.reruns)
    base = lineup.selectors["orchrm"]
    names = ("orchrm", "majority", "orchrm-top2-vote", "orchrm-top3-vote", "orchrm-adaptive")
    chosen = {name: lineup.selectors[name] for name in names}
    for confidence in (0.8, 0.95):
        chosen[f"adaptive confidence {confidence}"] = AdaptiveSelector(
            base, scorer.info, confidence
        )
    for tolerance in (0.005, 0.01, 0.02):
        chosen[f"adaptive calibrated, tolerance {tolerance}"] = AdaptiveSelector(
            base, scorer.info, calibration=calibration, tolerance=tolerance
        )
    for weight in (0.1, 0.25, 0.5):
        chosen[f"cost weight {weight}"] = CostAwareSelector(base, scorer.info, cost_weight=weight)
    at = evaluate_selectors(lineup.tasks, chosen, [8], bootstrap=200).at(8)
    argmax = at["orchrm"]
    print(f"\n{preset}: {len(tasks)} held-out tasks, calibration ECE {ece:.3f} held out")
    print(f"{'selector':<38}{'expected %':>11}{'- argmax':>9}{'orch. tokens':>13}{'total':>9}")
    for name, r in at.items():
        gap = 100 * (r.expected_accuracy - argmax.expected_accuracy)
        share = r.orchestrator_tokens / argmax.orchestrator_tokens
        print(
            f"{name:<38}{100 * r.expected_accuracy:>11.1f}{gap:>+9.1f}{share:>13.0%}"
            f"{r.total_tokens:>9,.0f}"
        )


def main(args: ArgmaxSettings) -> None:
    """A table per preset."""
    for preset in args.presets:
        preset_rows(preset, args)


if __name__ == "__main__":
    run_script(
        ArgmaxSettings,
        main,
        doc=__doc__,
        settings={"presets": {"parser": csv_values, "spell": ",".join}},
    )

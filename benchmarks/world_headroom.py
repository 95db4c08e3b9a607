"""Does the question text say more than majority vote recovers? World only, no model.

    .venv/bin/python benchmarks/world_headroom.py [--preset math] [--seed 20]
        [--variant NAME:KEY=VALUE,KEY=VALUE ...] [--out runs/world-headroom]

For the world as shipped and for each variant of it, this generates training and
held-out logs, mines pairs as the demo does, and prints the expected best-of-8 accuracy
of majority vote (re-executions, as in the demo) beside what a reader of the text could
reach: `features-BT`, a Bradley-Terry model on the hand-written features of
`rm_ceiling.py` fit on the mined pairs (a perfect reader of the cues given these noisy
labels), and `features-ridge`, the same features fit on the true success probabilities
(an upper bound). `random` and `bayes` bound the scale. When features-BT is not above
majority, no reward model that reads the text can beat majority vote on that world,
however well it is trained.

A variant sets fields of the preset (`cue_rate=0.8`, `affinity_sd=0.9`, any field of
`orchrm.world.tasks.Preset`) or of the specialized orchestrator (`follow=0.5`: how often
it acts on the question's hint). No reward model is trained, so a variant is quick. The
default seed (20) is neither the demo's (0, 1) nor rm_scaling's (10).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
from pathlib import Path

from rm_ceiling import chosen_p, fit_features, linear_scores
from world_pairs import SAMPLES, world_pairs

from orchrm.evaluation.lineup import evaluate_tasks
from orchrm.selection.selectors import majority_selector
from orchrm.world.orchestrators import WorldOrchestrator
from orchrm.world.tasks import PRESETS

ORCHESTRATOR_FIELDS = {f.name for f in dataclasses.fields(WorldOrchestrator)} - {"name", "seed"}


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
    """Expected accuracy of each reference selector on one world variant."""
    variant = dataclasses.replace(
        PRESETS[preset], **{k: v for k, v in settings.items() if k not in ORCHESTRATOR_FIELDS}
    )
    writer_settings = {k: v for k, v in settings.items() if k in ORCHESTRATOR_FIELDS}
    world = world_pairs(variant, train_n, test_n, seed, out, specialized=writer_settings)
    test = world.test
    fit = fit_features(world.train, world.pairs / "train.jsonl", ((512, None),))
    voted = evaluate_tasks(test, {"majority": majority_selector}, SAMPLES, progress=False)
    return {
        "random": statistics.fmean(
            statistics.fmean(c.p_success or 0.0 for c in t.candidates) for t in test
        ),
        "majority": voted.at(SAMPLES)["majority"].expected_accuracy,
        "features-BT": chosen_p(test, linear_scores(test, fit.keys, fit.bt)),
        "features-ridge": chosen_p(test, linear_scores(test, fit.keys, fit.ridge)),
        "bayes": statistics.fmean(max(c.p_success or 0.0 for c in t.candidates) for t in test),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="math", choices=sorted(PRESETS))
    parser.add_argument("--train-tasks", type=int, default=150)
    parser.add_argument("--test-tasks", type=int, default=200)
    parser.add_argument("--seed", type=int, default=20, help="world seed of the training tasks")
    parser.add_argument("--variant", action="append", default=[], help="NAME:KEY=VALUE,...")
    parser.add_argument("--out", default="runs/world-headroom")
    args = parser.parse_args()
    try:
        variants = [("as shipped", {}), *map(parse_variant, args.variant)]
    except ValueError as e:
        parser.error(str(e))
    print(
        f"{args.preset}: {args.train_tasks} training tasks (seed {args.seed}), "
        f"{args.test_tasks} held-out tasks x {SAMPLES}; expected accuracy %\n"
    )
    columns = ("random", "majority", "features-BT", "features-ridge", "bayes")
    print(f"| world | {' | '.join(columns)} | features-BT - majority |")
    print("| --- |" + " ---: |" * (len(columns) + 1))
    for n, (name, settings) in enumerate(variants):
        got = headroom(
            args.preset,
            settings,
            args.train_tasks,
            args.test_tasks,
            args.seed,
            Path(args.out) / str(n),
        )
        label = name + (
            " (" + ", ".join(f"{k}={v:g}" for k, v in settings.items()) + ")" if settings else ""
        )
        cells = " | ".join(f"{100 * got[c]:.1f}" for c in columns)
        gap = 100 * (got["features-BT"] - got["majority"])
        print(f"| {label} | {cells} | {gap:+.1f} |", flush=True)


if __name__ == "__main__":
    main()

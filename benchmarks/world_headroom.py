"""Does the question text say more than majority vote recovers? World only, no model.

    .venv/bin/python benchmarks/world_headroom.py [--preset math] [--seed 20]
        [--variant NAME:KEY=VALUE,KEY=VALUE ...] [--out runs/world-headroom]

For the world as shipped and for each variant of it, this generates training and
held-out logs, mines pairs as the demo does (both reused from OUT/N while the settings
stay the same), and prints the expected best-of-8 accuracy of majority vote
(re-executions, as in the demo) beside what a reader of the text could reach:
`features-BT`, a Bradley-Terry model on the hand-written features of
`orchrm.experiments.world_studies.features_bt` fit on the mined pairs (a perfect reader of the cues
given these noisy labels), and `features-ridge`, the same features fit on the true
success probabilities (an upper bound). `random` and `bayes` bound the scale. When
features-BT is not above majority, no reward model that reads the text can beat
majority vote on that world, however well it is trained.

A variant sets fields of the preset (`cue_rate=0.8`, `affinity_sd=0.9`, any field of
`orchrm.world.tasks.Preset`) or of the specialized orchestrator (`follow=0.5`: how often
it acts on the question's hint). No reward model is trained, so a variant is quick. The
default seed (20) is neither the demo's (0, 1) nor rm_scaling's (10).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from orchrm.cli.script import run_script
from orchrm.configs import config, setting
from orchrm.errors import ConfigError
from orchrm.experiments.world_studies.measure import SAMPLES, headroom, parse_variant
from orchrm.world.tasks import PRESETS

PRESET_NAMES = tuple(sorted(PRESETS))


@config(frozen=True)
class HeadroomSettings:
    """The study's options."""

    preset: Literal[PRESET_NAMES] = "math"
    """World preset the variants change."""
    train_tasks: int = setting(150, min=1)
    """World tasks whose logs give the mined pairs."""
    test_tasks: int = setting(200, min=1)
    """Held-out world tasks."""
    seed: int = 20
    """World seed of the training tasks."""
    variant: tuple[str, ...] = ()
    """A variant of the world, NAME:KEY=VALUE,... (a field of the preset or of the
    specialized orchestrator); once per variant."""
    out: str = "runs/world-headroom"
    """Folder of the logs and pairs, reused while the settings stay the same."""

    def __post_init__(self) -> None:
        for text in self.variant:
            try:
                parse_variant(text)
            except ValueError as err:
                raise ConfigError(str(err)) from None


def main(args: HeadroomSettings) -> None:
    """Print the table of every world's references."""
    variants = [("as shipped", {}), *map(parse_variant, args.variant)]
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
    run_script(HeadroomSettings, main, doc=__doc__)

"""How much of what the text allows does the reward model get? World logs only.

    .venv/bin/python benchmarks/rm_ceiling.py [--demo orchrm-demo] [--domain math]
        [--rm DIR --rm DIR ...] [--n 8]

Reads a finished `orchrm demo` folder: the training logs and pairs of one domain, its
held-out test logs and its reward model (plus any `--rm` directories). Each selector
picks one of each held-out task's 8 specialized candidates, and the figure is the mean
*true* success probability of the pick (no execution noise).

The peers read the same (question, orchestration) through the hand-written features of
`orchrm.experiments.world_studies.features_bt`: everything the text says about the world's hidden
attributes, in the form a linear model can use.
- `features-BT`: a Bradley-Terry model on those features, fit on the same mined pairs
  the reward model trained on. This is what a perfect reader of the cues gets from
  these labels.
- `features-ridge`: ridge regression of the true success probability on the same
  features over every training candidate. It uses the world's hidden labels, so it is
  an upper bound, not a method.
`random` (the mean over candidates) and `bayes` (the best true probability) bound the
scale. The last column is the share of the random -> bayes gap each selector closes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from orchrm.cli.script import run_script
from orchrm.configs import config, setting
from orchrm.errors import MissingInput
from orchrm.experiments.demo.config import WORLD_PRESETS, DemoConfig
from orchrm.experiments.world_studies.measure import SAMPLES, ceiling


@config(frozen=True)
class CeilingSettings:
    """The benchmark's options."""

    demo: str = DemoConfig().out
    """A finished `orchrm demo` folder."""
    domain: Literal[WORLD_PRESETS] = DemoConfig().presets[0]
    """The demo's preset whose logs, pairs and reward model are read."""
    rm: tuple[str, ...] = ()
    """More reward model directories, once each."""
    n: int = setting(SAMPLES, min=1)
    """Candidates per held-out task."""


def main(args: CeilingSettings) -> None:
    """Print each selector's pick against the references."""
    for folder in (args.demo, *args.rm):
        if not Path(folder).is_dir():
            raise MissingInput(f"{folder}: no such directory")
    got = ceiling(Path(args.demo), args.domain, list(args.rm), args.n)
    fit, results = got.fit, got.results
    low, high = results["random"], results["bayes"]
    print(
        f"{args.domain}: {got.tasks} held-out tasks x {args.n}; {fit.matched} training "
        f"pairs matched ({fit.missing} not), {len(fit.keys)} features\n"
    )
    print("| selector | true p of the pick | share of the random -> bayes gap | reads the cue |")
    print("| --- | ---: | ---: | ---: |")
    for name, value in sorted(results.items(), key=lambda kv: -kv[1]):
        gap = f"{got.cue_gaps[name]:+.2f}" if name in got.cue_gaps else "-"
        print(f"| {name} | {value:.3f} | {(value - low) / (high - low):.2f} | {gap} |")
    print(
        "\nreads the cue: within each task whose question hints at a sub-agent type, "
        "scores standardized, mean score of the plans that use that type minus that of "
        "the plans that do not, averaged over tasks (bayes: the true success probability, "
        "the size of the real effect; near 0: the selector ignores the question's hint)."
    )


if __name__ == "__main__":
    run_script(CeilingSettings, main, doc=__doc__)

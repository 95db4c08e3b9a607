"""Reward over-optimization in best-of-N on the world: the true expected accuracy of a
trained reward-model ensemble's pick among N plans against N (1 to 256), for one member,
the ensemble's mean, its worst case, mean - lambda x spread and the averaged weights,
with the oracle above them (`orchrm.experiments.overoptimization.study`).

    .venv/bin/python benchmarks/overoptimization.py [--presets math,search] [--members 4]

Writes OUT/overoptimization.json and OUT/overoptimization_PRESET.png; logs, pairs and
ensembles in OUT are reused when their settings match.
"""

from __future__ import annotations

from orchrm.cli.script import run_script
from orchrm.experiments.overoptimization.study import OveroptimizationSettings, run

if __name__ == "__main__":
    run_script(OveroptimizationSettings, run, doc=__doc__)

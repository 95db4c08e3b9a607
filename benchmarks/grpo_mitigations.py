"""GRPO on the world with the Orch-RM reward, with and without each mitigation of reward
hacking (a KL penalty, a centred bounded reward, an ensemble's worst case, all three),
against execution-reward GRPO: true held-out expected accuracy over training, its
largest fall below its best, and training tokens
(`orchrm.experiments.rl_world.mitigations`).

    .venv/bin/python benchmarks/grpo_mitigations.py [--runs plain --runs kl ...] [--quick]

Writes OUT/mitigations.md, .json and .png; the world log, starting policy and reward
models in OUT are reused when their settings match.
"""

from __future__ import annotations

from orchrm.cli import quiet_third_party
from orchrm.cli.script import run_script
from orchrm.experiments.rl_world.mitigations import MitigationSettings, run

if __name__ == "__main__":
    quiet_third_party()  # transformers' load reports would bury the progress
    run_script(MitigationSettings, run, doc=__doc__)

"""`orchrm rl`: train the orchestrator (the command-line face of
`orchrm.experiments.rl_world.pipeline`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from orchrm.cli.console import console, csv_values
from orchrm.cli.options import config_options
from orchrm.configs import dump_config, narrowed
from orchrm.experiments.rl_world.config import RLCommandConfig, RLExperimentConfig

FLAGS = {
    "policy.model": "--policy",
    "policy.lr": "--lr",
    "policy.seed": "--seed",
    "grpo.beta": "--beta",
    "dpo.beta": "--dpo-beta",
    "dpo.lr": "--dpo-lr",
    "dpo.sft_weight": "--dpo-sft-weight",
    "rft.samples": "--rft-samples",
    "rft.rounds": "--rft-rounds",
    "num_threads": "--threads",
}
"""Flags of `RLExperimentConfig` fields whose names alone would not say what they set."""


@config_options(RLCommandConfig, into="options", flags=FLAGS, leave_out=["policy.progress"])
def rl_command(options: RLCommandConfig) -> None:
    """Train the orchestrator: GRPO with Orch-RM (no sub-agent runs) or execution as the
    reward, or the RFT and DPO baselines; evaluate on held-out world tasks; write
    OUT/<run>/report.md (or OUT/report.md with --compare), report.json and curve.png;
    OUT/config.yaml holds the settings, for `--config` to repeat the run."""
    from orchrm.experiments.rl_world.compare import terminal_report
    from orchrm.experiments.rl_world.pipeline import compare as run_compare
    from orchrm.experiments.rl_world.pipeline import grpo_on_tasks, run

    config = narrowed(options, RLExperimentConfig)
    config = replace(config, policy=replace(config.policy, progress=not options.quiet))
    dump_config(config, Path(config.out) / "config.yaml")
    say = lambda m: console.print(m, highlight=False, markup=False)  # noqa: E731
    if config.tasks:
        report = grpo_on_tasks(config, say)
    elif options.compare:
        report = run_compare(config, list(csv_values(options.runs)), say)
    else:
        report = run(config, say)
    console.print(terminal_report(report), highlight=False, markup=False, soft_wrap=True)
    console.print(f"report -> {report}")

"""`orchrm rl`: train the orchestrator (the command-line face of
`orchrm.experiments.rl_pipeline`)."""

from __future__ import annotations

from dataclasses import replace

import typer

from orchrm.cli.console import console, csv_values
from orchrm.cli.options import config_options
from orchrm.rl.config import RLConfig

FIELDS = [
    "out",
    "reward",
    "method",
    "steps",
    "rm",
    "rm_url",
    "policy",
    "preset",
    "tasks",
    "chat",
    "lora_r",
    "lora_alpha",
    "vllm",
    "lr",
    "beta",
    "num_generations",
    "prompts_per_step",
    "scale_rewards",
    "penalty",
    "eval_tasks",
    "eval_samples",
    "train_tasks",
    "seed",
    "num_threads",
]
"""The `RLConfig` fields `orchrm rl` sets (the others keep their defaults)."""


@config_options(
    RLConfig,
    FIELDS,
    flags={"num_threads": "--threads"},
)
def rl_command(
    config: RLConfig,
    compare: bool = typer.Option(
        False, "--compare", help="Train every run in --runs from the same start; one table."
    ),
    runs: str = typer.Option(
        "grpo-orchrm,grpo-execution,rft,dpo", "--runs", help="Runs for --compare."
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bars."),
) -> None:
    """Train the orchestrator: GRPO with Orch-RM (no sub-agent runs) or execution as the
    reward, or the RFT and DPO baselines; evaluate on held-out world tasks; write
    OUT/<run>/report.md (or OUT/report.md with --compare), report.json and curve.png."""
    from orchrm.experiments.rl_compare import terminal_report
    from orchrm.experiments.rl_pipeline import compare as run_compare
    from orchrm.experiments.rl_pipeline import grpo_on_tasks, run

    config = replace(config, progress=not quiet)
    say = lambda m: console.print(m, highlight=False, markup=False)  # noqa: E731
    if config.tasks:
        report = grpo_on_tasks(config, say)
    elif compare:
        report = run_compare(config, list(csv_values(runs)), say)
    else:
        report = run(config, say)
    console.print(terminal_report(report), highlight=False, markup=False, soft_wrap=True)
    console.print(f"report -> {report}")

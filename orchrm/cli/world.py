"""`orchrm world`: the offline benchmark with ground truth."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table
from typer.core import TyperGroup

from orchrm.cli.console import console, fail
from orchrm.cli.help import HelpCommand
from orchrm.cli.options import JsonOutput, config_options, spelled_as
from orchrm.configs import config
from orchrm.world.config import GenerateConfig, WorldStatsConfig

world_app = typer.Typer(
    cls=TyperGroup,
    rich_markup_mode=None,
    help="The offline world: a benchmark with ground truth.",
    no_args_is_help=True,
)


@config
class WorldStatsOutput(JsonOutput, WorldStatsConfig):
    """`WorldStatsConfig`, and what `orchrm world stats` prints."""


@world_app.command("generate", cls=HelpCommand)
@config_options(GenerateConfig, settings={"out": {"metavar": "<path>"}})
@spelled_as({"--tasks": "--num-tasks (--tasks is a task file in `orchrm run`)"})
def world_generate(config: GenerateConfig) -> None:
    """Write world logs (the schema of `orchrm run`, plus true success probabilities):
    OUT/PRESET.jsonl, and the tasks with their hidden attributes in OUT/PRESET.tasks.jsonl."""
    from orchrm.jsonl import write_jsonl
    from orchrm.world.generate import generate

    preset, out = config.preset, Path(config.out)
    generated = generate(preset, config.num_tasks, config.samples, config.seed)
    log, truth = out / f"{preset}.jsonl", out / f"{preset}.tasks.jsonl"
    write_jsonl(generated.records, log)
    write_jsonl([t.to_dict() for t in generated.tasks], truth)
    console.print(
        f"{len(generated.records)} records ({generated.executions} executed, "
        f"{generated.executions_per_s:.0f} executed orchestrations/s) -> {log}; tasks -> {truth}"
    )


@world_app.command("stats", cls=HelpCommand)
@config_options(WorldStatsOutput)
@spelled_as({"--tasks": "--num-tasks", "--n": "--samples"})
def world_stats_command(config: WorldStatsOutput) -> None:
    """Per preset: success of both orchestrators, pass@N, majority@N, Bayes-optimal@N,
    random@N, diversity, and the best single surface feature's pairwise accuracy."""
    from dataclasses import asdict

    from orchrm.world.generate import LOGPROB_FEATURE, generate, world_stats
    from orchrm.world.tasks import PRESETS

    names = [p.strip() for p in config.presets.split(",") if p.strip()]
    tasks, samples, seed, as_json = config.num_tasks, config.samples, config.seed, config.json
    unknown = [p for p in names if p not in PRESETS]
    if unknown:
        fail(f"unknown preset(s) {', '.join(unknown)}: choose from {', '.join(PRESETS)}")
    results = [
        world_stats(generate(p, tasks, samples, seed, progress=not as_json), samples) for p in names
    ]
    if as_json:
        print(json.dumps([asdict(s) for s in results], indent=2))
        return
    for s in results:
        n = s.samples
        table = Table(title=f"world preset {s.preset}: {s.tasks} tasks, N={n} (%)")
        columns = ["orch.", "succ", "true p", f"pass@{n}", f"maj@{n}", f"bayes@{n}", f"rand@{n}"]
        for column in [*columns, "bayes-maj", "divers."]:
            table.add_column(column, justify="left" if column == "orch." else "right")
        for name, x in s.by_orchestrator.items():
            values = (
                x.mean_success,
                x.mean_p_success,
                x.pass_at_n,
                x.majority_at_n,
                x.bayes_at_n,
                x.random_at_n,
                x.bayes_at_n - x.majority_at_n,
            )
            table.add_row(name, *(f"{100 * v:.1f}" for v in values), f"{x.diversity:.2f}")
        console.print(table)
        console.print(
            f"  best single surface feature: {s.best_feature} "
            f"{100 * s.best_feature_accuracy:.1f}% pairwise accuracy on {s.pairs} "
            f"correct-vs-incorrect pairs (orchestrator log-prob: "
            f"{100 * s.feature_accuracy[LOGPROB_FEATURE]:.1f}%); "
            f"{s.executions_per_s:.0f} executed orchestrations/s"
        )

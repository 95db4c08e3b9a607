"""`orchrm eval`, `orchrm cross-validate`: best-of-N selection on held-out tasks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import typer

from orchrm.bestofn.config import LotoConfig
from orchrm.cli.console import console, csv_values, fail
from orchrm.cli.options import config_options
from orchrm.cli.store import STORE_OPTION, open_store
from orchrm.rm.config import TrainConfig
from orchrm.store.config import MineConfig

_LOTO_DEFAULTS = LotoConfig()
_LOTO = {"n": {"min": 1}, "folds": {"min": 2}}


def eval_command(
    logs: list[Path] = typer.Argument(None, help="orchrm.run/1 logs of the held-out tasks."),
    store: Path = typer.Option(None, "--store", help="Read the tasks from a store instead."),
    held_out_of: str = typer.Option(
        None, "--held-out-of", help="Leave out tasks in this pair dataset's train/validation."
    ),
    rm: Path = typer.Option(None, "--rm", help="The Orch-RM reward model directory."),
    external_rm: Path = typer.Option(None, "--external-rm", help="Any HF reward model dir."),
    orchestrator: str = typer.Option(None, "--orchestrator", help="Whose samples (default all)."),
    n: int = typer.Option(8, "--n", min=1, help="Candidates per task."),
    world_tasks: list[Path] = typer.Option(
        None, "--world-tasks", help="PRESET.tasks.jsonl: the world plays the judges."
    ),
    reruns: int = typer.Option(
        20,
        "--reruns",
        min=0,
        help="With --world-tasks: re-executions of every candidate, for the votes' expected "
        "accuracy (0: none).",
    ),
    judge_base_url: str = typer.Option(None, "--judge-base-url", help="A real judge server."),
    judge_model: str = typer.Option(
        "default", "--judge-model", help="Model name the judge server answers to."
    ),
    domain: str = typer.Option(
        None, "--domain", help="Only this domain (default: every domain, a table each)."
    ),
    out: Path = typer.Option(
        Path("runs/eval"), "--out", help="Folder for the report (Markdown, PNGs, JSON)."
    ),
) -> None:
    """Best-of-N on held-out logs or a store: a Markdown table per domain (accuracy with
    95% CI, normalized advantage, verification and total tokens), PNG plots and a JSON of
    every number."""
    from orchrm.bestofn.lineup import build_lineup, by_domain, evaluate_tasks, read_world_tasks
    from orchrm.bestofn.metrics import tasks_from_logs, tasks_from_store
    from orchrm.bestofn.report import markdown, write_report
    from orchrm.rm.model import OrchRM

    if bool(logs) == bool(store):
        fail("give either log files or --store (one of them)")
    if held_out_of and not store:
        fail("--held-out-of needs --store (pair datasets live in the store)")
    if store:
        with open_store(store, read_only=True) as db:
            tasks = tasks_from_store(db, orchestrator, n, domain, held_out_of)
    else:
        tasks = tasks_from_logs([str(p) for p in logs], orchestrator, n, domain)
    model = OrchRM.load(rm) if rm else None
    external = OrchRM.load(external_rm, check_version=False) if external_rm else None
    judge = None
    if judge_base_url and not world_tasks:
        from orchrm.runtime.openai_backend import OpenAIBackend, OpenAIConfig

        judge = OpenAIBackend(OpenAIConfig(base_url=judge_base_url, model=judge_model))
    lineup = build_lineup(
        tasks,
        rm=model,
        external_rm=external,
        judge=judge,
        world_tasks=read_world_tasks(world_tasks) if world_tasks else None,
        reruns=reruns,
    )
    evaluations = [
        evaluate_tasks(group, lineup.selectors, n, name)
        for name, group in by_domain(lineup.tasks).items()
        if any(len(t.candidates) >= n for t in group)
    ]
    if not evaluations:
        fail(
            f"no task in the {'store' if store else 'logs'} has {n} samples"
            + (f" from {orchestrator}" if orchestrator else "")
        )
    write_report(evaluations, out)
    for ev in evaluations:
        console.print(markdown(ev), highlight=False)
    console.print(f"report -> {out}")


@config_options(LotoConfig, ["n", "orchestrator", "folds", "seed", "out"], settings=_LOTO)
@config_options(
    _LOTO_DEFAULTS.mine,
    ["specialized", "base", "step_threshold"],
    into="mine",
    settings={
        "specialized": {"parser": csv_values, "spell": ",".join},
        "base": {"parser": csv_values, "spell": ",".join},
    },
)
@config_options(_LOTO_DEFAULTS.train, ["epochs", "max_length", "backbone"], into="train")
def cross_validate_command(
    config: LotoConfig, mine: MineConfig, train: TrainConfig, store: Path = STORE_OPTION
) -> None:
    """Best-of-N under leave-one-task-out (or k-fold) cross-validation, for logs too small
    to hold out tasks: each task is scored by a reward model trained on the others."""
    from orchrm.bestofn.crossval import cross_validate
    from orchrm.bestofn.report import markdown, write_report

    config = replace(config, mine=mine, train=train)
    out = Path(config.out)
    with open_store(store) as db:
        evaluations = cross_validate(db, config, say=lambda m: console.print(m))
    write_report(evaluations, out)
    for ev in evaluations:
        console.print(markdown(ev), highlight=False)
    console.print(f"report -> {out}")

"""`orchrm eval`, `orchrm cross-validate`: best-of-N selection on held-out tasks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import typer

from orchrm.cli.console import console, csv_values, err_console, fail
from orchrm.cli.options import config_options, spelled_as
from orchrm.cli.store import STORE_OPTION, open_store
from orchrm.evaluation.config import EvalConfig, LotoConfig
from orchrm.selection.options import SelectorOptions
from orchrm.store.config import MineConfig
from orchrm.training.config import TrainConfig

_LOTO_DEFAULTS = LotoConfig()
SELECTOR_OPTIONS = ("adaptive_confidence", "adaptive_tolerance", "cost_weight", "cost_measure")
"""The `SelectorOptions` fields every command that builds those selectors takes."""


def selector_options(command):
    """Give `command` the `SelectorOptions` options, built into its `selector_options`."""
    return config_options(SelectorOptions, SELECTOR_OPTIONS, into="selector_options")(command)


@selector_options
@config_options(
    EvalConfig,
    [
        *("store", "held_out_of", "rm", "rm_url", "rm_protocol", "external_rm", "dtype"),
        *("orchestrator", "n", "world_tasks"),
        *("reruns", "judge_base_url", "judge_model", "domain", "out"),
    ],
    flags={"n": "--samples"},
    settings={"store": {"envvar": "ORCHRM_STORE"}},
)
@spelled_as({"--n": "--samples"})
def eval_command(
    config: EvalConfig,
    selector_options: SelectorOptions,
    logs: list[Path] = typer.Argument(None, help="orchrm.run/1 logs of the held-out tasks."),
) -> None:
    """Best-of-N on held-out logs or a store: a table per domain (accuracy with 95% CI,
    normalized advantage, verification and total tokens), PNG plots and a JSON of every
    number."""
    from orchrm.evaluation.lineup import evaluate_held_out
    from orchrm.evaluation.report import terminal_table, write_report
    from orchrm.viewer.page import write_evaluation_view

    logs_given = tuple(str(p) for p in logs or ())
    config = replace(config, logs=logs_given, selector_options=selector_options)
    if not config.logs and not config.store:
        fail("give log files or --store (or set ORCHRM_STORE)")
    held_out = evaluate_held_out(config, say=lambda m: err_console.print(m, markup=False))
    write_report(held_out.evaluations, Path(config.out))
    write_evaluation_view(config.out, held_out.shown, selectors=held_out.selectors)
    for ev in held_out.evaluations:
        console.print(terminal_table(ev), highlight=False, markup=False, soft_wrap=True)
    console.print(f"report -> {config.out}")


@config_options(LotoConfig, ["n", "orchestrator", "folds", "seed", "out"], flags={"n": "--samples"})
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
@spelled_as({"--n": "--samples"})
def cross_validate_command(
    config: LotoConfig, mine: MineConfig, train: TrainConfig, store: Path = STORE_OPTION
) -> None:
    """Best-of-N under leave-one-task-out (or k-fold) cross-validation, for logs too small
    to hold out tasks: each task is scored by a reward model trained on the others."""
    from orchrm.evaluation.crossval import cross_validate
    from orchrm.evaluation.report import terminal_table, write_report

    config = replace(config, mine=mine, train=train)
    out = Path(config.out)
    with open_store(store) as db:
        evaluations = cross_validate(db, config, say=lambda m: console.print(m))
    write_report(evaluations, out)
    for ev in evaluations:
        console.print(terminal_table(ev), highlight=False, markup=False, soft_wrap=True)
    console.print(f"report -> {out}")

"""`orchrm eval`, `orchrm cross-validate`: best-of-N selection on held-out tasks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import typer

from orchrm.cli.console import console, csv_values, err_console, fail
from orchrm.cli.options import config_options, spelled_as
from orchrm.cli.store import STORE, open_store
from orchrm.configs import config, dump_config, narrowed
from orchrm.evaluation.config import EvalConfig, LotoConfig
from orchrm.store.config import OpenConfig


@config_options(
    EvalConfig,
    leave_out=["logs"],
    flags={"n": "--samples"},
    settings={"store": {"envvar": "ORCHRM_STORE"}},
)
@spelled_as({"--n": "--samples"})
def eval_command(
    config: EvalConfig,
    logs: list[Path] = typer.Argument(
        None, help="orchrm.run/1 logs of the held-out tasks (default: the --config file's)."
    ),
) -> None:
    """Best-of-N on held-out logs or a store: a table per domain (accuracy with 95% CI,
    normalized advantage, verification and total tokens), PNG plots and a JSON of every
    number; OUT/config.yaml holds the settings, for `--config` to repeat the run."""
    from orchrm.evaluation.lineup import evaluate_held_out
    from orchrm.evaluation.report import terminal_table, write_report
    from orchrm.viewer.page import write_evaluation_view

    if logs:
        config = replace(config, logs=tuple(str(p) for p in logs))
    if not config.logs and not config.store:
        fail("give log files or --store (or set ORCHRM_STORE)")
    held_out = evaluate_held_out(config, say=lambda m: err_console.print(m, markup=False))
    dump_config(config, Path(config.out) / "config.yaml")  # a refused run writes nothing
    write_report(held_out.evaluations, Path(config.out))
    write_evaluation_view(config.out, held_out.shown, selectors=held_out.selectors)
    for ev in held_out.evaluations:
        console.print(terminal_table(ev), highlight=False, markup=False, soft_wrap=True)
    console.print(f"report -> {config.out}")


@config
class LotoStore(LotoConfig, OpenConfig):
    """`LotoConfig`, and the store `orchrm cross-validate` reads."""


@config_options(
    LotoStore,
    flags={"n": "--samples"},
    settings={
        **STORE,
        "mine.specialized": {"parser": csv_values, "spell": ",".join},
        "mine.base": {"parser": csv_values, "spell": ",".join},
    },
)
@spelled_as({"--n": "--samples"})
def cross_validate_command(config: LotoStore) -> None:
    """Best-of-N under leave-one-task-out (or k-fold) cross-validation, for logs too small
    to hold out tasks: each task is scored by a reward model trained on the others;
    OUT/config.yaml holds the settings, for `--config` to repeat the run."""
    from orchrm.evaluation.crossval import cross_validate
    from orchrm.evaluation.report import terminal_table, write_report

    out = Path(config.out)
    with open_store(Path(config.store), wait_for_lock=config.wait_for_lock) as db:
        evaluations = cross_validate(
            db, narrowed(config, LotoConfig), say=lambda m: console.print(m)
        )
    dump_config(narrowed(config, LotoConfig), out / "config.yaml")  # a refused run writes nothing
    write_report(evaluations, out)
    for ev in evaluations:
        console.print(terminal_table(ev), highlight=False, markup=False, soft_wrap=True)
    console.print(f"report -> {out}")

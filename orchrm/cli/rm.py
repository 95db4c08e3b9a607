"""`orchrm train`, `orchrm evaluate-rm`, `orchrm score`, `orchrm calibrate`: the reward
model."""

from __future__ import annotations

import errno
import json
import os
from collections import Counter
from dataclasses import replace
from pathlib import Path

import typer

from orchrm.calibration.calibrate import CalibrateConfig
from orchrm.cli.console import (
    EXAMPLES,
    UNREADABLE,
    UNWRITABLE,
    USAGE,
    console,
    err_console,
    error,
    exit_if_unreadable,
    fail,
    print_problems,
    report_unreadable,
    warn,
)
from orchrm.cli.options import JsonOutput, config_options
from orchrm.configs import config, narrowed
from orchrm.jsonl import printable
from orchrm.memplan.config import PlanMemoryConfig
from orchrm.scoring.config import EvaluateConfig, ScoreConfig
from orchrm.training.config import TrainConfig, TrainRunConfig
from orchrm.training.summary import TrainSummary

SERVER_ONLY = ["rm_url", "protocol", "tokenizer", "max_length", "batch_size", "out", "question"]
"""ScoreConfig's fields for `orchrm score` alone (a server, the output file, the question
of records without one)."""


@config
class TrainOutput(TrainRunConfig):
    """`TrainRunConfig`, and what `orchrm train` prints."""

    json: bool = False
    """Print the run's summary as JSON (with --plan: the plan)."""


@config
class PlanOutput(PlanMemoryConfig):
    """`PlanMemoryConfig`, and what `orchrm plan-memory` prints."""

    json: bool = False
    """Print the plan as JSON."""


@config
class EvaluateOutput(JsonOutput, EvaluateConfig):
    """`EvaluateConfig`, and what `orchrm evaluate-rm` prints."""


@config
class CalibrateOutput(JsonOutput, CalibrateConfig):
    """`CalibrateConfig`, and what `orchrm calibrate` prints."""


@config_options(TrainOutput)
def train_command(config: TrainOutput) -> None:
    """Train a Bradley-Terry reward model on exported pairs (progress bar with live loss,
    accuracy and ETA); OUT/config.yaml holds the settings, for `--config` to repeat the
    run, written once the pairs and the model have loaded (a refused run writes nothing).
    Multi-process: `accelerate launch ... -m orchrm train ...`."""
    as_json = config.json
    if config.plan:
        return _print_plan(
            config, as_json, num_devices=config.devices, zero_stage=config.zero_stage
        )
    from orchrm.training.output import earlier_run

    if not config.pairs:
        fail("give --pairs (an `orchrm pairs export` folder or a pair file), or --plan")
    if not Path(config.pairs).exists():
        fail(
            f"no pairs at {config.pairs}: give `orchrm pairs export`'s folder or a pair file",
            UNREADABLE,
        )
    left = None if config.resume or config.overwrite else earlier_run(Path(config.out))
    if left:
        fail(
            f"{printable(config.out)} holds {left}: give --overwrite to train again into it, "
            "--resume to continue its training, or another --out",
            UNWRITABLE,
        )
    from orchrm.training.train import train

    main = os.environ.get("RANK", "0") == "0"  # one of `accelerate launch`'s processes
    summary = train(narrowed(config, TrainConfig), resume=config.resume)
    if not main:
        return
    if as_json:
        print(json.dumps({k: v for k, v in summary.to_dict().items() if k != "history"}, indent=2))
        return
    processes = f"{summary.processes} process" + ("es" if summary.processes > 1 else "")
    console.print(
        f"trained {summary.steps} steps on {summary.train_pairs:,} pairs in {summary.dtype} "
        f"({summary.pairs_per_second:.1f} pairs/s, {processes})",
        highlight=False,
    )
    if summary.best_validation_accuracy is None:
        warn("no validation pairs: nothing told the best checkpoint apart (see pairs mine)")
    else:
        console.print(validation_line(summary), highlight=False)
    if summary.truncated_texts:
        warn(
            f"{summary.truncated_texts:,} texts were longer than --max-length "
            f"{config.max_length} and cut from the end; export the pairs with the same "
            "--max-length so the rendering cuts thinking first"
        )
    console.print(f"model -> {Path(config.out) / 'model'}", highlight=False)


@config_options(
    PlanOutput,
    into="train",
    leave_out=["peak_flops"],  # TrainConfig's number: the plan's own reads a GPU's name too
    flags={"plan.num_devices": ("--num-devices", "--devices")},
)
def plan_memory_command(
    train: PlanOutput,
    model: str = typer.Argument(
        None,
        help="Model directory, config.json or a known shape (llama-3.1-8b, ...); "
        "default: --backbone, else the offline MiniLM.",
    ),
) -> None:
    """Plan a reward model's training: parameters, bytes per device for weights,
    gradients, optimizer state and activations, and a step time, for any `orchrm train`
    settings or recipe (`--config`); nothing is loaded but the backbone's config."""
    if model:
        train = replace(train, backbone=model)
    plan = train.plan
    try:
        peak = float(plan.peak_flops) if plan.peak_flops is not None else None
    except ValueError:
        peak = plan.peak_flops
    memory = int(plan.device_memory_gib * 2**30) if plan.device_memory_gib else None
    _print_plan(
        train,
        as_json=train.json,
        micro_batch_pairs=plan.micro_batch_pairs,
        num_devices=plan.num_devices,
        zero_stage=plan.zero_stage,
        mfu=plan.mfu,
        peak_flops=peak,
        device_memory=memory,
        mean_length=plan.mean_length,
    )


def _print_plan(train: TrainConfig, as_json: bool = False, **options) -> None:
    from orchrm.memplan.plan import plan_from_train_config
    from orchrm.memplan.text import plan_text

    planned = plan_from_train_config(train, **options)
    if as_json:
        print(json.dumps(planned.to_dict(), indent=2))
    else:
        console.print(plan_text(planned, console.width), highlight=False, markup=False)


def validation_line(summary: TrainSummary) -> str:
    """The saved model's validation figures: its accuracy, the step it is from and its
    accuracy by pair kind, all of the one validation pass it was chosen at."""
    saved = summary.model_evaluation() or {}
    by_kind = saved.get("accuracy_by_kind", {})
    kinds = ", ".join(f"{k} {v:.3f}" for k, v in sorted(by_kind.items()))
    return (
        f"best validation accuracy {summary.best_validation_accuracy:.3f}"
        + (f" at step {saved['step']}" if "step" in saved else "")
        + (f" (by kind: {kinds})" if kinds else "")
    )


@config_options(EvaluateOutput, required=["rm"], leave_out=SERVER_ONLY)
def evaluate_rm_command(
    config: EvaluateOutput,
    pairs: Path = typer.Argument(
        None, help="An exported pair file, e.g. runs/pairs/test.jsonl (or give --fit-logs)."
    ),
) -> None:
    """Pairwise accuracy of a reward model on held-out pairs (overall, per kind, per
    domain); with --fit-logs, whether it reads the fit of plan to task: per task kind and
    plan structure its mean score beside the measured success, and their rank
    correlation within each kind."""
    from orchrm.training.train import evaluate_file

    if pairs is None and not config.fit_logs:
        fail("give a pair file, or --fit-logs with executed logs of held-out tasks")
    as_json = config.json
    if config.fit_logs:
        _print_fit(config, as_json)
    if pairs is None:
        return

    metrics = evaluate_file(
        Path(config.rm), pairs, dtype=config.dtype, aggregate=config.aggregate,
        spread_weight=config.spread_weight,
    )  # fmt: skip
    if as_json:
        print(json.dumps(metrics, indent=2))
        return
    console.print(
        f"{metrics['pairs']} pairs: accuracy {metrics['accuracy']:.3f}; by kind "
        + ", ".join(f"{k} {v:.3f}" for k, v in metrics["accuracy_by_kind"].items())
        + "; by domain "
        + ", ".join(f"{k} {v:.3f}" for k, v in metrics["accuracy_by_domain"].items()),
        highlight=False,
    )


def _print_fit(config: EvaluateConfig, as_json: bool) -> None:
    """The fit table of `orchrm.evaluation.fit` (and its plot with --plot)."""
    from orchrm.evaluation.fit import fit_plot, fit_table, fit_text, read_logs
    from orchrm.scoring.load import load_scorer

    rows = read_logs(list(config.fit_logs), list(config.fit_tasks))
    scorer = load_scorer(
        config.rm, dtype=config.dtype, aggregate=config.aggregate,
        spread_weight=config.spread_weight,
    )  # fmt: skip
    table = fit_table(scorer, rows)
    if config.plot:
        fit_plot(table, Path(config.plot), f"{Path(config.rm).name}: fit of plan to task")
    if as_json:
        print(json.dumps({"cells": table.cells, "kinds": table.kinds}, indent=2))
        return
    console.print(fit_text(table), highlight=False, markup=False, soft_wrap=True)


@config_options(ScoreConfig, flags={"protocol": "--protocol"})
def score_command(
    config: ScoreConfig,
    files: list[Path] = typer.Argument(..., help="Record files (any form `orchrm parse` reads)."),
) -> None:
    """Score every orchestration in FILES with a reward model, here or through a reward
    server: one JSON line per record (file, line or, in a JSON list, index, task_id,
    score or null with the reason). A record needs a question: its `question` field, or
    --question for records without one (a harmony text file). The summary (records
    scored, the others by reason, the first few with where they are) goes to stderr.
    The files are read before the model loads: when no record can be scored, nothing
    loads and the exit status is 2. A file that cannot be read is reported, the others
    are still scored, and the exit status is 3."""
    from orchrm.jsonl import output_error, write_jsonl
    from orchrm.rmodel.files import check_model_files, model_directory
    from orchrm.scoring.files import read_for_scoring
    from orchrm.scoring.load import load_scorer

    out = Path(config.out) if config.out else None
    if out is not None and out.is_dir():  # before the model loads and every record is scored
        raise output_error(out, IsADirectoryError(errno.EISDIR, "Is a directory", str(out)))
    if config.rm and not config.rm_url:  # a wrong path is said before any file is read
        check_model_files(model_directory(config.rm))
    result = read_for_scoring(files, config.question)
    unreadable = [report_unreadable(path, err) for path, err in result.unreadable]
    if not result.pending:
        _nothing_to_score(result, files, unreadable)
    remote = {"tokenizer": config.tokenizer, "max_length": config.max_length}
    remote = {k: v for k, v in remote.items() if v is not None}
    rm = Path(config.rm) if config.rm else None
    model = load_scorer(
        rm,
        config.rm_url,
        config.protocol,
        batch_size=config.batch_size,
        dtype=config.dtype,
        aggregate=config.aggregate,
        spread_weight=config.spread_weight,
        **remote,
    )
    result.score_with(model)
    if out:
        write_jsonl(result.rows, out)
    else:
        for row in result.rows:
            print(json.dumps(row))
    by_reason = Counter(p[1] for p in result.problems)
    err_console.print(
        f"{result.scored} of {len(result.rows)} records scored"
        + (f" in {model.dtype}" if hasattr(model, "dtype") else "")  # a server: its own
        + (f" -> {printable(out)}" if out else "")
        + "".join(f"; {n} {reason}" for reason, n in sorted(by_reason.items())),
        markup=False,
        highlight=False,
    )
    print_problems(result.problems, EXAMPLES, to=err_console, rest="each row carries its reason")
    exit_if_unreadable(unreadable)


def _nothing_to_score(result, files: list[Path], unreadable: list) -> None:
    """Stop `orchrm score` before a model loads: no file could be read (exit status 3),
    the files hold no record, or none of their records can be scored (2)."""
    if not result.rows:
        exit_if_unreadable(unreadable)
        names = ", ".join(printable(f) for f in files)
        fail(f"no record to score in {names}: give files of records (any form orchrm parse reads)")
    by_reason = Counter(p[1] for p in result.problems)
    print_problems(result.problems, EXAMPLES, to=err_console, rest=None)
    counts = ", ".join(f"{n} {reason}" for reason, n in sorted(by_reason.items()))
    advice = (
        '; give the question with --question TEXT, or a text "question" field in each record'
        if "no_question" in by_reason
        else "; orchrm parse --details says why for each"
    )
    error(f"none of the {len(result.rows)} record(s) can be scored ({counts}){advice}")
    raise typer.Exit(UNREADABLE if unreadable else USAGE)


@config_options(CalibrateOutput, required=["rm"], leave_out=["logs"])
def calibrate_command(
    config: CalibrateOutput,
    logs: list[Path] = typer.Argument(
        None, help="orchrm.run/1 logs with executed records (default: the --config file's)."
    ),
) -> None:
    """Fit a reward model's calibration (raw score -> P(correct)) on executed records of
    tasks it did not train on, and store it in its orchrm.json, where orchrm serve's
    p_correct and orchrm-adaptive read it; prints ECE before and after."""
    from orchrm.calibration.calibrate import calibrate

    if logs:
        config = replace(config, logs=tuple(str(p) for p in logs))
    if not config.logs:
        fail("give the logs to fit on (or logs: in the --config file)")
    result = calibrate(config)
    if config.json:
        print(json.dumps(result.to_dict(), indent=2))
        return
    text = result.to_text(max(60, console.width))
    console.print(text, highlight=False, markup=False, soft_wrap=True, end="")

"""Orch-RM against majority vote with every plan executed by a real LLM.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/real_exec.py --calibrate   # success table
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/real_exec.py --quick       # a few minutes
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/real_exec.py --tasks-only  # the split alone
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/real_exec.py               # the full run
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/real_exec.py --slots 1 --execution-seeds 2,3
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/real_exec.py --out runs/real-exec-ensemble \
        --cache runs/real-exec/executions.jsonl --members 4 --train-runs 3

`orchrm demo`'s pipeline (logs -> store -> pairs -> reward model -> best-of-N) with every
sub-agent call answered by SmolLM2-135M-Instruct on llama.cpp and every plan written by a
template orchestrator: `orchrm.experiments.real_exec.run` (its docstring says what is real and
what is not). Every held-out plan runs `--reruns` times for each execution seed
(`--execution-seeds`, one draw each; the reward model trains once, on the training plans
run with the first), so each selector gets an expected accuracy beside the sampled one,
and two draws say whether their verdicts agree. Every call is seeded and llama.cpp
reuses no cached prompt prefix, so with `--slots 1` the same seeds repeat a run exactly
(with several slots busy at once, batching changes a few answers). `--calibrate`
measures the model's success per task kind, level and sub-agent type instead.

`--quick` (6 training and 6 held-out tasks, 4 plans a task, 2 runs a plan, 20 training
steps, two draws) takes a few minutes on 2 cores. OUT (`--out`, default runs/real-exec)
gets executions.jsonl, the cache of every finished run (by task id, question, plan text,
seed and sample: a second run, a resumed one and more draws execute only what is
missing), the records, the tasks (training and held-out drawn from one pool without
replacement: no question in both; a cell with fewer questions than asked gives fewer
tasks, and the run says so), the store, pairs and model, seed-E/ (report.md, report.json,
by_kind.txt and the plots of each draw) and summary.json; with `--calibrate`,
calibrate.json and calibrate.jsonl.
"""

from __future__ import annotations

import signal
import sys

from orchrm.cli.console import csv_values
from orchrm.cli.script import run_script
from orchrm.configs import config, setting
from orchrm.experiments.real_exec.calibrate import calibrate
from orchrm.experiments.real_exec.run import run
from orchrm.experiments.real_exec.settings import FULL, QUICK, RealExecSettings, Sizes

DEFAULTS = RealExecSettings()


@config(frozen=True)
class RealExecOptions:
    """The benchmark's options: `RealExecSettings`'s, a size, and what to run."""

    out: str = DEFAULTS.out
    """Where the run's files go."""
    calibrate: bool = False
    """Only the success table per task kind, level and sub-agent type."""
    calibrate_tasks: int = setting(DEFAULTS.calibrate_tasks, min=1)
    """Calibration: tasks a (kind, level) cell."""
    kinds: tuple[str, ...] = DEFAULTS.kinds
    """Calibrate these kinds or cells only, comma-separated (add,mul2; empty: every kind)."""
    quick: bool = False
    """A few-minute run (tiny sizes)."""
    tasks_only: bool = DEFAULTS.tasks_only
    """Write the training and held-out tasks to OUT/logs/{train,test}.tasks.jsonl and
    stop, executing nothing."""
    train_tasks: int = setting(0, min=0)
    """Training tasks (0: the size's own)."""
    test_tasks: int = setting(0, min=0)
    """Held-out tasks (0: the size's own)."""
    samples: int = setting(0, min=0)
    """Plans a task, N (0: the size's own)."""
    steps: int = setting(0, min=0)
    """Reward-model training steps (0: the size's own)."""
    reruns: int = setting(0, min=0)
    """Runs of each held-out plan a draw, K (0: the size's own)."""
    execution_seeds: tuple[int, ...] = DEFAULTS.execution_seeds
    """One draw each, comma-separated: held-out run k of seed E has seed E*1000+k; the
    reward model trains on the training plans run with the first."""
    max_tokens: int = setting(DEFAULTS.max_tokens, min=1)
    """Completion tokens a sub-agent call."""
    slots: int = setting(DEFAULTS.slots, min=1)
    """llama.cpp's parallel slots."""
    threads: int = setting(DEFAULTS.threads, min=0)
    """llama.cpp's threads (0: every core). On a CPU shared with other work, 1 keeps going
    where threads that wait for each other at every step would stall."""
    concurrency: int = setting(DEFAULTS.concurrency, min=1)
    """Plans executed at once."""
    seed: int = DEFAULTS.seed
    """Seed of the tasks and plans."""
    members: int = setting(DEFAULTS.members, min=1)
    """Reward models trained as an ensemble, scored by its worst case (1: one model)."""
    train_runs: int = setting(DEFAULTS.train_runs, min=1)
    """Executions of each training plan; with 2 or more, correct-over-incorrect pairs
    are judged on success rates over the runs and read as soft labels."""
    cache: str = DEFAULTS.cache
    """Executions cache ('': OUT/executions.jsonl): give another run's to compare reward
    models on the same executions."""

    def settings(self) -> RealExecSettings:
        """The run's settings: the size's own, with what was given over it."""
        size = QUICK if self.quick else FULL
        given = (self.train_tasks, self.test_tasks, self.samples, self.steps, self.reruns)
        own = (size.train_tasks, size.test_tasks, size.samples, size.steps, size.reruns)
        return RealExecSettings(
            out=self.out,
            sizes=Sizes(*(g or o for g, o in zip(given, own, strict=True))),
            execution_seeds=self.execution_seeds,
            max_tokens=self.max_tokens,
            slots=self.slots,
            threads=self.threads,
            concurrency=self.concurrency,
            seed=self.seed,
            tasks_only=self.tasks_only,
            calibrate_tasks=self.calibrate_tasks,
            kinds=self.kinds,
            members=self.members,
            train_runs=self.train_runs,
            cache=self.cache,
        )


def main(options: RealExecOptions) -> None:
    """Calibrate, or run the study."""
    settings = options.settings()
    # SIGTERM leaves through the `with` blocks, so the llama.cpp child is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    calibrate(settings) if options.calibrate else run(settings)


if __name__ == "__main__":
    listed = {"spell": lambda v: ",".join(map(str, v))}
    run_script(
        RealExecOptions,
        main,
        doc=__doc__,
        settings={
            "kinds": {**listed, "parser": csv_values},
            "execution_seeds": {**listed, "parser": csv_values},
        },
    )

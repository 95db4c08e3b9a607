"""Orch-RM against majority vote with every plan executed by a real LLM.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/real_exec.py --calibrate   # success table
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/real_exec.py --quick       # a few minutes
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/real_exec.py --tasks-only  # the split alone
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/real_exec.py               # the full run
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/real_exec.py --slots 1 --execution-seeds 2,3

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

import argparse
import signal
import sys

from orchrm.errors import OrchrmError
from orchrm.experiments.real_exec.calibrate import calibrate
from orchrm.experiments.real_exec.run import run
from orchrm.experiments.real_exec.settings import FULL, QUICK, RealExecSettings, Sizes

DEFAULTS = RealExecSettings()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default=DEFAULTS.out)
    parser.add_argument("--calibrate", action="store_true", help="Only the success table.")
    parser.add_argument("--calibrate-tasks", type=int, default=4, help="Tasks a cell.")
    parser.add_argument(
        "--kinds", default="", help="Calibrate these kinds or cells only (add,mul2)."
    )
    parser.add_argument("--quick", action="store_true", help="A few-minute run (tiny sizes).")
    parser.add_argument(
        "--tasks-only",
        action="store_true",
        help="Write the training and held-out tasks to OUT/logs/{train,test}.tasks.jsonl and "
        "stop, executing nothing.",
    )
    parser.add_argument("--train-tasks", type=int, default=0, help="0: the size's own.")
    parser.add_argument("--test-tasks", type=int, default=0, help="0: the size's own.")
    parser.add_argument("--samples", type=int, default=0, help="Plans a task (N); 0: own.")
    parser.add_argument("--steps", type=int, default=0, help="Training steps; 0: own.")
    parser.add_argument("--reruns", type=int, default=0, help="Runs a held-out plan (K); 0: own.")
    parser.add_argument(
        "--execution-seeds",
        default="0,1",
        help="One draw each (a,b): held-out run k of seed E has seed E*1000+k; the reward "
        "model trains on the training plans run with the first.",
    )
    parser.add_argument(
        "--max-tokens", type=int, default=DEFAULTS.max_tokens, help="Per sub-agent call."
    )
    parser.add_argument(
        "--slots", type=int, default=DEFAULTS.slots, help="llama.cpp parallel slots."
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="llama.cpp threads (0: every core). On a CPU shared with other work, 1 keeps "
        "going where threads that wait for each other at every step would stall.",
    )
    parser.add_argument(
        "--concurrency", type=int, default=DEFAULTS.concurrency, help="Plans executed at once."
    )
    parser.add_argument("--seed", type=int, default=0, help="Seed of the tasks and plans.")
    args = parser.parse_args(argv)
    size = QUICK if args.quick else FULL
    settings = RealExecSettings(
        out=args.out,
        sizes=Sizes(
            args.train_tasks or size.train_tasks,
            args.test_tasks or size.test_tasks,
            args.samples or size.samples,
            args.steps or size.steps,
            args.reruns or size.reruns,
        ),
        execution_seeds=tuple(int(e) for e in args.execution_seeds.split(",") if e.strip()),
        max_tokens=args.max_tokens,
        slots=args.slots,
        threads=args.threads,
        concurrency=args.concurrency,
        seed=args.seed,
        tasks_only=args.tasks_only,
        calibrate_tasks=args.calibrate_tasks,
        kinds=tuple(k.strip() for k in args.kinds.split(",") if k.strip()),
    )
    # SIGTERM leaves through the `with` blocks, so the llama.cpp child is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        calibrate(settings) if args.calibrate else run(settings)
    except OrchrmError as err:  # a setting no run can have: one line, before anything runs
        print(f"error: {err}", file=sys.stderr)
        sys.exit(err.exit_code)


if __name__ == "__main__":
    main()

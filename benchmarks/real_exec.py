"""Orch-RM against majority vote with every plan executed by a real LLM.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/real_exec.py --calibrate   # success table
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/real_exec.py --quick       # a few minutes
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/real_exec.py               # the full run

`orchrm demo`'s pipeline (logs -> store -> pairs -> reward model -> best-of-N) with every
sub-agent call answered by SmolLM2-135M-Instruct on llama.cpp and every plan written by a
template orchestrator: `orchrm.experiments.real_exec` (its docstring says what is real and
what is not). `--calibrate` measures the model's success per task kind, level and
sub-agent type instead. OUT (`--out`, default runs/real-exec) gets the records, the
tasks, the store, pairs and model, report.md, report.json and the plots; with
`--calibrate`, calibrate.json and calibrate.jsonl.
"""

from __future__ import annotations

import argparse
import signal
import sys

from orchrm.experiments.real_exec import FULL, QUICK, RealExecSettings, Sizes, calibrate, run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/real-exec")
    parser.add_argument("--calibrate", action="store_true", help="Only the success table.")
    parser.add_argument("--calibrate-tasks", type=int, default=4, help="Tasks a cell.")
    parser.add_argument("--kinds", default="", help="Calibrate these kinds only (a,b).")
    parser.add_argument("--quick", action="store_true", help="A few-minute run.")
    parser.add_argument(
        "--from-logs",
        action="store_true",
        help="Skip execution: train and evaluate on the records OUT/logs already holds.",
    )
    parser.add_argument("--train-tasks", type=int, default=0, help="0: the size's own.")
    parser.add_argument("--test-tasks", type=int, default=0, help="0: the size's own.")
    parser.add_argument("--samples", type=int, default=0, help="Plans a task (N); 0: own.")
    parser.add_argument("--steps", type=int, default=0, help="Training steps; 0: own.")
    parser.add_argument("--max-tokens", type=int, default=96, help="Per sub-agent call.")
    parser.add_argument("--slots", type=int, default=4, help="llama.cpp parallel slots.")
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="llama.cpp threads (0: every core). On a CPU shared with other work, 1 keeps "
        "going where threads that wait for each other at every step would stall.",
    )
    parser.add_argument("--concurrency", type=int, default=8, help="Plans executed at once.")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    size = QUICK if args.quick else FULL
    settings = RealExecSettings(
        out=args.out,
        sizes=Sizes(
            args.train_tasks or size.train_tasks,
            args.test_tasks or size.test_tasks,
            args.samples or size.samples,
            args.steps or size.steps,
        ),
        from_logs=args.from_logs,
        max_tokens=args.max_tokens,
        slots=args.slots,
        threads=args.threads,
        concurrency=args.concurrency,
        seed=args.seed,
        calibrate_tasks=args.calibrate_tasks,
        kinds=tuple(k.strip() for k in args.kinds.split(",") if k.strip()),
    )
    # SIGTERM leaves through the `with` blocks, so the llama.cpp child is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.calibrate:
        calibrate(settings)
    else:
        run(settings)


if __name__ == "__main__":
    main()

"""GRPO of SmolLM2-135M-Instruct as the orchestrator, three ways from one warm-up, its
plans executed by the same model on llama.cpp (`orchrm.experiments.rl_real.run`).

    .venv/bin/python benchmarks/rl_real.py --out runs/rl-real          # the comparison
    .venv/bin/python benchmarks/rl_real.py --quick --out runs/rl-quick  # a few minutes
    .venv/bin/python benchmarks/rl_real.py --tasks-only                 # the split, no run

Prints each stage's figures and the table; OUT/report.md, report.json and reward.png
hold them. Stages already in OUT with the same settings are reused.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from orchrm.errors import OrchrmError
from orchrm.experiments.rl_real.run import FULL, METHODS, QUICK, RLRealSettings, run


def main(argv: list[str] | None = None) -> None:
    defaults = RLRealSettings()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=defaults.out)
    parser.add_argument("--quick", action="store_true", help="Tiny sizes: a few minutes.")
    parser.add_argument("--policy", default=defaults.policy, help="smollm2, a directory or a GGUF.")
    parser.add_argument("--rm", default="", help="A reward model directory (else trained).")
    parser.add_argument("--methods", default=",".join(METHODS), help="Of " + ", ".join(METHODS))
    size = parser.add_argument_group("sizes (0: the size's own)")
    for name in FULL.__dataclass_fields__:
        size.add_argument(f"--{name.replace('_', '-')}", type=int, default=0)
    parser.add_argument("--lr", type=float, default=defaults.lr, help="GRPO's learning rate.")
    parser.add_argument("--warmup-lr", type=float, default=defaults.warmup_lr)
    parser.add_argument("--lora-r", type=int, default=defaults.lora_r)
    parser.add_argument("--prompt-grad", action="store_true", help="Gradient through prompts.")
    parser.add_argument("--threads", type=int, default=0, help="PyTorch threads (0: all).")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="No progress bars.")
    parser.add_argument(
        "--tasks-only",
        action="store_true",
        help="Write the training and held-out tasks to OUT/logs/{train,test}.tasks.jsonl and "
        "stop, executing nothing.",
    )
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    given = {n: getattr(args, n) for n in FULL.__dataclass_fields__ if getattr(args, n)}
    settings = RLRealSettings(
        out=args.out,
        sizes=replace(sizes, **given),
        methods=tuple(m for m in args.methods.split(",") if m),
        policy=args.policy,
        rm=args.rm,
        lora_r=args.lora_r,
        lr=args.lr,
        warmup_lr=args.warmup_lr,
        prompt_grad=args.prompt_grad,
        threads=args.threads,
        seed=args.seed,
        tasks_only=args.tasks_only,
        progress=not args.quiet,
    )
    try:
        run(settings)
    except OrchrmError as err:  # a setting no run can have: one line, before anything runs
        print(f"error: {err}", file=sys.stderr)
        sys.exit(err.exit_code)


if __name__ == "__main__":
    main()

"""orchrm driven by the RL frameworks' own client code, at a scale of your choosing: the
runs of `orchrm.experiments.frameworks.drive` (whose scenarios tests/test_frameworks_verl.py and
tests/test_frameworks_openrlhf.py hold to their figures), with their figures printed.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/framework_clients.py verl [--samples 2000]
        [--threads 32]
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/framework_clients.py openrlhf [--at-once 1000]
        [-- orchrm serve options, e.g. --max-queued-requests 64]

`verl`: verl 0.9's `RewardLoopWorker` (its `naive` reward manager, the reward function
loaded from `reward.custom_reward_function.path=pkg://orchrm.rl.verl_reward`) rewards a
batch of `--samples` responses from `--threads` executor threads, against the default
backbone (all-MiniLM-L6-v2, its reward head seeded, 64 tokens) scored on the CPU in fp32.
It prints the wall time, how many times the worker loaded the model, how many rewards
differ (by more than 1e-4) from scoring each response alone, and the scoring rounds the
concurrent calls were batched into.

`openrlhf`: OpenRLHF 0.11's `SingleTurnAgentExecutor` posts `--at-once` single-sample
reward requests at once to `orchrm serve` (a subprocess, fp32, default limits unless
options follow `--`), as a rollout does. It prints the requests at once, the outcome of
every HTTP attempt (status, or `error` for a failed connection), the retries (attempts
beyond one per sample), the samples left without a reward after OpenRLHF's five tries,
and the wall time.
"""

from __future__ import annotations

import argparse
import logging

from orchrm.experiments.frameworks.drive import openrlhf_run, verl_run


def verl(samples: int, threads: int) -> None:
    r = verl_run(samples, threads)
    print(
        f"verl reward loop: {r.samples} samples ({r.valid:.0f} valid plans) from {r.threads} "
        f"threads in {r.seconds:.2f} s; model loads {r.loads}; rewards differing from "
        f"one-at-a-time scoring {r.wrong}; scoring rounds {r.rounds} (largest "
        f"{r.largest_round} calls)"
    )


def openrlhf(at_once: int, options: list[str]) -> None:
    logging.disable(logging.WARNING)
    r = openrlhf_run(at_once, options)
    print(
        f"OpenRLHF rollout: {r.at_once} single-sample requests at once "
        f"({' '.join(r.options) or 'default limits'}), {r.peak} in flight at the peak; "
        f"attempts {r.attempts} {r.statuses}; retries {r.retries}; samples "
        f"without a reward {r.missing}; {r.seconds:.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="framework", required=True)
    v = sub.add_parser("verl")
    v.add_argument("--samples", type=int, default=2000)
    v.add_argument("--threads", type=int, default=32)
    o = sub.add_parser("openrlhf")
    o.add_argument("--at-once", type=int, default=1000)
    o.add_argument("serve_options", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.framework == "verl":
        verl(args.samples, args.threads)
    else:
        openrlhf(args.at_once, [a for a in args.serve_options if a != "--"])


if __name__ == "__main__":
    main()

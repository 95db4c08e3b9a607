"""orchrm driven by the RL frameworks' own client code, at a scale of your choosing: the
runs of `orchrm.experiments.frameworks.drive` (whose scenarios tests/test_frameworks_verl.py and
tests/test_frameworks_openrlhf.py hold to their figures), with their figures printed.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/framework_clients.py --framework verl
        [--samples 2000] [--threads 32]
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/framework_clients.py --framework openrlhf
        [--at-once 1000] [--serve-options "orchrm serve options, e.g. --max-queued-requests 64"]

`verl`: verl 0.9's `RewardLoopWorker` (its `naive` reward manager, the reward function
loaded from `reward.custom_reward_function.path=pkg://orchrm.rl.verl_reward`) rewards a
batch of `--samples` responses from `--threads` executor threads, against the default
backbone (all-MiniLM-L6-v2, its reward head seeded, 64 tokens) scored on the CPU in fp32.
It prints the wall time, how many times the worker loaded the model, how many rewards
differ (by more than 1e-4) from scoring each response alone, and the scoring rounds the
concurrent calls were batched into.

`openrlhf`: OpenRLHF 0.11's `SingleTurnAgentExecutor` posts `--at-once` single-sample
reward requests at once to `orchrm serve` (a subprocess, fp32, default limits unless
`--serve-options` gives others, in one text a shell would split), as a rollout does. It
prints the requests at once, the outcome of every HTTP attempt (status, or `error` for a
failed connection), the retries (attempts beyond one per sample), the samples left without
a reward after OpenRLHF's five tries, and the wall time.
"""

from __future__ import annotations

import logging
import shlex
from typing import Literal

from orchrm.cli.script import run_script
from orchrm.configs import config, setting
from orchrm.errors import ConfigError
from orchrm.experiments.frameworks.drive import openrlhf_run, verl_run


@config(frozen=True)
class ClientSettings:
    """The benchmark's options."""

    framework: Literal["verl", "openrlhf"] | None = None
    """Whose client code drives orchrm (required)."""
    samples: int = setting(2000, min=1)
    """verl: responses in the batch rewarded."""
    threads: int = setting(32, min=1)
    """verl: executor threads the rewards are computed from."""
    at_once: int = setting(1000, min=1)
    """openrlhf: single-sample reward requests posted at once."""
    serve_options: tuple[str, ...] = ()
    """openrlhf: options of `orchrm serve`, in one text (default: its default limits)."""

    def __post_init__(self) -> None:
        if self.serve_options and self.framework == "verl":
            raise ConfigError("--serve-options is for --framework openrlhf, not verl")


def verl(samples: int, threads: int) -> None:
    r = verl_run(samples, threads)
    print(
        f"verl reward loop: {r.samples} samples ({r.valid:.0f} valid plans) from {r.threads} "
        f"threads in {r.seconds:.2f} s; model loads {r.loads}; rewards differing from "
        f"one-at-a-time scoring {r.wrong}; scoring rounds {r.rounds} (largest "
        f"{r.largest_round} calls)"
    )


def openrlhf(at_once: int, options: list[str] | tuple[str, ...]) -> None:
    logging.disable(logging.WARNING)
    r = openrlhf_run(at_once, options)
    print(
        f"OpenRLHF rollout: {r.at_once} single-sample requests at once "
        f"({' '.join(r.options) or 'default limits'}), {r.peak} in flight at the peak; "
        f"attempts {r.attempts} {r.statuses}; retries {r.retries}; samples "
        f"without a reward {r.missing}; {r.seconds:.1f} s"
    )


def main(args: ClientSettings) -> None:
    """Run the framework's client and print its figures."""
    if args.framework == "verl":
        verl(args.samples, args.threads)
    else:
        openrlhf(args.at_once, args.serve_options)


if __name__ == "__main__":
    run_script(
        ClientSettings,
        main,
        doc=__doc__,
        required=["framework"],
        settings={"serve_options": {"parser": shlex.split, "spell": shlex.join}},
    )

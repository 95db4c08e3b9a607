"""orchrm driven by the RL frameworks' own client code, at a scale of your choosing: the
scenarios of `framework_scenarios.py` (which tests/test_frameworks_verl.py and
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
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import framework_scenarios as s


def reward_model(folder: Path) -> Path:
    """The default backbone with a seeded reward head, saved as orchrm saves a model, at
    64 tokens: most plans are cut, so a wrong truncation shows in the rewards."""
    import torch

    from orchrm.scoring.backbone import default_backbone, load_backbone
    from orchrm.training.build import save_model

    torch.manual_seed(0)
    model, tokenizer = load_backbone(default_backbone())
    metadata = {"max_length": 64, "reward_mean": 0.5, "reward_std": 2.0}
    return save_model(model, tokenizer, folder, metadata)


def verl(samples: int, threads: int) -> None:
    from orchrm.rl import verl_reward
    from orchrm.scoring import local

    folder = Path(tempfile.mkdtemp())
    rows = s.verl_rows(samples)
    rm_dir = reward_model(folder / "rm")
    policy, tokenizer = s.smollm2_tokenizer(folder / "policy")
    expected = s.one_at_a_time(rm_dir, rows)
    loads = []
    real = local.load_backbone
    local.load_backbone = lambda *a, **k: loads.append(a[0]) or real(*a, **k)
    config = s.verl_config(policy, rm_path=rm_dir, dtype="fp32")
    data = s.data_proto(rows, tokenizer)
    start = time.perf_counter()
    outputs = s.run_reward_loop(config, data, threads)
    seconds = time.perf_counter() - start
    wrong = sum(abs(o["reward_score"] - e) > 1e-4 for o, e in zip(outputs, expected, strict=True))
    (scorer,) = verl_reward._SCORERS.values()
    batcher = scorer.__dict__["_callers"]
    valid = sum(o["reward_extra_info"]["valid"] for o in outputs)
    print(
        f"verl reward loop: {samples} samples ({valid:.0f} valid plans) from {threads} threads "
        f"in {seconds:.2f} s; model loads {len(loads)}; rewards differing from one-at-a-time "
        f"scoring {wrong}; scoring rounds {batcher.rounds} (largest {batcher.largest_round} calls)"
    )


def openrlhf(at_once: int, options: list[str]) -> None:
    logging.disable(logging.WARNING)
    folder = Path(tempfile.mkdtemp())
    plans = s.world_plans()
    tokenizer = s.chatml_tokenizer(plans)
    model = reward_model(folder / "model")
    samples = [s.sample(tokenizer, *plans[i % len(plans)]) for i in range(at_once)]
    with s.Posts() as posts, s.orchrm_serve(model, folder / "serve.log", *options) as port:
        start = time.monotonic()
        outputs = s.rollout(samples, tokenizer, f"http://127.0.0.1:{port}/get_reward")
        seconds = time.monotonic() - start
    attempts = sum(posts.statuses.values())
    missing = sum(o["reward"] is None for o in outputs)
    print(
        f"OpenRLHF rollout: {at_once} single-sample requests at once "
        f"({' '.join(options) or 'default limits'}), {posts.peak} in flight at the peak; "
        f"attempts {attempts} {dict(posts.statuses)}; retries {attempts - at_once}; samples "
        f"without a reward {missing}; {seconds:.1f} s"
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

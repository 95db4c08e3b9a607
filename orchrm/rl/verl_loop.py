"""`orchrm.rl.verl_reward` run by verl's own reward loop, as a verl reward worker runs it.

`verl_config` composes verl's `ppo_trainer.yaml` with the overrides docs/rl.md gives,
`data_proto` lays (task, response) rows out as verl's rollout leaves them (a `DataProto`
of left-padded prompts and right-padded responses), and `run_reward_loop` runs verl's
`RewardLoopWorker` on them from a chosen number of executor threads. `one_at_a_time`
gives the rewards the same rows get from the reward model scored alone, one response at a
time, to hold the loop's rewards to; `smollm2_tokenizer` is a policy tokenizer verl can
load. A row's task is anything with a `question` and an `answer` (`orchrm.tasks.task.Task`,
a world task).

verl, Hydra and numpy are imported inside the functions that use them, so importing this
module needs none of them.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from orchrm.rl import verl_reward
from orchrm.rl.policy import policy_prompt
from orchrm.rl.rewards import runnable
from orchrm.rmodel.tokens import load_tokenizer
from orchrm.runtime.local_llm import bundled_gguf
from orchrm.scoring.local import OrchRM


def smollm2_tokenizer(folder: Path):
    """SmolLM2-135M-Instruct's tokenizer (of the bundled GGUF), saved in `folder` as a
    model directory verl can load: (folder, tokenizer)."""
    tokenizer = load_tokenizer(str(bundled_gguf()))
    tokenizer.save_pretrained(folder)
    return folder, tokenizer


def one_at_a_time(rm_dir: Path, rows) -> list[float]:
    """Each (task, response) row's reward from the model in `rm_dir`, scored here one
    response at a time in fp32 and normalized by the model's training-time statistics (as
    `orchrm.rl.verl_reward` does by default); a response that does not parse into a
    runnable plan gets `orchrm.rl.verl_reward.DEFAULT_PENALTY`."""
    rm = OrchRM.load(rm_dir, device="cpu", dtype="fp32")
    out = []
    for task, text in rows:
        plan = runnable(text)
        if plan is None:
            out.append(verl_reward.DEFAULT_PENALTY)
            continue
        (scored,) = rm.score_texts([rm.render(task.question, plan)])
        out.append(rm.info.normalize([scored.score])[0])
    return out


def verl_config(policy: Path, **reward_kwargs):
    """verl's trainer configuration, composed from its own `ppo_trainer.yaml` with the
    overrides docs/rl.md gives: the policy model at `policy`, the reward function
    `orchrm.rl.verl_reward.compute_score` and `reward_kwargs` as its reward kwargs."""
    import verl
    from hydra import compose, initialize_config_dir

    overrides = [
        f"actor_rollout_ref.model.path={policy}",
        "reward.custom_reward_function.path=pkg://orchrm.rl.verl_reward",
        "reward.custom_reward_function.name=compute_score",
    ]
    overrides += [
        f"+reward.custom_reward_function.reward_kwargs.{k}={v}" for k, v in reward_kwargs.items()
    ]
    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose("ppo_trainer", overrides)


def data_proto(rows, tokenizer, extra: list[dict] | None = None):
    """A verl batch of the (task, response) rows: left-padded prompts (the policy prompt
    of each question), right-padded responses, the attention mask, and per row the
    data source, the ground truth and `extra_info` holding the question (and the row's
    `extra`, when given: e.g. its reference plans)."""
    import numpy as np
    from verl import DataProto

    prompts = [
        tokenizer(policy_prompt(t.question), add_special_tokens=False)["input_ids"] for t, _ in rows
    ]
    responses = [tokenizer(text, add_special_tokens=False)["input_ids"] for _, text in rows]
    width_p, width_r = max(map(len, prompts)), max(map(len, responses))
    pad = tokenizer.pad_token_id or 0
    prompt_ids = torch.full((len(rows), width_p), pad)
    response_ids = torch.full((len(rows), width_r), pad)
    mask = torch.zeros((len(rows), width_p + width_r), dtype=torch.long)
    for i, (p, r) in enumerate(zip(prompts, responses, strict=True)):
        prompt_ids[i, width_p - len(p) :] = torch.tensor(p)
        response_ids[i, : len(r)] = torch.tensor(r)
        mask[i, width_p - len(p) : width_p + len(r)] = 1
    objects = lambda values: np.array(values, dtype=object)  # noqa: E731
    return DataProto.from_dict(
        tensors={
            "prompts": prompt_ids,
            "responses": response_ids,
            "input_ids": torch.cat([prompt_ids, response_ids], dim=1),
            "attention_mask": mask,
        },
        non_tensors={
            "data_source": objects(["orchrm/math"] * len(rows)),
            "reward_model": objects([{"ground_truth": t.answer} for t, _ in rows]),
            "extra_info": objects(
                [
                    {"question": t.question, "index": i, **(extra[i] if extra else {})}
                    for i, (t, _) in enumerate(rows)
                ]
            ),
        },
    )


def run_reward_loop(config, data, threads: int) -> list[dict]:
    """verl's reward loop worker over the batch, from `threads` executor threads (asyncio's
    default on a node of `threads` - 4 cores or more, up to 32): each row's output, its
    `reward_score` and `reward_extra_info`."""
    from verl.experimental.reward_loop import RewardLoopWorker

    worker = RewardLoopWorker(config)
    loop = worker.loop
    loop.set_default_executor(ThreadPoolExecutor(threads))
    return loop.run_until_complete(worker.compute_score_batch(data))

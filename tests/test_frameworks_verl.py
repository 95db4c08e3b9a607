"""orchrm.rl.verl_reward driven by verl's real reward loop (verl 0.9 from PyPI).

The configuration is composed from verl's own `ppo_trainer.yaml` with the overrides a user
writes; verl's `RewardLoopWorker` loads the reward function with its own loader and runs
its `naive` reward manager on `DataProto` rows, one sample per task and a synchronous
reward function in executor threads, as it does in each reward worker process (without
Ray, which only places that worker). The policy's tokenizer is SmolLM2's, from the GGUF
the tests use for the real LLM.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from orchrm.orchestration import render_for_rm
from orchrm.rl import verl_reward
from orchrm.rl.policy import policy_prompt
from orchrm.rl.rewards import runnable
from orchrm.runtime.local_llm import bundled_gguf
from orchrm.scoring import local
from orchrm.scoring.backbone import METADATA
from orchrm.scoring.local import OrchRM
from orchrm.world.orchestrators import orchestrators
from orchrm.world.tasks import generate_tasks
from tests.samples import tiny_decoder
from tests.test_serve import Server

verl = pytest.importorskip("verl", reason="verl is installed by `make setup` (docs/frameworks.md)")
np = pytest.importorskip("numpy")
hydra = pytest.importorskip("hydra", reason="verl's configuration is composed with Hydra")
from verl.experimental.reward_loop import RewardLoopWorker  # noqa: E402

SAMPLES = 384
"""Responses in one verl batch: 16 tasks x 24 samples."""
THREADS = 32
"""verl's executor threads on a node with 28 cores or more (asyncio's default there)."""
MAX_LENGTH = 64
"""Short enough that most plans are cut: a wrong truncation would show in the rewards."""
BROKEN = "<thinking>half a plan</thinking>\n<agent>\n  <agent_id>A</agent_id>"


@pytest.fixture(scope="module")
def rows():
    """(task, orchestrator output) for each sample: plans of the world's two
    orchestrators, with every 16th output broken off mid-plan."""
    tasks = generate_tasks("math", 16, seed=5)
    writers = orchestrators(5)
    out = []
    for n in range(SAMPLES):
        task = tasks[n % len(tasks)]
        text, _ = writers[("base", "specialized")[n % 2]].write(task, n // 32)
        out.append((task, BROKEN if n % 16 == 7 else text))
    return out


@pytest.fixture(scope="module")
def rm_dir(rows, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("verl") / "rm"
    texts = [render_for_rm(t.question, o) for t, c in rows if (o := runnable(c))]
    tiny_decoder(folder, texts)
    metadata = {"max_length": MAX_LENGTH, "reward_mean": 0.5, "reward_std": 2.0}
    (folder / METADATA).write_text(json.dumps(metadata))
    return folder


@pytest.fixture(scope="module")
def policy_tokenizer(tmp_path_factory):
    """SmolLM2-135M-Instruct's tokenizer, saved as a model directory verl can load."""
    from transformers import AutoTokenizer

    gguf = bundled_gguf()
    folder = tmp_path_factory.mktemp("verl") / "policy"
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tokenizer.save_pretrained(folder)
    return folder, tokenizer


@pytest.fixture(scope="module")
def expected(rm_dir, rows) -> list[float]:
    """Each row's reward from the model scored here one response at a time, in fp32."""
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
    """verl's trainer configuration with the overrides docs/rl.md gives."""
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


def data_proto(rows, tokenizer):
    """A verl batch of the rows: left-padded prompts, right-padded responses."""
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
                [{"question": t.question, "index": i} for i, (t, _) in enumerate(rows)]
            ),
        },
    )


def run_reward_loop(config, data) -> list[dict]:
    """verl's reward loop worker over the batch, its executor as wide as on a GPU node."""
    worker = RewardLoopWorker(config)
    loop = worker.loop
    loop.set_default_executor(ThreadPoolExecutor(THREADS))
    return loop.run_until_complete(worker.compute_score_batch(data))


@pytest.fixture
def fresh_process(monkeypatch):
    """A worker process's state: no scorer loaded yet, and each model load counted."""
    monkeypatch.setattr(verl_reward, "_SCORERS", {})
    loads = []
    real = local.load_backbone

    def counted(*args, **kwargs):
        loads.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(local, "load_backbone", counted)
    return loads


def test_verl_reward_loop_calls_orchrm_from_many_threads_with_exact_rewards(
    rows, rm_dir, policy_tokenizer, expected, fresh_process
):
    policy, tokenizer = policy_tokenizer
    data = data_proto(rows, tokenizer)
    config = verl_config(policy, rm_path=rm_dir, dtype="fp32")
    assert config.reward.reward_manager.name == "naive"
    outputs = run_reward_loop(config, data)

    rewards = [o["reward_score"] for o in outputs]
    assert rewards == pytest.approx(expected, abs=1e-4)
    infos = [o["reward_extra_info"] for o in outputs]
    assert [i["valid"] for i in infos] == [float(runnable(c) is not None) for _, c in rows]
    assert sum(i["valid"] == 0.0 for i in infos) >= SAMPLES // 16  # the broken ones at least
    assert all(0 < i["rm_tokens"] <= MAX_LENGTH for i in infos if i["valid"])
    assert len(fresh_process) == 1  # one model in this worker process, for 384 samples
    (scorer,) = verl_reward._SCORERS.values()
    batcher = scorer.__dict__["_callers"]
    assert batcher.rounds < (SAMPLES - SAMPLES // 16) / 4  # concurrent callers batched


def test_verl_reward_loop_scores_through_orchrm_serve(
    rows, rm_dir, policy_tokenizer, expected, fresh_process
):
    policy, tokenizer = policy_tokenizer
    served = OrchRM.load(rm_dir, device="cpu", dtype="fp32")
    fresh_process.clear()  # the server's model, not the worker's
    with Server(served) as server:
        config = verl_config(policy, rm_url=f"http://127.0.0.1:{server.port}", rm_path=rm_dir)
        outputs = run_reward_loop(config, data_proto(rows, tokenizer))
    assert [o["reward_score"] for o in outputs] == pytest.approx(expected, abs=1e-4)
    assert fresh_process == []  # the model lives in the server
    (scorer,) = verl_reward._SCORERS.values()
    assert scorer.__dict__["_callers"].rounds < SAMPLES / 4  # batched into few requests

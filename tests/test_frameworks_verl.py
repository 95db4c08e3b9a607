"""orchrm.rl.verl_reward driven by verl's real reward loop (verl 0.9 from PyPI).

The configuration is composed from verl's own `ppo_trainer.yaml` with the overrides a user
writes; verl's `RewardLoopWorker` loads the reward function with its own loader and runs
its `naive` reward manager on `DataProto` rows, one sample per task and a synchronous
reward function in executor threads, as it does in each reward worker process (without
Ray, which only places that worker). The reward model is a tiny decoder, which scores
each batch of concurrent callers packed into one row: every reward matches the text
scored alone. The policy's tokenizer is SmolLM2's, from the GGUF
the tests use for the real LLM.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from orchrm.experiments.frameworks.drive import verl_rows
from orchrm.orchestration import render_for_rm
from orchrm.rl import verl_reward
from orchrm.rl.rewards import runnable
from orchrm.rl.verl_loop import (
    data_proto,
    one_at_a_time,
    run_reward_loop,
    smollm2_tokenizer,
    verl_config,
)
from orchrm.rmodel import backbone
from orchrm.rmodel.files import METADATA
from orchrm.rmodel.packed import packs
from orchrm.scoring.local import OrchRM
from tests.samples import tiny_decoder
from tests.test_serve import Server

pytest.importorskip("verl", reason="verl is installed by `make setup` (docs/frameworks.md)")
pytest.importorskip("hydra", reason="verl's configuration is composed with Hydra")

SAMPLES = 384
"""Responses in one verl batch: 16 tasks x 24 samples."""
THREADS = 32
"""verl's executor threads on a node with 28 cores or more (asyncio's default there)."""
MAX_LENGTH = 64
"""Short enough that most plans are cut: a wrong truncation would show in the rewards."""


def reward_model(folder: Path, rows) -> Path:
    """A tiny seeded decoder reward model whose tokenizer knows the rows' words."""
    texts = [render_for_rm(t.question, o) for t, c in rows if (o := runnable(c))]
    tiny_decoder(folder, texts)
    metadata = {"max_length": MAX_LENGTH, "reward_mean": 0.5, "reward_std": 2.0}
    (folder / METADATA).write_text(json.dumps(metadata))
    return folder


@pytest.fixture(scope="module")
def rows():
    return verl_rows(SAMPLES)


@pytest.fixture(scope="module")
def rm_dir(rows, tmp_path_factory) -> Path:
    return reward_model(tmp_path_factory.mktemp("verl") / "rm", rows)


@pytest.fixture(scope="module")
def policy_tokenizer(tmp_path_factory):
    return smollm2_tokenizer(tmp_path_factory.mktemp("verl") / "policy")


@pytest.fixture(scope="module")
def expected(rm_dir, rows) -> list[float]:
    return one_at_a_time(rm_dir, rows)


@pytest.fixture
def fresh_process(monkeypatch):
    """A worker process's state: no scorer loaded yet, and each model load counted."""
    monkeypatch.setattr(verl_reward, "_SCORERS", {})
    monkeypatch.setattr(verl_reward, "_REFERENCES", {})
    monkeypatch.setattr(verl_reward, "_REFERENCE_LOCKS", {})
    loads = []
    real = backbone.load_backbone

    def counted(*args, **kwargs):
        loads.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(backbone, "load_backbone", counted)
    return loads


def test_verl_reward_loop_calls_orchrm_from_many_threads_with_exact_rewards(
    rows, rm_dir, policy_tokenizer, expected, fresh_process
):
    policy, tokenizer = policy_tokenizer
    data = data_proto(rows, tokenizer)
    config = verl_config(policy, rm_path=rm_dir, dtype="fp32")
    assert config.reward.reward_manager.name == "naive"
    outputs = run_reward_loop(config, data, THREADS)

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
    assert packs(scorer.model)  # each batch's texts packed into one row, unpadded


def test_verl_reward_loop_scores_through_orchrm_serve(
    rows, rm_dir, policy_tokenizer, expected, fresh_process
):
    policy, tokenizer = policy_tokenizer
    served = OrchRM.load(rm_dir, device="cpu", dtype="fp32")
    assert packs(served.model)  # the server's batches packed into one row, unpadded
    fresh_process.clear()  # the server's model, not the worker's
    with Server(served) as server:
        config = verl_config(policy, rm_url=f"http://127.0.0.1:{server.port}", rm_path=rm_dir)
        outputs = run_reward_loop(config, data_proto(rows, tokenizer), THREADS)
    assert [o["reward_score"] for o in outputs] == pytest.approx(expected, abs=1e-4)
    assert fresh_process == []  # the model lives in the server
    (scorer,) = verl_reward._SCORERS.values()
    assert scorer.__dict__["_callers"].rounds < SAMPLES / 4  # batched into few requests


def test_verl_reward_loop_centres_each_reward_on_its_rows_reference_plans(
    rows, rm_dir, policy_tokenizer, expected, fresh_process
):
    """`centre=true` in verl's reward kwargs and each row's reference plans in its
    extra_info, as a user's parquet file holds them: verl's loop, from its threads, gives
    sigmoid(r - r_ref) with r_ref the mean of the references' rewards, each question's
    references scored once, and one model in the worker."""
    policy, tokenizer = policy_tokenizer
    valid: dict[str, list[int]] = {}
    for i, (task, text) in enumerate(rows):
        if runnable(text) is not None:
            valid.setdefault(task.question, []).append(i)
    references = {q: found[:2] for q, found in valid.items()}  # two of its own samples
    extra = [{"reference": [rows[j][1] for j in references.get(t.question, [])]} for t, _ in rows]
    config = verl_config(policy, rm_path=rm_dir, dtype="fp32", centre="true")
    outputs = run_reward_loop(config, data_proto(rows, tokenizer, extra), THREADS)

    seen = set()
    for (task, text), out, plain in zip(rows, outputs, expected, strict=True):
        info = out["reward_extra_info"]
        if runnable(text) is None:
            assert out["reward_score"] == verl_reward.DEFAULT_PENALTY and info["valid"] == 0.0
            continue
        centre = sum(expected[j] for j in references[task.question]) / 2
        assert info["rm_reference"] == pytest.approx(centre, abs=1e-4)
        assert out["reward_score"] == pytest.approx(1 / (1 + math.exp(centre - plain)), abs=1e-4)
        seen.add((task.question, info["rm_reference"]))
    assert len(seen) == len(references)  # one value a question: its references scored once
    assert len(fresh_process) == 1

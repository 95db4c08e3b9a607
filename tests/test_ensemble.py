"""Reward-model ensembles: `orchrm train --ensemble K`, the averaged (WARM) model, and
each item's mean, spread and aggregate wherever a score goes (Python API, `orchrm
score`, `orchrm evaluate-rm`, `orchrm serve`'s routes, verl's reward function)."""

from __future__ import annotations

import json
import math
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForSequenceClassification

from orchrm.errors import ConfigError
from orchrm.jsonl import write_jsonl
from orchrm.rmodel.ensemble import combine, normalized, spread
from orchrm.scoring.ensemble import EnsembleScorer
from orchrm.scoring.load import load_scorer
from orchrm.scoring.local import OrchRM
from orchrm.store.db import Store
from orchrm.store.ingest import ingest_file
from orchrm.store.pairs import MineConfig, export, mine
from orchrm.training.config import TrainConfig
from orchrm.training.data import bootstrap
from orchrm.training.evaluate import evaluate_file
from orchrm.training.train import train
from orchrm.world.generate import generate
from tests.test_serve import Server

K = 2
FAST = {"max_length": 64, "batch_size": 8, "lr": 1e-4, "eval_every": 3, "dtype": "fp32"}


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory) -> Path:
    """World `math` pairs in one file: the ensemble holds out its own validation tasks."""
    folder = tmp_path_factory.mktemp("pairs")
    log = folder / "math.jsonl"
    write_jsonl(generate("math", 24, 4, seed=3, progress=False).records, log)
    with Store(folder / "s.duckdb") as store:
        ingest_file(store, log)
        mine(store, MineConfig(specialized=("specialized",), base=("base",), cap_per_task=4))
        export(store, folder / "export")
    records = [
        json.loads(line)
        for f in ("train", "validation", "test")
        if (folder / "export" / f"{f}.jsonl").exists()
        for line in (folder / "export" / f"{f}.jsonl").read_text().splitlines()
    ]
    write_jsonl(records, folder / "pairs.jsonl")
    return folder / "pairs.jsonl"


def ensemble_config(pairs_file: Path, out: Path) -> TrainConfig:
    """3 steps a member, 3 members, 30% of the tasks held out for validation."""
    return TrainConfig(
        pairs=str(pairs_file), out=str(out), max_steps=3, ensemble=K, validation_share=0.3,
        **FAST,
    )  # fmt: skip


@pytest.fixture(scope="module")
def ensemble(pairs_file, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ens")
    config = ensemble_config(pairs_file, out)
    summary = train(config, progress=False)
    assert summary.steps == 3 * K and summary.best_validation_accuracy is not None
    return out / "model"


def world_plans() -> list[tuple[str, str]]:
    """(question, harmony text) of three plans the world's orchestrators write for a task."""
    from orchrm.world.orchestrators import orchestrators
    from orchrm.world.tasks import generate_tasks

    task = generate_tasks("math", 1, seed=1)[0]
    writers = list(orchestrators(0).values())
    return [(task.question, w.write(task, 0)[0]) for w in writers[:3]]


def texts_of(pairs_file: Path, n: int = 12) -> list[str]:
    records = [json.loads(line) for line in pairs_file.read_text().splitlines()][:n]
    return [r["prompt"] + r["chosen"] for r in records] + [
        r["prompt"] + r["rejected"] for r in records
    ]


def test_the_aggregates_are_the_members_own_scores_combined_exactly_in_fp32(ensemble, pairs_file):
    texts = texts_of(pairs_file)
    members = [OrchRM.load(ensemble / "members" / str(i), dtype="fp32") for i in range(K)]
    own = [[normalized(s.score, m.metadata) for s in m.score_texts(texts)] for m in members]
    scorer = load_scorer(ensemble, dtype="fp32", aggregate="min")
    assert isinstance(scorer, EnsembleScorer) and scorer.aggregate == "min"
    tokens = [s.tokens for s in members[0].score_texts(texts)]
    for how, weight in (("mean", 1.0), ("min", 1.0), ("mean_minus_std", 0.5)):
        scorer.aggregate, scorer.spread_weight = how, weight
        for i, result in enumerate(scorer.score_texts(texts)):
            values = tuple(column[i] for column in own)
            assert result.members == values
            assert result.score == combine(values, how, weight)
            assert result.mean == sum(values) / K and result.spread == spread(values)
            assert result.tokens == K * tokens[i]
    # the stored default: the worst member's, and its spread is the members' disagreement
    default = load_scorer(ensemble, dtype="fp32").score_texts(texts[:1])[0]
    assert default.score == min(default.members) < default.mean
    assert default.spread > 0


def test_the_directory_is_the_averaged_model_for_any_loader(ensemble):
    warm = load_file(ensemble / "model.safetensors")
    members = [load_file(ensemble / "members" / str(i) / "model.safetensors") for i in range(K)]
    for name in ("classifier.weight", "bert.encoder.layer.0.attention.self.query.weight"):
        mean = sum(m[name] for m in members) / K
        torch.testing.assert_close(warm[name], mean, rtol=0, atol=1e-6)
    assert AutoModelForSequenceClassification.from_pretrained(ensemble).config.num_labels == 1
    assert type(load_scorer(ensemble, aggregate="warm", dtype="fp32")) is OrchRM
    meta = json.loads((ensemble / "orchrm.json").read_text())
    entry = meta["ensemble"]
    assert entry["members"] == K and entry["seeds"] == list(range(K))
    assert entry["aggregate"] == "min" and entry["spread_weight"] == 1.0
    assert set(entry["validation_accuracy"]) == {"warm", "mean", "min", "mean_minus_std"}
    card = (ensemble / "README.md").read_text()
    assert f"ensemble of {K}" in card


def test_members_share_the_validation_split_and_draw_their_own_training_tasks(ensemble):
    metas = [
        json.loads((ensemble / "members" / str(i) / "orchrm.json").read_text()) for i in range(K)
    ]
    validation = {json.dumps(m["data"]["validation"], sort_keys=True) for m in metas}
    assert len(validation) == 1  # no member trained on a task another validates on
    assert len({m["pair_data_hash"] for m in metas}) == K  # each its own bootstrap draw
    records = [{"task_id": f"t{i // 3}", "prompt": str(i)} for i in range(30)]
    drawn = bootstrap(records, seed=1)
    counts = Counter(r["task_id"] for r in drawn)
    assert sum(counts.values()) == 30 and all(n % 3 == 0 for n in counts.values())
    assert len(counts) < 10 and bootstrap(records, seed=1) == drawn != bootstrap(records, seed=2)


def test_resume_keeps_the_finished_members(ensemble, pairs_file, capfd):
    out = ensemble.parent
    before = (ensemble / "members" / "1" / "model.safetensors").read_bytes()
    config = ensemble_config(pairs_file, out)
    train(config, resume=True, progress=False)
    err = capfd.readouterr().err
    assert err.count("is finished in") == K
    assert (ensemble / "members" / "1" / "model.safetensors").read_bytes() == before


def test_one_model_has_no_aggregate_to_choose(ensemble):
    single = ensemble / "members" / "0"
    assert type(load_scorer(single, dtype="fp32")) is OrchRM
    with pytest.raises(ConfigError, match="one model, not an ensemble"):
        load_scorer(single, aggregate="min")
    with pytest.raises(ConfigError, match="choose one of"):
        load_scorer(ensemble, aggregate="median")
    with pytest.raises(ConfigError, match="only apply to an ensemble scored here"):
        load_scorer(ensemble, "http://127.0.0.1:9/score", aggregate="min")


def test_score_command_and_evaluation_read_the_aggregate(
    ensemble, pairs_file, orchrm_cli, tmp_path
):
    plans = tmp_path / "plans.jsonl"
    write_jsonl([{"question": q, "orchestration": text} for q, text in world_plans()], plans)
    done = orchrm_cli(
        "score", str(plans), "--rm", str(ensemble), "--aggregate", "min", "--dtype", "fp32"
    )
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0, done.stderr
    assert all(r["score"] <= r["score_mean"] and r["score_spread"] >= 0 for r in rows)
    records = [json.loads(line) for line in pairs_file.read_text().splitlines()]
    metrics = evaluate_file(ensemble, pairs_file, dtype="fp32", aggregate="mean")
    scorer = load_scorer(ensemble, dtype="fp32", aggregate="mean")
    chosen = scorer.score_texts([r["prompt"] + r["chosen"] for r in records])
    rejected = scorer.score_texts([r["prompt"] + r["rejected"] for r in records])
    wins = [c.score > r.score for c, r in zip(chosen, rejected, strict=True)]
    assert metrics["pairs"] == len(records) and metrics["accuracy"] == sum(wins) / len(wins)
    # a single model given an aggregate: test_one_model_has_no_aggregate_to_choose


def test_every_served_route_says_the_spread(ensemble, pairs_file):
    records = [json.loads(line) for line in pairs_file.read_text().splitlines()][:2]
    (question, _), *_ = world_plans()
    plans = [text for _, text in world_plans()]
    scorer = load_scorer(ensemble, dtype="fp32", aggregate="mean")
    with Server(scorer, max_items=8) as server:
        status, body, _ = server.call(
            "POST", "/score", {"question": question, "orchestrations": plans}
        )
        assert status == 200
        assert {r["status"] for r in body["results"]} == {"ok"}
        for r in body["results"]:
            assert r["spread"] > 0 and math.isclose(r["score"], r["mean"])
        status, body, _ = server.call(
            "POST", "/classify", {"input": [records[0]["prompt"] + records[0]["chosen"]]}
        )
        assert status == 200 and body["data"][0]["spread"] > 0
        status, body, _ = server.call(
            "POST", "/pooling", {"input": [records[0]["prompt"] + records[0]["chosen"]]}
        )
        assert status == 200 and body["data"][0]["spread"] > 0
        status, health, _ = server.call("GET", "/healthz")
        assert health["ensemble"] == {"members": K, "aggregate": "mean", "spread_weight": 1.0}


def test_verl_reward_reads_the_aggregate_from_its_kwargs(ensemble):
    from orchrm.rl.verl_reward import compute_score

    question, text = world_plans()[0]
    extra = {"question": question}
    kwargs = {"rm_path": str(ensemble), "dtype": "fp32", "normalize": "0"}
    low = compute_score("math", text, "", extra, aggregate="min", **kwargs)
    mean = compute_score("math", text, "", extra, aggregate="mean", **kwargs)
    assert low["rm_spread"] == mean["rm_spread"] > 0 and low["score"] < mean["score"]
    # as verl's reward loop calls it: one sample a call, from many threads at once
    plans = [t for _, t in world_plans()] * 4
    alone = [compute_score("math", t, "", extra, aggregate="min", **kwargs) for t in plans]
    with ThreadPoolExecutor(8) as pool:
        together = list(
            pool.map(
                lambda t: compute_score("math", t, "", extra, aggregate="min", **kwargs), plans
            )
        )
    # the same rewards as one call at a time, up to what batching with other texts moves
    # in fp32 (the bound tests/test_frameworks_verl.py holds a single model to)
    for key in ("score", "rm_spread"):
        assert [r[key] for r in together] == pytest.approx([r[key] for r in alone], abs=1e-4)
    assert [r["rm_tokens"] for r in together] == [r["rm_tokens"] for r in alone]

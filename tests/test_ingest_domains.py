"""A diagram page's domain read from its name, and `--domain` for every adapter: records
named like MAS-Orchestra's published pages land in their benchmark's domain and are graded
with its grader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchrm.cli import app
from orchrm.jsonl import write_jsonl
from orchrm.store.adapters import diagram_domain
from orchrm.store.db import Store
from orchrm.store.ingest import ingest_file
from orchrm.world.generate import generate
from tests.samples import HIGH_DOM

PAGES = {
    "mas_r1/harmony_grpo_7b_120b_aime24.html": "aime",
    "mas_r1/harmony_grpo_7b_120b_hotpotqa.html": "hotpotqa",
    "mas_r1/harmony_grpo_7b_120b_browsecomp_plus.html": "browsecomp-plus",
    "harmony-grpo-7b-20b-BrowseComp+.html": "browsecomp-plus",
    "aime2025/harmony_grpo_7b_120b.html": "aime",
    "mas_r1/qwen2.5_20b_oss_120b_low_depth2.html": "masbench",
}


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "s.duckdb") as s:
        yield s


def page_record(source: str, question: str, output: str, truth: str, row: int = 0) -> dict:
    """A diagram-browser record as MAS-Orchestra's pages hold it (every field a string)."""
    return {
        "row": str(row),
        "step": "60",
        "question": question,
        "mas_code": "",
        "thinking": HIGH_DOM,
        "execution_output": output,
        "ground_truth": truth,
        "source": source,
    }


@pytest.mark.parametrize("source, domain", PAGES.items())
def test_a_page_name_says_its_domain(source, domain):
    assert diagram_domain(source, Path("pages.jsonl"), {}) == domain


def test_domain_option_and_file_name_come_after_the_page_name():
    neutral = "mas_r1/qwen2.5_20b_oss_120b_low_depth2.html"
    assert diagram_domain(neutral, Path("x.jsonl"), {"domain": "gpqa"}) == "gpqa"
    assert diagram_domain(neutral, Path("hotpotqa_pages.jsonl"), {}) == "hotpotqa"
    assert diagram_domain(None, Path("aime24.jsonl"), {"domain": "gpqa"}) == "gpqa"
    assert diagram_domain(None, Path("aime24.jsonl"), {}) == "aime"
    assert diagram_domain("x_aime24.html", Path("y.jsonl"), {"domain": "gpqa"}) == "aime"
    assert diagram_domain(None, Path("pages.jsonl"), {}) == "masbench"
    # a word of the name, not a piece of one
    assert diagram_domain("claime_run.html", Path("pages.jsonl"), {}) == "masbench"


def test_published_pages_land_in_their_domains_and_are_graded_there(store, tmp_path):
    path = tmp_path / "pages.jsonl"
    records = [
        # HotpotQA's grader reads a yes/no reply by its first word; MASBench's would not
        page_record(
            "mas_r1/harmony_grpo_7b_120b_hotpotqa.html",
            "Were both writers American?",
            "Yes, both were American",
            "yes",
        ),
        page_record("mas_r1/harmony_grpo_7b_120b_aime24.html", "Find 2+2.", "4.0", "4"),
        page_record(
            "mas_r1/harmony_grpo_7b_120b_browsecomp_plus.html",
            "Who wrote the report?",
            "Ada Lovelace",
            "Ada Lovelace",
        ),
        page_record("mas_r1/qwen2.5_20b_oss_120b_low_depth2.html", "Half of 14?", "7", "7"),
    ]
    write_jsonl(records, path)
    summary = ingest_file(store, path)
    assert (summary.adapter, summary.added, summary.malformed) == ("diagram", 4, 0)
    rows = store.db.execute(
        "SELECT t.question, t.domain, o.domain, e.correct FROM tasks t "
        "JOIN orchestrations o USING (task_id) JOIN executions e USING (orch_id) "
        "ORDER BY t.question"
    ).fetchall()
    assert rows == [
        ("Find 2+2.", "aime", "aime", True),
        ("Half of 14?", "masbench", "masbench", True),
        ("Were both writers American?", "hotpotqa", "hotpotqa", True),
        ("Who wrote the report?", "browsecomp-plus", "browsecomp-plus", True),
    ]


def test_ingest_domain_applies_to_records_of_every_adapter_that_name_none(tmp_path):
    """`orchrm ingest --domain`: the orchrm adapter's records without a domain take it,
    those with one keep theirs; a diagram page named for no benchmark takes it too."""
    records = generate("math", 2, 1, seed=1, progress=False).records
    first, second = records[0]["question"], records[-1]["question"]
    assert first != second
    unnamed = [
        {k: v for k, v in r.items() if k != "domain" or r["question"] != first} for r in records
    ]
    write_jsonl(unnamed, tmp_path / "runs.jsonl")
    neutral = "mas_r1/qwen2.5_20b_oss_120b_low_depth2.html"
    write_jsonl([page_record(neutral, "Half of 14?", "7", "7")], tmp_path / "pages.jsonl")
    db = tmp_path / "s.duckdb"
    env = {"HF_HUB_OFFLINE": "1", "COLUMNS": "200"}
    files = [str(tmp_path / "runs.jsonl"), str(tmp_path / "pages.jsonl")]
    args = ["ingest", *files, "--store", str(db), "--domain", "gpqa", "--json"]
    done = CliRunner(env=env).invoke(app, args)
    assert done.exit_code == 0, done.output
    assert [s["added"] for s in json.loads(done.output)] == [len(records), 1]
    with Store(db, read_only=True) as s:
        domains = dict(s.db.execute("SELECT question, domain FROM tasks").fetchall())
    assert domains == {
        first: "gpqa",
        second: records[-1]["domain"],
        "Half of 14?": "gpqa",
    }

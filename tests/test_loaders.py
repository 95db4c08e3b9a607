"""The benchmarks of orchrm.tasks.benchmarks: official files in, tasks graded by their
benchmark's rule out, through `orchrm run --benchmark` too."""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from orchrm.tasks.benchmarks.browsecomp_plus import browsecomp_correct
from orchrm.tasks.benchmarks.gpqa import INSTRUCTION as GPQA_INSTRUCTION
from orchrm.tasks.benchmarks.gpqa import gpqa_letter, gpqa_options
from orchrm.tasks.benchmarks.hotpotqa import hotpotqa_correct, hotpotqa_f1
from orchrm.tasks.benchmarks.registry import BENCHMARKS, load_benchmark, load_benchmark_corpus
from orchrm.tasks.grading import GRADERS, answer_key, grade
from tests.conftest import run_orchrm

AIME = Path(__file__).resolve().parents[2] / "shared" / "data" / "aime"

HOTPOT = [
    {
        "_id": "5a8b57f25542995d1e6f1371",
        "question": "Were Scott Derrickson and Ed Wood of the same nationality?",
        "answer": "yes",
        "type": "comparison",
        "level": "hard",
        "supporting_facts": [["Scott Derrickson", 0], ["Ed Wood", 0]],
        "context": [
            ["Scott Derrickson", ["Scott Derrickson is an American director.", " He lives in LA."]],
            ["Ed Wood", ["Edward Davis Wood Jr. was an American filmmaker."]],
        ],
    },
    {
        "_id": "5a8c7595554299585d9e36b6",
        "question": "Which city hosts the museum that holds the Mona Lisa?",
        "answer": "Paris",
        "type": "bridge",
        "level": "medium",
        "supporting_facts": [["Louvre", 0]],
        "context": [
            ["Louvre", ["The Louvre is a museum in Paris.", " It holds the Mona Lisa."]],
            ["Ed Wood", ["Edward Davis Wood Jr. was an American filmmaker."]],
        ],
    },
]

BROWSECOMP = [
    {
        "query_id": "769",
        "query": "Which painter, born in a blue house in Coyoacan, married a muralist twice?",
        "answer": "Frida Kahlo",
        "evidence_docs": [{"docid": "d1", "text": "La Casa Azul ... Coyoacan", "url": "u1"}],
        "gold_docs": [
            {"docid": "d2", "text": "Frida Kahlo married Diego Rivera twice.", "url": "u2"}
        ],
        "negative_docs": [{"docid": "d3", "text": "Diego Rivera painted murals.", "url": "u3"}],
    },
    {
        "query_id": "770",
        "query": "In which year did the band that recorded the Zebra Sessions split up?",
        "answer": "1987",
        "evidence_docs": [],
        "gold_docs": [{"docid": "d4", "text": "The Zebra Sessions band split in 1987.", "url": ""}],
        "negative_docs": [{"docid": "d3", "text": "Diego Rivera painted murals.", "url": "u3"}],
    },
]

GPQA_HEADER = ["Pre-Revision Question", "Question", "Correct Answer", "Incorrect Answer 1"]
GPQA_HEADER += ["Incorrect Answer 2", "Incorrect Answer 3", "Record ID"]
GPQA_HEADER += ["High-level domain", "Subdomain"]


def gpqa_rows(n: int) -> list[list[str]]:
    return [
        [
            "old text",
            f"Question {i}: which value, given\na two-line, comma-laden stem?",
            f"right {i}",
            f"wrong {i}a",
            f"wrong {i}b",
            f"wrong {i}c",
            f"rec{i:03d}",
            "Physics",
            "Optics",
        ]
        for i in range(n)
    ]


def write_gpqa(path: Path, rows: list[list[str]], header: list[str] = GPQA_HEADER) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_json(path: Path, value) -> Path:
    path.write_text(json.dumps(value))
    return path


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_aime_reads_the_shared_files_in_place():
    if not AIME.exists():
        pytest.skip(f"{AIME} is absent: the shared data folder is not beside this checkout")
    both = load_benchmark("aime", AIME)
    assert len(both) == 60 and {t.domain for t in both} == {"aime"}
    assert both[0].id == "2024-I-1" and both[0].answer == "204" and both[30].id == "2025-I-1"
    assert both[0].question.startswith("Every morning Aya")
    assert [t.id for t in load_benchmark("aime", AIME / "aime_2025.jsonl", limit=2)] == [
        "2025-I-1",
        "2025-I-2",
    ]
    assert grade("$\\boxed{204}$", both[0].answer, both[0].domain) is True


def test_hotpotqa_distractor_paragraphs_go_into_the_question_or_the_corpus(tmp_path):
    path = write_json(tmp_path / "hotpot_dev_distractor_v1.json", HOTPOT)
    tasks = load_benchmark("hotpotqa", path)
    assert [(t.id, t.answer, t.domain) for t in tasks] == [
        ("5a8b57f25542995d1e6f1371", "yes", "hotpotqa"),
        ("5a8c7595554299585d9e36b6", "Paris", "hotpotqa"),
    ]
    assert "Scott Derrickson: Scott Derrickson is an American director. He lives in LA." in (
        tasks[0].question
    )
    assert load_benchmark_corpus("hotpotqa", path) is None  # paragraphs are in the question
    bare = load_benchmark("hotpotqa", path, limit=1, context="corpus")
    assert len(bare) == 1 and "Paragraphs" not in bare[0].question
    corpus = load_benchmark_corpus("hotpotqa", path, context="corpus")
    # One document per distinct paragraph: "Ed Wood" appears in both records, kept once.
    assert len(corpus.documents) == 3
    assert corpus.search("Mona Lisa museum", 1)[0].title == "Louvre"


@pytest.mark.parametrize(
    ("answer", "truth", "expected"),
    [
        ("Paris", "Paris", True),
        ("paris.", "Paris", True),
        ("The Louvre", "Louvre", True),  # articles and punctuation do not count
        ("Paris, France", "Paris", False),  # exact match, not containment
        ("yes", "yes", True),
        ("Yes, both are American.", "yes", True),  # the leading yes/no decides
        ("No, they differ.", "yes", False),
        ("no", "yes", False),
        ("Yes", "Paris", False),
        (None, "Paris", False),
        ("anything", None, None),
    ],
)
def test_hotpotqa_exact_match(answer, truth, expected):
    assert hotpotqa_correct(answer, truth) is expected
    assert grade(answer, truth, "hotpotqa") is expected


def test_hotpotqa_f1_follows_the_official_script():
    assert hotpotqa_f1("Paris, France", "Paris") == pytest.approx(2 / 3)
    assert hotpotqa_f1("the Paris", "Paris") == 1.0
    assert hotpotqa_f1("yes", "no") == 0.0 and hotpotqa_f1("yes it is", "yes") == 0.0
    assert hotpotqa_f1("London", "Paris") == 0.0


def test_browsecomp_plus_queries_and_their_corpus(tmp_path):
    path = write_jsonl(tmp_path / "browsecomp_plus_decrypted.jsonl", BROWSECOMP)
    tasks = load_benchmark("browsecomp-plus", path)
    assert [(t.id, t.answer, t.domain) for t in tasks] == [
        ("769", "Frida Kahlo", "browsecomp-plus"),
        ("770", "1987", "browsecomp-plus"),
    ]
    assert tasks[0].question.startswith("Which painter")
    pooled = load_benchmark_corpus("browsecomp-plus", path)  # the records' own documents
    assert sorted(d.id for d in pooled.documents) == ["d1", "d2", "d3", "d4"]
    assert load_benchmark_corpus("browsecomp-plus", path, limit=1).search("Kahlo", 5)[0].id == "d2"
    corpus = write_jsonl(
        tmp_path / "corpus.jsonl",
        [{"docid": "x1", "text": "Zebra Sessions liner notes", "url": "https://z.example"}],
    )
    given = load_benchmark_corpus("browsecomp-plus", path, corpus=corpus)
    assert [(d.id, d.title) for d in given.search("zebra", 5)] == [("x1", "https://z.example")]
    assert load_benchmark_corpus("gpqa", path) is None


@pytest.mark.parametrize(
    ("answer", "truth", "expected"),
    [
        ("Frida Kahlo", "Frida Kahlo", True),
        ("frida kahlo.", "Frida Kahlo", True),
        ("Frida Kahlo, the Mexican painter", "Frida Kahlo", True),  # whole-word phrase
        ("Kahlo", "Frida Kahlo", False),  # part of the gold is not the gold
        ("Frida Kahlo or Diego Rivera", "Frida Kahlo", False),  # alternatives
        ("Fridakahlo", "Frida Kahlo", False),
        ("In 1987", "1987", True),
        ("1,987", "1987", True),  # numbers compare as numbers
        ("19870", "1987", False),  # whole words only
        (
            "It might be Frida Kahlo but the evidence for this from the documents is thin and "
            "several other painters match the description equally well",
            "Frida Kahlo",
            False,  # too long to be a short answer
        ),
        (None, "1987", False),
    ],
)
def test_browsecomp_short_answer_match(answer, truth, expected):
    assert browsecomp_correct(answer, truth) is expected
    assert grade(answer, truth, "browsecomp-plus") is expected


def test_gpqa_options_are_shuffled_per_record_and_seed(tmp_path):
    path = write_gpqa(tmp_path / "gpqa_diamond.csv", gpqa_rows(40))
    tasks = load_benchmark("gpqa", path)
    assert len(tasks) == 40 and tasks[0].id == "rec000" and tasks[0].domain == "gpqa"
    for i, task in enumerate(tasks):
        options = dict(re.findall(r"^\(([A-D])\) (.*)$", task.question, re.MULTILINE))
        assert options[task.answer] == f"right {i}"  # the answer letter marks the right option
        assert sorted(options.values()) == sorted(
            [f"right {i}", f"wrong {i}a", f"wrong {i}b", f"wrong {i}c"]
        )
        assert task.question.startswith(f"Question {i}: which value, given\na two-line")
        assert task.question.endswith(GPQA_INSTRUCTION)
    letters = Counter(t.answer for t in tasks)
    assert set(letters) == set("ABCD") and max(letters.values()) < 20  # not always (A)
    assert load_benchmark("gpqa", path) == tasks  # the same on every load
    other = load_benchmark("gpqa", path, seed=1)
    assert sum(a.question != b.question for a, b in zip(tasks, other, strict=True)) > 20
    # The order follows the record, not its position in the file.
    reordered = write_gpqa(tmp_path / "reordered.csv", gpqa_rows(40)[::-1])
    assert {t.id: t.question for t in load_benchmark("gpqa", reordered)} == {
        t.id: t.question for t in tasks
    }
    row = dict(zip(GPQA_HEADER, gpqa_rows(1)[0], strict=True))
    assert gpqa_options(row, 0) == gpqa_options(row, 0)


@pytest.mark.parametrize(
    ("reply", "letter"),
    [
        ("B", "B"),
        ("(B)", "B"),
        ("b", "B"),
        ("(c)", "C"),
        ("**D**", "D"),
        ("B.", "B"),
        ("B) 42 kJ/mol", "B"),
        ("(B) Vitamin A", "B"),  # a letter inside the option text is not a second choice
        ("The answer is B", "B"),
        ("The correct answer is (C).", "C"),
        ("Answer: D", "D"),
        ("option a", None),  # a bare lower-case a is a word, not a choice
        ("I would pick C", "C"),
        ("The answer is B, not A", "B"),
        ("A or B", None),
        ("A, C", None),
        ("(A) and (C)", None),
        ("B/C", None),
        ("B) 42 kJ, or C) 44 kJ", None),
        ("A careful look gives B", None),  # ambiguous: "A" may be an article or a choice
        ("the answer is a bit unclear", None),
        ("None of them", None),
        ("", None),
        (None, None),
    ],
)
def test_gpqa_letter_extraction(reply, letter):
    assert gpqa_letter(reply) == letter
    assert grade(reply, "B", "gpqa") is (letter == "B")


def test_every_benchmark_has_its_grader():
    assert set(BENCHMARKS) == {"aime", "hotpotqa", "browsecomp-plus", "gpqa"}
    for name, benchmark in BENCHMARKS.items():
        assert benchmark.name == name and GRADERS[name] is benchmark.grade
    assert answer_key("(b) because ...", "gpqa") == "B" and answer_key("B.", "aime") == "b"
    assert grade("anything", None, "gpqa") is None


@pytest.mark.parametrize(
    ("name", "file", "content", "error"),
    [
        (
            "aime",
            "a.jsonl",
            '{"id": "1", "problem": "p", "answer": 1}\n[1]\n',
            r"a.jsonl:2: .*object",
        ),
        (
            "aime",
            "a.jsonl",
            '{"id": "1", "problem": "p"}\n',
            r"a.jsonl:1: field 'answer' is missing",
        ),
        ("aime", "a.jsonl", '{"id": "1", "problem": " ", "answer": 3}\n', r"'problem' is empty"),
        (
            "aime",
            "a.jsonl",
            '{"id": "1", "problem": "p", "answer": 3}\n{"id": "1", "problem": "q", "answer": 4}\n',
            r"a.jsonl: task id '1' appears twice",
        ),
        ("hotpotqa", "h.json", '{"_id": "x"}', r"h.json: a JSON dict, not HotpotQA's list"),
        ("hotpotqa", "h.json", "[{]", r"h.json: not JSON"),
        (
            "hotpotqa",
            "h.json",
            json.dumps([HOTPOT[0], {**HOTPOT[1], "answer": 7}]),
            r"h.json: record 1 \(_id '5a8c7595554299585d9e36b6'\): field 'answer' is a int",
        ),
        (
            "hotpotqa",
            "h.json",
            json.dumps([{**HOTPOT[0], "context": [["T", "not a list"]]}]),
            r"record 0 .*context\[0\] is not \[title, \[sentences...\]\]",
        ),
        (
            "browsecomp-plus",
            "b.jsonl",
            json.dumps({"query_id": "9", "query": "q?"}) + "\n",
            r"b.jsonl:1 \(query_id '9'\): field 'answer' is missing",
        ),
        (
            "browsecomp-plus",
            "b.jsonl",
            json.dumps(
                {
                    "query_id": "9",
                    "query": "QmFzZTY0IG9iZnVzY2F0ZWQgcXVlcnkgdGV4dCBoZXJl",
                    "answer": "x",
                }
            )
            + "\n",
            r"b.jsonl:1 .*decrypt",
        ),
        (
            "gpqa",
            "g.csv",
            "Question,Correct Answer\nq,a\n",
            r"g.csv: not the GPQA CSV: no column "
            r"'Incorrect Answer 1'",
        ),
    ],
)
def test_bad_files_name_the_file_the_record_and_the_fault(tmp_path, name, file, content, error):
    path = tmp_path / file
    path.write_text(content)
    with pytest.raises(ValueError, match=error):
        load_benchmark(name, path)


def test_bad_gpqa_rows_and_missing_files(tmp_path):
    rows = gpqa_rows(3)
    rows[1][3] = "  "
    path = write_gpqa(tmp_path / "g.csv", rows)
    with pytest.raises(ValueError, match=r"g.csv: row 2 \(Record ID 'rec001'\): column "):
        load_benchmark("gpqa", path)
    with pytest.raises(ValueError, match=r"nope.csv: no such file"):
        load_benchmark("gpqa", tmp_path / "nope.csv")
    with pytest.raises(ValueError, match=r"nope.jsonl: no such file"):
        load_benchmark_corpus("browsecomp-plus", path, corpus=tmp_path / "nope.jsonl")
    with pytest.raises(ValueError, match=r"unknown benchmark 'mmlu'"):
        load_benchmark("mmlu", path)
    bad_docs = write_jsonl(tmp_path / "b.jsonl", [{**BROWSECOMP[0], "gold_docs": [{"url": "u"}]}])
    with pytest.raises(ValueError, match=r"b.jsonl:1: gold_docs entry without docid/text"):
        load_benchmark_corpus("browsecomp-plus", bad_docs)


# End to end: `orchrm run --benchmark` against the loopback stand-in of an LLM server.


def plan(agent: str) -> str:
    return (
        f"<agent><agent_id>Solve</agent_id><agent_name>{agent}</agent_name>"
        "<agent_description>Solve it.</agent_description>"
        "<required_arguments><agent_input></agent_input></required_arguments></agent>"
        "<edge></edge>"
    )


def run_benchmark(tmp_path: Path, reply, *args: str) -> tuple[list[dict], list[dict]]:
    from tests.loopback_llm import LoopbackLLM

    out = tmp_path / "run.jsonl"
    with LoopbackLLM(reply=reply) as server:
        done = run_orchrm(
            "run", *args, "--samples", "2", "--base-url", server.base_url, "--out", str(out),
            columns=120,
        )  # fmt: skip
        requests = list(server.requests)
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line) for line in out.read_text().splitlines()], requests


def test_orchrm_run_gpqa_grades_letters_through_the_cli(tmp_path):
    path = write_gpqa(tmp_path / "gpqa_diamond.csv", gpqa_rows(3))

    def reply(request: dict) -> str:
        system, user = (m["content"] for m in request["messages"][:2])
        if system.startswith("You design"):
            return plan("CoTAgent")
        right = re.search(r"^\(([A-D])\) right", user, re.MULTILINE).group(1)
        return f"Reasoning ...\nAnswer: The answer is ({right})"

    records, _ = run_benchmark(tmp_path, reply, "--benchmark", "gpqa", "--tasks", str(path))
    assert len(records) == 6 and {r["domain"] for r in records} == {"gpqa"}
    tasks = {t.id: t for t in load_benchmark("gpqa", path)}
    for r in records:
        assert r["answer"] == f"The answer is ({tasks[r['task_id']].answer})"
        assert r["ground_truth"] == tasks[r["task_id"]].answer and r["correct"] is True


def test_orchrm_run_browsecomp_plus_searches_the_records_documents(tmp_path):
    path = write_jsonl(tmp_path / "browsecomp_plus_decrypted.jsonl", BROWSECOMP)

    def reply(request: dict) -> str:
        system, user = (m["content"] for m in request["messages"][:2])
        if system.startswith("You design"):
            return plan("WebSearchAgent")
        if system.startswith("You research"):
            return "SEARCH: Frida Kahlo Diego Rivera" if "(nothing yet)" in user else "DONE"
        found = "Frida Kahlo married Diego Rivera twice." in user
        return "Answer: Frida Kahlo, the painter" if found else "Answer: unknown"

    records, requests = run_benchmark(
        tmp_path, reply, "--benchmark", "browsecomp-plus", "--tasks", str(path), "--limit", "1"
    )
    assert len(records) == 2 and all(r["task_id"] == "769" for r in records)
    assert all(r["answer"] == "Frida Kahlo, the painter" and r["correct"] for r in records)
    steps = Counter(c["step"] for r in records for c in r["execution"]["calls"])
    assert steps == {"search": 4, "summary": 2}
    # The orchestrator saw the query, never the answer.
    orchestrator = [q for q in requests if q["messages"][0]["content"].startswith("You design")]
    assert len(orchestrator) == 2 and "Coyoacan" in orchestrator[0]["messages"][1]["content"]
    assert not any("Frida" in m["content"] for q in orchestrator for m in q["messages"])


def test_a_kept_answer_key_is_the_one_computed_anew():
    """`answer_key` keeps the keys of short answers; long ones are computed each time,
    and both give what the graders' own parsing gives."""
    from orchrm.tasks.grading import KEY_CACHE_CHARS, _key

    answers = ["1,000", "1000.", "$\\frac{3}{4}$", "Paris.", " paris", "(b) because"]
    answers.append("x" * (KEY_CACHE_CHARS + 1) + " 42")
    for domain in ("", "math", "gpqa"):
        for answer in answers:
            assert answer_key(answer, domain) == _key(answer, domain)
            assert answer_key(answer, domain) == answer_key(answer, domain)
    assert answer_key("1,000") == answer_key("1000.") == "#1000"

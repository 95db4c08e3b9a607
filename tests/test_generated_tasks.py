"""The generated exact-answer tasks (orchrm.tasks.benchmarks.generated): drawn the same
from the same seed, answers that are right, graded by their grader, written and read
back; the retrieval tasks' passages, which BM25 finds for their questions; the template
orchestrators that write plans for them, run through `run_tasks` with a scripted backend
in place of the LLM (orchrm.world.templates, orchrm.runtime.routing); and the real-exec
benchmark's task mix (orchrm.experiments.real_exec.settings)."""

from __future__ import annotations

import asyncio
import re
from collections import Counter

import pytest

from orchrm.errors import ConfigError, InputError, MissingInput
from orchrm.experiments.real_exec.settings import MIX
from orchrm.orchestration import to_harmony
from orchrm.parse import parse_harmony
from orchrm.runtime.config import RunConfig
from orchrm.runtime.retrieval import load_corpus
from orchrm.runtime.routing import RoutingBackend
from orchrm.tasks.benchmarks.generated import (
    ARITHMETIC_KINDS,
    COUNTRIES,
    DOMAIN,
    EVERY_CELL,
    LEVELS,
    RETRIEVAL_KINDS,
    TASK_KINDS,
    TOWNS,
    corpus,
    grade,
    load,
    make_tasks,
    save_corpus,
    save_tasks,
    split_tasks,
    world_corpus,
)
from orchrm.tasks.grading import grade as grade_by_domain
from orchrm.tasks.run import run_tasks
from orchrm.tasks.task import load_tasks, question_key
from orchrm.world.templates import (
    PREFERRED,
    STRUCTURES,
    TemplateOrchestrator,
    single_plan,
    structure_of,
)
from tests.scripted_backend import ScriptedBackend

ARITHMETIC_CELLS = tuple(c for c in EVERY_CELL if c[0] in ARITHMETIC_KINDS)
RETRIEVAL_CELLS = tuple(c for c in EVERY_CELL if c[0] in RETRIEVAL_KINDS)


def _questions(tasks) -> list[str]:
    return [t.task.question for t in tasks]


def test_the_same_seed_draws_the_same_tasks_and_another_seed_others():
    first = make_tasks(EVERY_CELL, 42, 0, "train")
    assert first == make_tasks(EVERY_CELL, 42, 0, "train")
    assert _questions(first) != _questions(make_tasks(EVERY_CELL, 42, 1, "train"))
    assert _questions(first) != _questions(make_tasks(EVERY_CELL, 42, 0, "test"))


@pytest.mark.parametrize("seed", [0, 1, 5, 11])
@pytest.mark.parametrize(
    ("train", "test"),
    [(56, 140), (6, 6), (28, 28), (7, 4)],  # real-exec full and quick, GRPO full and quick
)
def test_training_and_held_out_tasks_share_no_question_and_repeat_none(seed, train, test):
    split = split_tasks(MIX, {"train": train, "test": test}, seed)
    keys = {
        part: [question_key(t.task.question) for t in tasks] for part, tasks in split.parts.items()
    }
    assert all(len(set(k)) == len(k) for k in keys.values())  # distinct within each part
    assert not set(keys["train"]) & set(keys["test"])  # disjoint between them
    assert len(split["train"]) == train  # the training part is drawn first, in full
    assert split["train"] == make_tasks(MIX, train, seed, "train")  # its own stream
    short = {(s.part, s.cell): s for s in split.short}
    if train + test > 2 * len(MIX) * 8:  # mul1 has 16 questions: the held-out part shrinks
        s = short[("test", ("mul", 1))]
        assert (s.asked, s.got, s.distinct) == (20, 8, 16) and len(split["test"]) == 128
        assert "8 of the 20 mul1 tasks asked" in split.lines()[-1]
    else:
        assert not short and len(split["test"]) == test


def test_a_cell_that_runs_out_shrinks_loudly_and_a_part_left_empty_is_refused():
    split = split_tasks((("mul", 1), ("add", 1)), {"a": 30, "b": 10}, 3)
    by_cell = Counter((t.kind, t.level) for part in split.parts.values() for t in part)
    assert by_cell[("mul", 1)] == 16  # every product of 2..5 by 2..5, once
    assert [(s.part, s.asked, s.got, s.distinct) for s in split.short] == [("b", 5, 1, 16)]
    assert split.sizes() == {"a": 30, "b": 6} and "b: 1 of the 5 mul1" in split.lines()[-1]
    assert question_key("What is  2 + 6 ?") == question_key("what is 2 + 6 ?")
    assert question_key("What is 2 + 6?") != question_key("What is 2 * 6?")
    with pytest.raises(ConfigError, match="no task left for 'b'"):
        split_tasks((("mul", 1),), {"a": 16, "b": 3}, 0)


def test_tasks_cycle_through_the_cells_with_distinct_questions_and_ids():
    cells = (("add", 1), ("compare", 3), ("count", 2))
    tasks = make_tasks(cells, 21, 7, "cal")
    assert [(t.kind, t.level) for t in tasks] == [cells[i % 3] for i in range(21)]
    assert [t.task.id for t in tasks][:3] == ["cal-000-add1", "cal-001-compare3", "cal-002-count2"]
    assert len(set(_questions(tasks))) == 21  # 8 words: room for 7 count2 questions
    assert {t.task.domain for t in tasks} == {DOMAIN}


def _solve(question: str) -> int:
    """The answer of a generated question, worked out from its text alone."""
    if m := re.fullmatch(r"What is ([\d +*()-]+)\?", question):
        return eval(m.group(1))  # digits, spaces and + - * ( ) only
    if m := re.fullmatch(r"(\w+) has (\d+) \w+ and gets (\d+) more\..*", question):
        return int(m.group(2)) + int(m.group(3))
    if m := re.fullmatch(
        r"\w+ has (\d+) \w+, gets (\d+) more, then gives away (\d+)\..*", question
    ):
        return int(m.group(1)) + int(m.group(2)) - int(m.group(3))
    numbers = [int(x) for x in re.findall(r"\d+", question)]
    if "larger" in question or "largest" in question:
        return max(numbers)
    if "smallest" in question:
        return min(numbers)
    if m := re.fullmatch(r"How many letters are in the word '(\w+)'\?", question):
        return len(m.group(1))
    m = re.fullmatch(r"How many times does the letter '(\w)' appear in '(\w+)'\?", question)
    assert m, question
    return m.group(2).count(m.group(1))


def test_every_arithmetic_kind_and_level_has_the_right_answer():
    tasks = make_tasks(ARITHMETIC_CELLS, 5 * len(ARITHMETIC_CELLS), 3, "check")
    for t in tasks:
        assert int(t.task.answer) == _solve(t.task.question), t
        assert t.documents == ()


def _read(question: str, passages: list[str]) -> str:
    """The answer of a retrieval question, worked out from the text of its needed
    passages alone."""
    text = " ".join(passages)
    if question.startswith("What is the"):
        capital = re.search(r"The capital of \w+ is (\w+)\.", text)
        port = re.search(r"The largest port of \w+ is (\w+)\.", text)
        return port.group(1) if "largest port of the" in question else capital.group(1)
    founded = re.search(r"founded in (\d+)", text)
    charter = re.search(r"charter in (\d+)", text)
    if question.startswith("How many years"):
        return str(int(charter.group(1)) - int(founded.group(1)))
    return (charter or founded).group(1)


def _needed(t) -> int:
    return 2 if t.level == 3 else 1


def test_retrieval_tasks_are_the_same_from_the_same_seed_and_their_passages_answer_them():
    tasks = make_tasks(RETRIEVAL_CELLS, 10 * len(RETRIEVAL_CELLS), 5, "cal")
    assert tasks == make_tasks(RETRIEVAL_CELLS, 10 * len(RETRIEVAL_CELLS), 5, "cal")
    assert _questions(tasks) != _questions(make_tasks(RETRIEVAL_CELLS, len(tasks), 6, "cal"))
    texts: dict[str, str] = {}
    for t in tasks:
        needed = t.documents[: _needed(t)]
        assert len(t.documents) == 2 + 3 and len({d.id for d in t.documents}) == 5
        assert _read(t.task.question, [d.text for d in needed]) == t.task.answer, t
        assert all(t.task.answer not in d.text for d in t.documents[_needed(t) :])
        for d in t.documents:  # one text per passage, whichever task carries it
            assert texts.setdefault(d.id, d.text) == d.text
    pooled = {d.id for d in corpus(tasks).documents}
    assert pooled == {d.id for t in tasks for d in t.documents}
    every = {d.id: d.text for d in world_corpus().documents}  # a superset, the same texts
    assert len(every) == 2 * (len(COUNTRIES) + len(TOWNS)) and texts.items() <= every.items()


@pytest.mark.parametrize("pooled", [True, False], ids=["tasks-passages", "every-passage"])
def test_bm25_finds_the_passages_a_question_needs_first(pooled):
    tasks = make_tasks(RETRIEVAL_CELLS, 12 * len(RETRIEVAL_CELLS), 0, "test")
    retriever = corpus(tasks) if pooled else world_corpus()
    k = RunConfig().search_k
    assert len(retriever.documents) > 10 * k
    for t in tasks:
        found = [d.id for d in retriever.search(t.task.question, k)]
        first = t.documents[:1] if t.kind == "capital" else t.documents[: _needed(t)]
        assert found[0] in {d.id for d in first}, (t.task.question, found)
        if (t.kind, t.level) == ("capital", 3):  # the second hop: the republic found first
            found = [d.id for d in retriever.search(f"capital of {t.documents[0].title}", k)]
        assert {d.id for d in t.documents[: _needed(t)]} <= set(found), (t.task.question, found)


@pytest.mark.parametrize(
    ("reply", "truth", "right"),
    [
        ("Ashford", "Ashford", True),
        ("ashford.", "Ashford", True),
        ("The capital of Valdoria is Ashford.", "Ashford", True),
        ("Belwick", "Ashford", False),
        ("Ashford or Belwick", "Ashford", False),
        ("The capital is Ashford and the largest port is Belwick.", "Ashford", False),
        ("Ashford " + "and so on " * 5, "Ashford", False),
        ("I do not know.", "Ashford", False),
        (None, "Ashford", False),
        ("Answer: 1743", "1743", True),
        ("It was founded in 1743.", "1743", True),
        ("1744", "1743", False),
    ],
)
def test_the_grader_takes_the_named_place_or_year_and_refuses_others(reply, truth, right):
    assert bool(grade(reply, truth)) is right
    assert bool(grade_by_domain(reply, truth, DOMAIN)) is right


def test_a_search_plan_reaches_the_answer_through_the_corpus_and_cot_does_not():
    tasks = make_tasks(RETRIEVAL_CELLS[:2], 4, 0, "run")
    truth = {t.task.question: t.task.answer for t in tasks}

    def reply(messages, call):
        content = messages[-1]["content"]
        if call.step == "search":
            question = content.split("\n")[1]
            return "DONE" if "Search:" in content else f"SEARCH: {question}"
        task = next(q for q in truth if q in content)
        return f"Answer: {truth[task] if truth[task] in content.split(task)[-1] else 'unknown'}"

    def run(structure: str, retriever):
        backend = RoutingBackend(
            ScriptedBackend(reply), _Fixed(structure), {t.task.id: t for t in tasks}
        )
        records = asyncio.run(
            run_tasks([t.task for t in tasks], backend, samples=1, config=RunConfig(),
                      retriever=retriever, progress=False)
        )  # fmt: skip
        return [r["correct"] for r in records]

    assert run("search", corpus(tasks)) == [True] * 4
    assert run("search", None) == [False] * 4
    assert run("cot", corpus(tasks)) == [False] * 4


class _Fixed:
    """A plan writer that writes the one plan of `structure` for every task."""

    name = "fixed"

    def __init__(self, structure: str):
        self.text = to_harmony(single_plan(structure))

    def write(self, task, sample: int) -> tuple[str, float]:
        return self.text, 0.0


@pytest.mark.parametrize(
    ("reply", "right"),
    [
        ("Answer: 42", True),
        ("42", True),
        ("The sum is 42.0", True),
        ("Answer: 41", False),
        ("I cannot tell.", False),
        (None, False),
    ],
)
def test_the_grader_takes_the_right_number_and_refuses_others(reply, right):
    assert bool(grade(reply, "42")) is right
    assert bool(grade_by_domain(reply, "42", DOMAIN)) is right


def test_saved_tasks_load_back_and_read_as_a_plain_task_file(tmp_path):
    tasks = make_tasks(EVERY_CELL, 2 * len(EVERY_CELL), 0, "test")
    path = save_tasks(tasks, tmp_path / "tasks.jsonl")
    assert load(path) == tasks
    assert load_tasks(path) == [t.task for t in tasks]
    searched = load_corpus(save_corpus(tasks, tmp_path / "corpus.jsonl"))
    assert searched.documents == corpus(tasks).documents


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ('{"id": "a", "question": "q", "answer": "1", "kind": "add"}\n', "'level' is missing"),
        ('{"id": "a", "question": "q", "answer": "1", "kind": "root", "level": 1}\n', "root"),
        ('{"id": "a", "question": "q", "answer": "1", "kind": "add", "level": 4}\n', "level 4"),
        ('{"id": "a", "question": "q", "answer": "1", "kind": "add", "level": 1}\n' * 2, "twice"),
        (
            '{"id": "a", "question": "q", "answer": "1", "kind": "capital", "level": 1, '
            '"documents": [{"title": "t"}]}\n',
            "passages",
        ),
    ],
)
def test_a_bad_task_file_names_its_line(tmp_path, content, error):
    path = tmp_path / "tasks.jsonl"
    path.write_text(content)
    with pytest.raises(InputError, match=error):
        load(path)
    with pytest.raises(MissingInput):
        load(tmp_path / "none.jsonl")


def test_template_plans_run_through_the_real_run_path_and_name_their_structure():
    tasks = make_tasks(EVERY_CELL, 14, 0, "run")
    truth = {t.task.question: t.task.answer for t in tasks}
    server = ScriptedBackend(
        lambda messages, call: f"Answer: {truth.get(messages[-1]['content'], 'none')}"
    )
    writer = TemplateOrchestrator("specialized", specialized=True, follow=1.0)
    backend = RoutingBackend(server, writer, {t.task.id: t for t in tasks})
    records = asyncio.run(
        run_tasks([t.task for t in tasks], backend, samples=3, orchestrator="specialized",
                  config=RunConfig(sc_samples=2), progress=False)
    )  # fmt: skip
    assert len(records) == 3 * len(tasks)
    kinds = {t.task.id: t.kind for t in tasks}
    for r in records:
        assert r["orchestration"] is not None and r["violations"] == [], r["raw"]
        assert r["orchestrator_tokens"] == {"prompt": 0, "completion": 0}
        task = next(t for t in tasks if t.task.id == r["task_id"])
        text, logprob = writer.write(task, r["sample_index"])
        assert r["raw"] == text and r["orchestrator_logprob"] == pytest.approx(logprob)
        structure = structure_of(r)
        assert structure in PREFERRED[kinds[r["task_id"]]]  # follow=1: always preferred
        assert parse_harmony(text).to_dict() == r["orchestration"]
    assert {c.role for _, c in server.calls} == {"subagent"}
    assert any(r["correct"] for r in records)


def test_the_base_template_draws_every_structure():
    tasks = make_tasks(EVERY_CELL, 21, 0, "base")
    writer = TemplateOrchestrator("base", specialized=False)
    drawn = set()
    for t in tasks:
        for sample in range(4):
            plan = parse_harmony(writer.write(t, sample)[0])
            drawn.add(structure_of({"orchestration": plan.to_dict()}))
    assert drawn == set(STRUCTURES)


def test_the_mix_and_the_preferences_name_existing_kinds_and_structures():
    assert MIX and set(MIX) <= set(EVERY_CELL)
    assert len(set(MIX)) == len(MIX)
    assert {kind for kind, _ in MIX} & set(RETRIEVAL_KINDS)  # the retrieval domain is in it
    assert set(PREFERRED) == set(TASK_KINDS)
    for kind, structures in PREFERRED.items():
        assert structures and set(structures) <= set(STRUCTURES), kind
    assert set(LEVELS) == {level for _, level in EVERY_CELL}

"""The generated exact-answer tasks (orchrm.tasks.benchmarks.generated): drawn the same
from the same seed, answers that are right, graded by the math grader, written and read
back; and the template orchestrators that write plans for them, run through
`run_tasks` with a scripted backend in place of the LLM (orchrm.world.templates,
orchrm.runtime.routing)."""

from __future__ import annotations

import asyncio
import re

import pytest

from orchrm.errors import InputError, MissingInput
from orchrm.parse import parse_harmony
from orchrm.runtime.config import RunConfig
from orchrm.runtime.routing import RoutingBackend
from orchrm.tasks.benchmarks.generated import (
    DOMAIN,
    EVERY_CELL,
    grade,
    load,
    make_tasks,
    save_tasks,
)
from orchrm.tasks.grading import grade as grade_by_domain
from orchrm.tasks.run import run_tasks
from orchrm.tasks.task import load_tasks
from orchrm.world.templates import PREFERRED, STRUCTURES, TemplateOrchestrator, structure_of
from tests.scripted_backend import ScriptedBackend


def _questions(tasks) -> list[str]:
    return [t.task.question for t in tasks]


def test_the_same_seed_draws_the_same_tasks_and_another_seed_others():
    first = make_tasks(EVERY_CELL, 42, 0, "train")
    assert first == make_tasks(EVERY_CELL, 42, 0, "train")
    assert _questions(first) != _questions(make_tasks(EVERY_CELL, 42, 1, "train"))
    assert _questions(first) != _questions(make_tasks(EVERY_CELL, 42, 0, "test"))


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


def test_every_kind_and_level_has_the_right_answer():
    tasks = make_tasks(EVERY_CELL, 5 * len(EVERY_CELL), 3, "check")
    for t in tasks:
        assert int(t.task.answer) == _solve(t.task.question), t


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
    tasks = make_tasks(EVERY_CELL, 10, 0, "test")
    path = save_tasks(tasks, tmp_path / "tasks.jsonl")
    assert load(path) == tasks
    assert load_tasks(path) == [t.task for t in tasks]


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ('{"id": "a", "question": "q", "answer": "1", "kind": "add"}\n', "'level' is missing"),
        ('{"id": "a", "question": "q", "answer": "1", "kind": "root", "level": 1}\n', "root"),
        ('{"id": "a", "question": "q", "answer": "1", "kind": "add", "level": 4}\n', "level 4"),
        ('{"id": "a", "question": "q", "answer": "1", "kind": "add", "level": 1}\n' * 2, "twice"),
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

"""Edits of an orchestration (`orchrm.orchestration.edits`): every edit of every plan the
world's orchestrators write obeys the graph rules and reads back from harmony XML, and
each kind rewires edges, references, the sink and the answer as it says."""

from __future__ import annotations

import itertools

import pytest

from orchrm.orchestration import Agent, DoM, Edge, Orchestration, to_harmony, validate
from orchrm.orchestration.edits import EDITS, _register, neighbours
from orchrm.parse import ParseError, parse_harmony
from orchrm.world.orchestrators import orchestrators
from orchrm.world.tasks import PRESETS, generate_tasks


def _world_plans() -> list[Orchestration]:
    """The valid plans both world orchestrators write for a few tasks of every preset,
    high and low DoM."""
    plans = []
    for preset in PRESETS:
        for task in generate_tasks(preset, 4, seed=3):
            for writer in orchestrators(3).values():
                for sample, dom in itertools.product(range(6), ("high", "low")):
                    try:
                        o = parse_harmony(writer.write(task, sample, dom)[0])
                    except ParseError:
                        continue
                    if not validate(o):
                        plans.append(o)
    return list(dict.fromkeys(plans))


PLANS = _world_plans()


def test_the_world_plans_cover_every_shape():
    assert len(PLANS) > 100
    assert {o.dom for o in PLANS} == {DoM.LOW, DoM.HIGH}
    assert max(len(o.agents) for o in PLANS) >= 3


@pytest.mark.parametrize("kind", sorted(EDITS))
def test_every_edit_of_every_world_plan_is_valid_and_reads_back(kind):
    made = 0
    for o in PLANS:
        for edit in EDITS[kind](o):
            made += 1
            assert edit.kind == kind
            assert validate(edit.plan) == [], (edit.what, validate(edit.plan))
            assert parse_harmony(to_harmony(edit.plan)) == edit.plan, edit.what
    assert made > 0, f"{kind} applies to no world plan"


def test_two_edits_in_a_row_stay_valid():
    for o in PLANS[::10]:
        for first in neighbours(o)[::7]:
            for second in neighbours(first.plan):
                assert validate(second.plan) == [], (first.what, second.what)


def _chain() -> Orchestration:
    return Orchestration(
        (
            Agent("Setup", "CoTAgent", input="Restate the task."),
            Agent("Solve", "CoTAgent", input="Using ${Setup}, solve the original task."),
            Agent("Check", "ReflexionAgent", input="Check ${Solve} and give the final answer."),
        ),
        (Edge("Setup", "Solve"), Edge("Solve", "Check")),
    )


def _made(kind: str, o: Orchestration, what: str) -> Orchestration:
    return next(e.plan for e in EDITS[kind](o) if e.what == what)


def test_remove_rewires_readers_to_the_removed_agents_inputs():
    o = _made("remove", _chain(), "Solve removed")
    assert [a.id for a in o.agents] == ["Setup", "Check"]
    assert o.edges == (Edge("Setup", "Check"),)
    assert o.agent("Check").input == "Check ${Setup} and give the final answer."
    source_gone = _made("remove", _chain(), "Setup removed")
    assert source_gone.agent("Solve").input == "Using the question, solve the original task."
    assert _made("remove", _chain(), "Check removed").sink == "Solve"


def test_insert_step_wraps_an_inner_agent():
    o = _made("insert_step", _chain(), "DebateAgent Setup_review reviews Setup")
    review = o.agent("Setup_review")
    assert review.input == "Review ${Setup} and give a corrected result."
    assert review.debate_roles == ("Solver", "Critic")
    assert o.agent("Solve").input == "Using ${Setup_review}, solve the original task."
    assert set(o.edges) == {
        Edge("Setup", "Setup_review"),
        Edge("Setup_review", "Solve"),
        Edge("Solve", "Check"),
    }


def test_a_low_dom_plan_that_grows_becomes_a_graph_answering_from_its_new_sink():
    low = Orchestration(
        (Agent("answer_out", "CoTAgent", output_id="answer_out"),), (), DoM.LOW, "", "answer_out"
    )
    o = _made("add_checker", low, "ReflexionAgent Check checks answer_out")
    assert (o.dom, o.sink, o.answer) == (DoM.HIGH, "Check", "Check")
    assert o.agent("answer_out").output_id is None
    assert _made("retype", low, "answer_out: CoTAgent -> SCAgent").dom == DoM.LOW


def test_split_of_the_sink_reconciles_the_twins():
    one = Orchestration((Agent("Solver", "CoTAgent"),))
    o = _made("split", one, "Solver split with SCAgent Solver_alt")
    assert o.sink == "Reconcile"
    assert o.agent("Reconcile").references() == ["Solver", "Solver_alt"]
    inner = _made("split", _chain(), "Solve split with SCAgent Solve_alt")
    assert inner.agent("Check").references() == ["Solve", "Solve_alt"]
    assert Edge("Setup", "Solve_alt") in inner.edges


def test_merge_sends_the_readers_of_one_branch_to_the_other():
    fan = Orchestration(
        (
            Agent("Path_A", "CoTAgent"),
            Agent("Path_B", "SCAgent"),
            Agent("Reconcile", "CoTAgent", input="Compare ${Path_A} with ${Path_B}."),
        ),
        (Edge("Path_A", "Reconcile"), Edge("Path_B", "Reconcile")),
    )
    o = _made("merge", fan, "Path_B merged into Path_A")
    assert [a.id for a in o.agents] == ["Path_A", "Reconcile"]
    assert o.agent("Reconcile").references() == ["Path_A"]


def test_neighbours_are_distinct_within_the_size_and_none_for_an_invalid_plan():
    o = _chain()
    every = neighbours(o)
    assert len({e.plan for e in every}) == len(every) and o not in {e.plan for e in every}
    assert all(len(e.plan.agents) <= 3 for e in neighbours(o, max_agents=3))
    assert neighbours(o, max_agents=2) == []  # already beyond the size: left as it is
    assert {e.kind for e in neighbours(o, ("retype",))} == {"retype"}
    broken = Orchestration((Agent("A", "CoTAgent", input="${B}"),))
    assert neighbours(broken) == []
    assert neighbours(Orchestration(answer="42")) == []


def test_a_kind_is_registered_once():
    with pytest.raises(ValueError, match="'retype' is registered twice"):
        _register("retype")(lambda o: [])

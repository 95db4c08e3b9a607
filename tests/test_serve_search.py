# ruff: noqa: F811  (the fixtures imported from tests.test_serve are these tests' parameters)
"""`orchrm-search` on `orchrm serve`'s `/select`, over the real loopback server of
tests/test_serve.py (the offline MiniLM saved untrained, scoring in fp32): the served
search edits the request's orchestrations, scores the edits in the micro-batcher and
answers what the same search answers here on the same model."""

from __future__ import annotations

import pytest

from orchrm.parse import parse_harmony
from orchrm.selection.search import PlanSearch
from orchrm.selection.selectors import Candidate, CandidateSet, RewardModelSelector
from tests.test_serve import BROKEN, Server, rm, rm_dir, world  # noqa: F401 (fixtures)


@pytest.fixture(scope="module")
def search_server(rm):
    with Server(rm, invalid_penalty=-7.5, max_items=16) as s:
        yield s


def _here(rm, question: str, texts: list[str], **settings):
    plans = []
    for text in texts:
        try:
            plans.append(parse_harmony(text))
        except Exception:
            plans.append(None)
    task = CandidateSet("request", question, tuple(Candidate(p) for p in plans))
    return PlanSearch([RewardModelSelector(rm)], [rm.info], **settings)(task)


def _edited_request(rm, world) -> tuple[str, list[str]]:
    """The first request of the world's plans (a broken one, then four) whose search
    here keeps an edit over the plans as written: whether one does depends on the
    model's weights, so the request is looked for rather than fixed."""
    for start in range(len(world) - 3):
        question = world[start][0]
        texts = [BROKEN] + [t for _, t in world[start : start + 4]]
        if _here(rm, question, texts, budget=6, cost_weight=0.0).best.edits:
            return question, texts
    raise AssertionError("no request of the world's plans is edited by the search here")


def test_the_served_search_answers_what_the_search_answers_here(search_server, rm, world):
    question, texts = _edited_request(rm, world)
    options = {"search_budget": 6, "cost_weight": 0.0}
    body = {"question": question, "orchestrations": texts, "selector": "orchrm-search"}
    status, out, _ = search_server.call("POST", "/select", {**body, "selector_options": options})
    assert status == 200, out
    found = _here(rm, question, texts, budget=6, cost_weight=0.0)
    assert out["selector"] == "orchrm-search"
    assert out["selection_scores"][0] is None  # the unparseable one
    expected = [None if n is None else n.objective for n in found.candidates]
    assert out["selection_scores"] == pytest.approx(expected, abs=1e-3)
    assert out["tokens"] == found.tokens > sum(r["tokens"] for r in out["results"])
    assert out["chosen"] == found.best.origin and found.scored == 6
    assert parse_harmony(out["plan"]) == found.best.plan
    assert out["edits"] == list(found.best.edits) and out["executed"] == []
    status, plain, _ = search_server.call("POST", "/select", {**body, "selector": "orchrm"})
    assert plain["plan"] is None and plain["edits"] == []
    assert plain["tokens"] == sum(r["tokens"] for r in plain["results"])


def test_a_search_budget_past_max_items_or_not_whole_is_a_422(search_server, world):
    body = {
        "question": world[0][0],
        "orchestrations": [world[0][1], world[1][1]],
        "selector": "orchrm-search",
    }
    for options, code, says in (
        ({"search_budget": 17}, "invalid_value", "over max_items (16)"),
        ({"search_budget": 2.5}, "wrong_type", "must be a whole number, got number"),
        ({"search_beam": True}, "wrong_type", "must be a whole number, got boolean"),
    ):
        status, out, _ = search_server.call(
            "POST", "/select", {**body, "selector_options": options}
        )
        assert status == 422, out
        assert out["error"] == code and says in out["message"], out
    status, out, _ = search_server.call("POST", "/select", {**body, "selector": "nope"})
    assert status == 422 and "orchrm-search" in out["message"]

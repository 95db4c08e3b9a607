# ruff: noqa: F811  (the fixtures imported from tests.test_serve are these tests' parameters)
"""`orchrm serve`'s calibrated P(correct) on /score and /select's registry selectors, over
the real loopback server of tests/test_serve.py (the offline MiniLM saved untrained:
arbitrary but deterministic scores). Each served choice is checked against the same
selector of the registry run here on the same model."""

from __future__ import annotations

import dataclasses

import pytest

from orchrm.calibration.methods import PlattCalibration, calibration_from_metadata
from orchrm.parse import ParseError, parse_harmony
from orchrm.selection.cost import predict_cost
from orchrm.selection.options import SelectorOptions
from orchrm.selection.registry import LineupInputs, line_up
from orchrm.selection.selectors import Candidate, CandidateSet
from orchrm.serve.select import SERVED
from tests.test_serve import BROKEN, Server, rm, rm_dir, world  # noqa: F401 (fixtures)

PLATT = PlattCalibration(a=3.0, b=-0.5)


@pytest.fixture(scope="module")
def calibrated(rm):
    """The same model with a calibration and reward statistics in its `orchrm.json`."""
    scores = [r.score for r in rm.score_texts(["one", "two words", "three more words"])]
    metadata = {**rm.metadata, "calibration": PLATT.to_dict(), "reward_std": 0.01}
    return dataclasses.replace(rm, metadata={**metadata, "reward_mean": min(scores)})


@pytest.fixture(scope="module")
def plain_server(rm):
    with Server(rm, invalid_penalty=-7.5, max_items=16) as s:
        yield s


@pytest.fixture(scope="module")
def calibrated_server(calibrated):
    with Server(calibrated, invalid_penalty=-7.5, max_items=16) as s:
        yield s


def _plan(text: str):
    try:
        return parse_harmony(text)
    except ParseError:
        return None


def here(model, name: str, question: str, texts, answers=None, **options):
    """What the registry's `name` picks when it runs here, on `model` itself."""
    answers = answers or [None] * len(texts)
    candidates = tuple(
        Candidate(_plan(t), answer=a, orch_id=str(i))
        for i, (t, a) in enumerate(zip(texts, answers, strict=True))
    )
    selector = line_up(LineupInputs(rm=model, options=SelectorOptions(**options)))[name]
    return selector(CandidateSet("t", question, candidates))


def test_score_gives_p_correct_from_the_models_calibration(plain_server, calibrated_server, world):
    question = world[0][0]
    texts = [world[0][1], BROKEN, world[1][1]]
    body = {"question": question, "orchestrations": texts}
    status, plain, _ = plain_server.call("POST", "/score", body)
    assert status == 200 and [r["p_correct"] for r in plain["results"]] == [None] * 3
    status, out, _ = calibrated_server.call("POST", "/score", body)
    assert status == 200
    got = [r["p_correct"] for r in out["results"]]
    assert got[1] is None  # unparseable: no score of the model to calibrate
    for i in (0, 2):
        assert got[i] == pytest.approx(PLATT.probability([out["results"][i]["score"]])[0])
        assert 0.0 < got[i] < 1.0
    assert got[0] != pytest.approx(got[2])
    assert [r["score"] for r in out["results"]] == [r["score"] for r in plain["results"]]
    status, selected, _ = calibrated_server.call("POST", "/select", body)
    assert [r["p_correct"] for r in selected["results"]] == got
    assert calibrated_server.call("GET", "/healthz")[1]["calibration"] == "platt"
    assert plain_server.call("GET", "/healthz")[1]["calibration"] is None


def test_every_served_selector_picks_what_the_registry_picks_here(
    plain_server, calibrated_server, rm, calibrated, world
):
    question = world[0][0]
    texts = [BROKEN] + [t for _, t in world[:7]]
    answers = [None, "7", "8", "8", "7", "9", "8", "7"]
    for server, model in ((plain_server, rm), (calibrated_server, calibrated)):
        assert calibration_from_metadata(model.metadata) == (PLATT if model is calibrated else None)
        for name in SERVED:
            body = {"question": question, "orchestrations": texts, "selector": name}
            body["answers"] = answers
            status, out, _ = server.call("POST", "/select", body)
            assert status == 200, out
            expected = here(model, name, question, texts, answers)
            assert out["selector"] == name and out["chosen"] == expected.index, name
            assert out["executed"] == list(expected.executed), name
            assert out["drawn"] == (expected.drawn or len(texts)), name
            assert out["selection_scores"] == pytest.approx(list(expected.scores), abs=1e-3)
            assert out["tokens"] == sum(r["tokens"] for r in out["results"])


def test_the_votes_read_the_answers_and_the_others_do_not(plain_server, rm, world):
    question = world[0][0]
    texts = [t for _, t in world[:6]]
    scores = [r.score for r in rm.score([(question, t) for t in texts])]
    order = sorted(range(len(texts)), key=lambda i: -scores[i])
    answers = [None] * len(texts)
    answers[order[0]], answers[order[1]], answers[order[2]] = "7", "8", "8."
    body = {"question": question, "orchestrations": texts, "answers": answers}
    picks = {}
    for name in ("orchrm", "orchrm-top2-vote", "orchrm-top3-vote"):
        status, out, _ = plain_server.call("POST", "/select", {**body, "selector": name})
        assert status == 200, out
        picks[name] = (out["chosen"], out["executed"])
    assert picks["orchrm"] == (order[0], [order[0]])
    assert picks["orchrm-top2-vote"] == (order[0], order[:2])  # a tie: the higher score
    assert picks["orchrm-top3-vote"] == (order[1], order[:3])  # "8" and "8." agree
    status, out, _ = plain_server.call(
        "POST", "/select", {"question": question, "orchestrations": texts}
    )
    assert out["selector"] == "orchrm" and out["chosen"] == order[0]


def test_selector_options_change_the_choice_as_they_do_here(calibrated_server, calibrated, world):
    question = world[0][0]
    texts = [t for _, t in world[:8]]
    body = {"question": question, "orchestrations": texts, "selector": "orchrm-cost"}
    chosen = []
    for weight in (0.0, 50.0):
        options = {"cost_weight": weight, "cost_measure": "calls"}
        status, out, _ = calibrated_server.call(
            "POST", "/select", {**body, "selector_options": options}
        )
        assert status == 200, out
        assert out["chosen"] == here(calibrated, "orchrm-cost", question, texts, **options).index
        chosen.append(out["chosen"])
    assert chosen[0] == here(calibrated, "orchrm", question, texts).index  # weight 0: argmax
    calls = [predict_cost(p).calls if p else float("inf") for p in map(_plan, texts)]
    assert calls[chosen[1]] == min(calls)  # a heavy weight picks a cheapest plan
    body["selector"] = "orchrm-adaptive"
    drawn = []
    for tolerance in (0.0, 0.5):
        options = {"adaptive_tolerance": tolerance}
        status, out, _ = calibrated_server.call(
            "POST", "/select", {**body, "selector_options": options}
        )
        assert status == 200, out
        expected = here(calibrated, "orchrm-adaptive", question, texts, **options)
        assert out["drawn"] == (expected.drawn or len(texts)) and out["chosen"] == expected.index
        assert out["selection_scores"][out["drawn"] :] == [None] * (len(texts) - out["drawn"])
        drawn.append(out["drawn"])
    assert drawn[0] == len(texts) and drawn[1] < len(texts)


@pytest.mark.parametrize(
    ("extra", "code", "field", "says"),
    [
        ({"selector": "best"}, "unknown_selector", "selector", "unknown selector 'best'"),
        ({"selector": "majority"}, "unknown_selector", "selector", "needs more than"),
        ({"selector": 3}, "wrong_type", "selector", "selector must be a string"),
        ({"selector": "orchrm-top2-vote"}, "missing_field", "answers", "give answers"),
        ({"answers": ["7"]}, "length_mismatch", "answers", "answers has 1 items"),
        ({"answers": ["7", 8]}, "wrong_type", "answers[1]", "string or null, got number"),
        ({"answers": "7"}, "wrong_type", "answers", "a list"),
        (
            {"selector_options": {"cost_weight": -1}},
            "invalid_value",
            "selector_options",
            "cost_weight should be greater than or equal to 0",
        ),
        ({"selector_options": {"weight": 1}}, "unknown_field", "selector_options.weight", "known"),
        (
            {"selector_options": {"cost_weight": "1"}},
            "wrong_type",
            "selector_options.cost_weight",
            "must be a number, got string",
        ),
        (
            {"selector_options": {"cost_measure": "dollars"}},
            "invalid_value",
            "selector_options",
            "cost_measure should be 'calls', 'tokens' or",
        ),
        ({"selector_options": [1]}, "wrong_type", "selector_options", "object"),
    ],
)
def test_a_wrong_selector_request_is_a_422_naming_its_field(
    plain_server, world, extra, code, field, says
):
    body = {"question": world[0][0], "orchestrations": [world[0][1], world[1][1]], **extra}
    status, out, _ = plain_server.call("POST", "/select", body)
    assert status == 422, out
    assert (out["error"], out["field"]) == (code, field)
    assert says in out["message"]
    if code == "unknown_selector":
        assert all(name in out["message"] for name in SERVED)

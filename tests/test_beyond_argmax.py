"""Beyond the argmax of N: calibrated scores (orchrm.calibration.methods), the cost predicted
from a plan (orchrm.selection.cost), and the selectors built on the reward model's scores:
top-k vote, adaptive N, cost-aware choice (orchrm.selection.selectors)."""

from __future__ import annotations

import itertools
import json
import math
import random
from dataclasses import replace

import pytest

from orchrm.calibration.methods import (
    PlattCalibration,
    calibrate_model_dir,
    calibration_from_dict,
    calibration_from_metadata,
    expected_calibration_error,
    fit_calibration,
    fit_isotonic,
    load_calibration,
    reliability_diagram,
    save_calibration,
    scored_outcomes,
)
from orchrm.errors import ConfigError, InputError
from orchrm.evaluation.lineup import build_lineup
from orchrm.evaluation.loading import tasks_from_logs
from orchrm.evaluation.metrics import evaluate_selectors
from orchrm.jsonl import write_jsonl
from orchrm.orchestration import Agent, DoM, Edge, Orchestration
from orchrm.parse import from_dict, parse_harmony
from orchrm.runtime.config import RunConfig
from orchrm.scoring.world import WorldScorer
from orchrm.selection.cost import (
    CostModel,
    cost_correlation,
    fit_cost_model,
    measured_cost,
    predict_cost,
)
from orchrm.selection.selectors import (
    AdaptiveSelector,
    CandidateSet,
    CostAwareSelector,
    Selection,
    TopKVoteSelector,
)
from orchrm.world.generate import generate
from tests.samples import HIGH_DOM, LOW_DOM, candidate_set, plan, tiny_decoder


def _sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z))


def _fixed(scores, tokens: int = 7):
    """A ready `orchrm` selector that gives these scores (as cross-validation's does)."""

    def select(task: CandidateSet) -> Selection:
        mine = tuple(scores[: len(task.candidates)])
        best = max(range(len(mine)), key=lambda i: (mine[i], -i))
        return Selection(best, mine, tokens * len(mine), (best,))

    return select


# calibration


def test_platt_and_isotonic_calibrate_synthetic_scores():
    """True P(correct) = sigmoid(2 s - 0.5): sigmoid(s) is off, both fitted maps are not."""
    rng = random.Random(0)
    scores = [rng.gauss(0, 1) for _ in range(4000)]
    outcomes = [rng.random() < _sigmoid(2 * s - 0.5) for s in scores]
    fit, held = slice(0, 2000), slice(2000, None)
    raw = expected_calibration_error([_sigmoid(s) for s in scores[held]], outcomes[held])
    platt = fit_calibration(scores[fit], outcomes[fit], "platt")
    assert platt.a == pytest.approx(2.0, abs=0.3) and platt.b == pytest.approx(-0.5, abs=0.2)
    isotonic = fit_calibration(scores[fit], outcomes[fit], "isotonic")
    for calibration in (platt, isotonic):
        ece = expected_calibration_error(calibration.probability(scores[held]), outcomes[held])
        print(f"{calibration.method}: held-out ECE {ece:.3f} (sigmoid of the raw score {raw:.3f})")
        assert ece < 0.05 < 0.1 < raw
    probs = isotonic.probability(sorted(scores))
    assert all(a <= b for a, b in itertools.pairwise(probs))  # monotone
    diagram = reliability_diagram(platt.probability(scores[held]), outcomes[held], bins=10)
    assert len(diagram) == 10 and sum(b.count for b in diagram) == 2000
    with pytest.raises(ConfigError, match="unknown calibration method 'beta'"):
        fit_calibration(scores, outcomes, "beta")


def test_the_isotonic_map_by_hand(tmp_path):
    iso = fit_isotonic([1.0, 2.0, 3.0, 4.0, 5.0], [True, False, False, True, True])
    assert (iso.lows, iso.highs, iso.values) == ((1.0, 4.0), (3.0, 5.0), (1 / 3, 1.0))
    # inside a step, between steps (linear), beyond the ends (flat)
    assert iso.probability([2.5, 3.5, 0.0, 9.0]) == pytest.approx([1 / 3, 2 / 3, 1 / 3, 1.0])
    for calibration in (iso, PlattCalibration(1.5, -0.2)):
        back = load_calibration(save_calibration(calibration, tmp_path / "c.json"))
        assert back == calibration
    with pytest.raises(InputError, match=r"c\.json: not a isotonic calibration"):
        calibration_from_dict({"method": "isotonic", "lows": [1]}, "c.json")
    with pytest.raises(InputError, match="unknown calibration method 'beta'"):
        calibration_from_dict({"method": "beta"})
    assert calibration_from_metadata({"max_length": 64}) is None


def test_calibrating_a_tiny_model_on_world_candidates(tmp_path):
    """Fit on some tasks' executions, stored in orchrm.json, read back by the scorer and
    `orchrm-adaptive`; ECE on the other tasks' candidates."""
    generated = generate("multihop", 12, 8, seed=3, progress=False)
    records = [r for r in generated.records if r["orchestrator"] == "specialized"]
    folder = tiny_decoder(tmp_path / "rm", [r["question"] + " " + r["raw"] for r in records])
    (folder / "orchrm.json").write_text(json.dumps({"max_length": 256, "reward_std": 1.0}))
    fit_ids = {t.id for t in generated.tasks[:6]}
    fit = [r for r in records if r["task_id"] in fit_ids]
    held = [r for r in records if r["task_id"] not in fit_ids]
    summary = calibrate_model_dir(tmp_path / "rm", fit, method="isotonic")
    assert summary.candidates == sum(1 for r in fit if r["execution"])
    assert summary.ece == pytest.approx(0.0, abs=1e-9)  # isotonic: exact on its own data
    metadata = json.loads((folder / "orchrm.json").read_text())
    assert metadata["max_length"] == 256  # every other key kept
    from orchrm.scoring.load import load_scorer

    scorer = load_scorer(folder)
    assert calibration_from_metadata(scorer.info.metadata) == summary.calibration
    assert AdaptiveSelector(_fixed([0.0] * 8), scorer.info).calibration == summary.calibration
    scores, outcomes = scored_outcomes(scorer, held)
    raw = expected_calibration_error([_sigmoid(s) for s in scores], outcomes)
    platt = calibrate_model_dir(folder, fit, method="platt").calibration  # replaces it
    assert calibration_from_metadata(load_scorer(folder).info.metadata) == platt
    with pytest.raises(InputError, match="only 0 executed records"):
        calibrate_model_dir(folder, [])
    for calibration in (summary.calibration, platt):  # an untrained model: noise to fit
        ece = expected_calibration_error(calibration.probability(scores), outcomes)
        print(
            f"tiny model, {calibration.method}, {len(scores)} held-out candidates: "
            f"ECE {ece:.3f} (raw sigmoid {raw:.3f})"
        )


def test_calibration_fixes_the_scale_of_a_reward_model_that_ranks_well():
    """A model whose scores rank world plans by their true success but on its own scale
    (0.3 x log-odds + 1, as a Bradley-Terry reward may be): fitted on 20 tasks, the
    calibrated probabilities match the outcomes of 20 others."""
    generated = generate("math", 40, 8, seed=9, progress=False)
    scorer = WorldScorer(generated.tasks, scale=0.3, shift=1.0)
    fit_ids = {t.id for t in generated.tasks[:20]}
    fit, held = (
        [r for r in generated.records if (r["task_id"] in fit_ids) == side] for side in (1, 0)
    )
    fit_scores, fit_outcomes = scored_outcomes(scorer, fit)
    scores, outcomes = scored_outcomes(scorer, held)
    raw = expected_calibration_error([_sigmoid(s) for s in scores], outcomes)
    assert raw > 0.15
    for method in ("platt", "isotonic"):
        calibration = fit_calibration(fit_scores, fit_outcomes, method)
        ece = expected_calibration_error(calibration.probability(scores), outcomes)
        print(f"{method}: {len(scores)} held-out candidates, ECE {ece:.3f} (raw {raw:.3f})")
        assert ece < 0.1


# predicted cost


def test_predicted_cost_follows_each_sub_agents_call_pattern():
    config = RunConfig()
    model = CostModel()
    cot = predict_cost(plan("CoTAgent"), config, model)
    assert (cot.calls, cot.critical_path_calls) == (1, 1)
    assert cot.tokens == sum(model.tokens("CoTAgent", "answer"))
    sc = predict_cost(plan("SCAgent"), config, model)
    assert (sc.calls, sc.critical_path_calls) == (5, 1)  # the samples run at once
    assert predict_cost(plan("SCAgent"), RunConfig(sc_samples=3)).calls == 3
    debate = predict_cost(parse_harmony(LOW_DOM), config)
    assert (debate.calls, debate.critical_path_calls) == (2 * 5 + 1, 5 + 1)
    three = Orchestration((Agent("D", "DebateAgent", debate_roles=("a", "b", "c")),), dom=DoM.HIGH)
    assert predict_cost(three, RunConfig(debate_rounds=2)).calls == 3 * 2 + 1
    chain = predict_cost(parse_harmony(HIGH_DOM), config, model)  # CoT -> SC
    assert (chain.calls, chain.critical_path_calls) == (6, 2)
    fed = 5 * model.tokens("CoTAgent", "answer")[1]  # every SC call reads the CoT output
    assert chain.tokens == pytest.approx(cot.tokens + sc.tokens + fed)
    fork = Orchestration(
        (Agent("A", "ReflexionAgent"), Agent("B", "CoTAgent"), Agent("C", "CoTAgent")),
        (Edge("A", "C"), Edge("B", "C")),
    )
    reflexion = predict_cost(plan("ReflexionAgent"), config, model)
    assert predict_cost(fork, config, model).critical_path_calls == (
        reflexion.critical_path_calls + 1
    )
    bounded = predict_cost(
        plan("ReflexionAgent"),
        RunConfig(reflexion_rounds=1),
        CostModel(
            mean_calls={("ReflexionAgent", "critic"): 3.0, ("ReflexionAgent", "refine"): 3.0}
        ),
    )
    assert bounded.calls == 3  # answer, one critic, one refinement at most
    assert predict_cost(Orchestration(answer="42", dom=DoM.LOW)).calls == 0
    loop = Orchestration(
        (Agent("A", "CoTAgent", input="${B}"), Agent("B", "CoTAgent", input="${A}")),
        (Edge("A", "B"), Edge("B", "A")),
    )  # cannot run, and never looks cheaper than the plans that can
    assert predict_cost(loop).calls == 2 and predict_cost(loop).critical_path_calls == 2


def test_predicted_cost_tracks_measured_cost_on_world_logs():
    """Fitted on one world log, compared on another (other tasks) of each preset."""
    for preset in ("math", "search", "multihop"):
        train = generate(preset, 5, 8, seed=1, progress=False).records
        test = generate(preset, 5, 8, seed=2, progress=False).records
        for name, model in (("defaults", None), ("fitted", fit_cost_model(train))):
            c = cost_correlation(test, model=model)
            print(
                f"{preset} ({name}, {c.executions} executions): Pearson "
                + ", ".join(f"{m} {v:.3f}" for m, v in c.pearson.items())
                + "; Spearman "
                + ", ".join(f"{m} {v:.3f}" for m, v in c.spearman.items())
            )
            assert c.executions >= 70
            assert c.pearson["calls"] > 0.95 and c.pearson["tokens"] > 0.9
            assert c.pearson["critical_path_calls"] > 0.9 and c.spearman["tokens"] > 0.9
        fitted = cost_correlation(test, model=fit_cost_model(train))
        ratio = fitted.mean_predicted["tokens"] / fitted.mean_measured["tokens"]
        assert 0.8 < ratio < 1.2
    record = next(r for r in test if r["execution"] and r["execution"]["calls"])
    spent = measured_cost(record)
    assert spent.calls == len(record["execution"]["calls"])
    assert spent.tokens == record["tokens"]["execution"]
    assert measured_cost({**record, "execution": None}) is None


# the selectors


def test_top_k_vote_executes_the_k_best_and_votes_among_them():
    t = candidate_set(["1", "2", "3", "3"], [False, False, True, True])
    base = _fixed([0.9, 0.1, 0.8, 0.7])
    two = TopKVoteSelector(base, 2)(t)  # 1 and 3 tie: the higher score's answer
    assert (two.index, two.executed, two.verification_tokens) == (0, (0, 2), 28 + 100)
    three = TopKVoteSelector(base, 3)(t)  # 3 twice: its higher-scored candidate
    assert (three.index, three.executed, three.verification_tokens) == (2, (0, 2, 3), 28 + 200)
    assert TopKVoteSelector(base, 3)(CandidateSet("t", "?", t.candidates[:2])).executed == (0, 1)
    with pytest.raises(ConfigError, match="k must be 1 or more"):
        TopKVoteSelector(base, 0)
    # re-executions replay the vote of the same k plans: candidate 1, outside the top 3,
    # is right on every re-execution and never counts
    runs = [("9", False), ("1", True), ("7", False), ("7", False)]
    replayed = CandidateSet(
        "t",
        t.question,
        tuple(replace(c, reruns=(runs[i],) * 3) for i, c in enumerate(t.candidates)),
    )
    ev = evaluate_selectors([replayed], {"orchrm-top3-vote": TopKVoteSelector(base, 3)}, [4])
    result = ev.at(4)["orchrm-top3-vote"]
    assert result.expected_accuracy == 0.0 and result.executions == 3
    assert result.accuracy == 1.0  # the logged answers vote 3, which is right


def test_adaptive_stops_when_confident_and_saves_orchestrator_tokens():
    t = candidate_set(["1", "2", "3", "4"], [True, False, False, False])
    t = replace(t, candidates=tuple(replace(c, orchestrator_tokens=50) for c in t.candidates))
    base = _fixed([3.0, 0.0, 5.0, 1.0])
    sure = AdaptiveSelector(base, calibration=PlattCalibration(0.0, 5.0))  # P = 0.993
    chosen = sure(t)
    assert (chosen.index, chosen.drawn, chosen.verification_tokens) == (0, 1, 7)
    assert chosen.scores == (3.0, None, None, None)
    # calibrated: the accuracy expected to be lost by stopping, over the best of r later
    # scores (r normals); as a Monte Carlo estimate of it says
    steep = AdaptiveSelector(_fixed([0.5, 0.0, 2.0, 0.3]), calibration=PlattCalibration(2, 0))
    rng = random.Random(0)
    later = [max(0.5, *(rng.gauss(0, 1) for _ in range(3))) for _ in range(20000)]
    lost = sum(_sigmoid(2 * s) - _sigmoid(1.0) for s in later) / len(later)
    assert steep.risk([0.5], 3) == pytest.approx(lost, abs=0.005)
    assert steep.risk([0.5, 0.0, 2.0], 1) < 0.01 < steep.risk([0.5, 0.0], 2)
    chosen = steep(t)
    assert (chosen.index, chosen.drawn, chosen.verification_tokens) == (2, 3, 21)
    never = AdaptiveSelector(steep.base, calibration=steep.calibration, tolerance=0.0)
    assert never(t).drawn is None and never(t).index == 2  # no loss allowed: all N
    # without a calibration: the chance one of r draws scores higher, scores ~ N(0, 1)
    plain = AdaptiveSelector(base)
    assert plain.risk([3.0], 3) == pytest.approx(1 - (0.5 * (1 + math.erf(3 / 2**0.5))) ** 3)
    assert plain(t).drawn == 1  # z = 3: beaten with 0.4% over 3 draws
    assert AdaptiveSelector(base, confidence=0.999)(t).index == 2
    ev = evaluate_selectors([t], {"orchrm-adaptive": sure, "orchrm": base}, [4])
    adaptive, argmax = ev.at(4)["orchrm-adaptive"], ev.at(4)["orchrm"]
    assert (adaptive.orchestrator_tokens, adaptive.orchestrator_tokens_saved) == (50, 150)
    assert (argmax.orchestrator_tokens, argmax.orchestrator_tokens_saved) == (200, 0)
    assert argmax.total_tokens == 28 + 100 + 200  # orchestrator tokens count in the total
    with pytest.raises(ConfigError, match="confidence must be in"):
        AdaptiveSelector(base, confidence=1.0)
    with pytest.raises(ConfigError, match="tolerance must be in"):
        AdaptiveSelector(base, tolerance=-0.1)


def test_cost_aware_choice_trades_score_against_predicted_cost():
    t = candidate_set(["1", "2", "3", "4"], [False] * 4)  # CoT, SC, Reflexion, Debate
    base = _fixed([0.0, 0.5, 0.2, 1.0])
    assert CostAwareSelector(base, cost_weight=0.0)(t).index == 3  # plain argmax
    cheap = CostAwareSelector(base, cost_weight=5.0)(t)
    assert cheap.index == 0 and cheap.verification_tokens == 28 and cheap.executed == (0,)
    tokens = predict_cost(t.candidates[3].orchestration).tokens
    assert cheap.scores[3] == pytest.approx(1.0 - 5.0 * math.log2(1 + tokens))
    latency = CostAwareSelector(base, cost_weight=0.4, measure="critical_path_calls")(t)
    assert latency.index == 1  # SC's samples run at once: one call of latency
    with pytest.raises(ConfigError, match="unknown cost measure 'dollars'"):
        CostAwareSelector(base, measure="dollars")
    with pytest.raises(ConfigError, match="cost_weight must be 0 or more"):
        CostAwareSelector(base, cost_weight=-1)


def test_every_command_sees_them_and_they_spend_less_on_world_logs(tmp_path):
    """On world logs (a model that knows the world): the line-up holds the four; top-k
    votes execute k; adaptive draws fewer than N; cost-aware spends fewer tokens."""
    generated = generate("math", 12, 8, seed=11, progress=False)
    log = tmp_path / "math.jsonl"
    write_jsonl(generated.records, log)
    tasks = tasks_from_logs([str(log)], "specialized", 8)
    logged = sorted(
        r["tokens"]["orchestrator"] for r in generated.records if r["orchestrator"] == "specialized"
    )
    assert sorted(c.orchestrator_tokens for t in tasks for c in t.candidates) == logged
    assert min(logged) > 0
    lineup = build_lineup(
        tasks, rm=WorldScorer(generated.tasks), world_tasks=generated.tasks, reruns=3
    )
    names = ("orchrm-top2-vote", "orchrm-top3-vote", "orchrm-adaptive", "orchrm-cost")
    assert set(names) <= set(lineup.selectors)
    chosen = {name: lineup.selectors[name] for name in ("orchrm", "majority", *names)}
    ev = evaluate_selectors(lineup.tasks, chosen, [1, 2, 4, 8], draws=2, bootstrap=200)
    at = ev.at(8)
    for name, r in at.items():
        print(
            f"{name}: expected {r.expected_accuracy:.3f}, executions {r.executions:.1f}, "
            f"orchestrator {r.orchestrator_tokens:,.0f} (saved {r.orchestrator_tokens_saved:,.0f})"
            f", total {r.total_tokens:,.0f}"
        )
    drawn_all = at["orchrm"].orchestrator_tokens
    assert drawn_all == pytest.approx(
        sum(c.orchestrator_tokens for t in lineup.tasks for c in t.candidates) / len(tasks)
    )
    assert at["orchrm-top2-vote"].executions == 2 and at["orchrm-top3-vote"].executions == 3
    assert at["majority"].executions == 8
    for name in ("orchrm-top2-vote", "orchrm-top3-vote"):
        assert at[name].expected_accuracy is not None  # replayed on the re-executions
        assert at["orchrm"].verification_tokens < at[name].verification_tokens
        assert at[name].verification_tokens < at["majority"].verification_tokens
    adaptive = at["orchrm-adaptive"]
    assert adaptive.orchestrator_tokens < drawn_all
    assert adaptive.orchestrator_tokens + adaptive.orchestrator_tokens_saved == pytest.approx(
        drawn_all
    )
    assert adaptive.verification_tokens < at["orchrm"].verification_tokens
    assert at["orchrm-cost"].total_tokens < at["orchrm"].total_tokens
    # cross-validation's ready `orchrm` carries them too, on its own scores
    ready = _fixed([0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0])
    fold = build_lineup(tasks, rm_selector=ready).selectors
    assert set(names) <= set(fold)
    # raw scores, z = 2: beaten with 13% over the 6 draws left after two, 9% over 4
    assert fold["orchrm-adaptive"](tasks[0]).drawn == 4


def test_tasks_from_logs_read_orchestrator_tokens_of_either_field(tmp_path):
    generated = generate("math", 1, 2, seed=2, progress=False)
    record = generated.records[0]
    bare = {k: v for k, v in record.items() if k != "tokens"}
    write_jsonl([record, {**bare, "sample_index": 1}], tmp_path / "log.jsonl")
    (task,) = tasks_from_logs([str(tmp_path / "log.jsonl")], record["orchestrator"])
    prompt_and_completion = sum(record["orchestrator_tokens"].values())
    assert [c.orchestrator_tokens for c in task.candidates] == [
        record["tokens"]["orchestrator"],
        prompt_and_completion,
    ]
    assert from_dict(record["orchestration"]) == task.candidates[0].orchestration

"""The search over edits of the sampled plans (`orchrm.selection.search`), its selector
`orchrm-search` in the registry, and how an evaluation measures a plan no candidate is
(`orchrm.evaluation.reruns.world_outcome`)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from orchrm.errors import ConfigError
from orchrm.evaluation.lineup import build_lineup
from orchrm.evaluation.loading import tasks_from_logs
from orchrm.evaluation.metrics import evaluate_selectors
from orchrm.evaluation.reruns import world_outcome
from orchrm.jsonl import write_jsonl
from orchrm.orchestration import render_for_rm, validate
from orchrm.scoring.world import WorldScorer
from orchrm.selection.cost import predict_cost
from orchrm.selection.options import SelectorOptions
from orchrm.selection.registry import LineupInputs, line_up
from orchrm.selection.search import PlanSearch, SearchSelector
from orchrm.selection.selectors import CostAwareSelector, RewardModelSelector
from orchrm.world.generate import generate, world_config
from orchrm.world.model import success_probability


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(world tasks, their candidate sets: 12 math tasks x 8 specialized samples)."""
    generated = generate("math", 12, 8, seed=5, progress=False)
    path = tmp_path_factory.mktemp("search") / "math.jsonl"
    write_jsonl(generated.records, path)
    return generated.tasks, tasks_from_logs([str(path)], "specialized", 8)


def _search(world_tasks, noise: float = 0.5, **settings) -> PlanSearch:
    scorer = WorldScorer(world_tasks, noise)
    return PlanSearch([RewardModelSelector(scorer)], [scorer.info], **settings)


def test_the_search_scores_at_most_its_budget_and_counts_every_plan(world):
    world_tasks, tasks = world
    for budget in (0, 1, 5, 40):
        search = _search(world_tasks, budget=budget)
        for task in tasks[:4]:
            found = search(task)
            parsed = sum(c.orchestration is not None for c in task.candidates)
            assert found.scored <= budget
            assert found.tokens == 10 * (parsed + found.scored)  # 10 tokens a plan
            assert found.best.depth <= 2 and not validate(found.best.plan)


def test_a_budget_of_zero_is_the_cost_aware_argmax(world):
    world_tasks, tasks = world
    scorer = WorldScorer(world_tasks, 0.5)
    base = RewardModelSelector(scorer)
    search = SearchSelector(PlanSearch([base], [scorer.info], budget=0, cost_weight=0.25))
    cost = CostAwareSelector(base, scorer.info, cost_weight=0.25)
    for task in tasks:
        chosen, expected = search(task), cost(task)
        assert (chosen.index, chosen.plan) == (expected.index, None)
        assert chosen.scores == pytest.approx(expected.scores)


def test_the_leash_keeps_plans_within_its_edits(world):
    world_tasks, tasks = world
    for max_edits in (1, 3):
        search = _search(world_tasks, budget=60, max_edits=max_edits, beam=3)
        depths = [search(task).best.depth for task in tasks]
        assert max(depths) <= max_edits
    penalized = _search(world_tasks, budget=60, max_edits=3, distance_penalty=100.0)
    assert all(penalized(task).best.depth == 0 for task in tasks)


def test_a_truthful_model_finds_plans_truly_better_than_the_sampled_ones(world):
    """With no noise the objective is the true log-odds (clamped to 1e-4..1 - 1e-4): the
    search's plan is never worse than argmax's, and better on some task."""
    world_tasks, tasks = world
    truth = {t.id: t for t in world_tasks}
    search = _search(world_tasks, noise=0.0, budget=30, cost_weight=0.0)
    config = world_config()
    gains = []
    for task in tasks:
        found = search(task)
        sampled = max(
            success_probability(truth[task.task_id], c.orchestration, config)
            for c in task.candidates
            if c.orchestration is not None
        )
        gains.append(success_probability(truth[task.task_id], found.best.plan, config) - sampled)
    assert min(gains) >= -1e-3 and max(gains) > 0.01


def test_the_objective_weighs_cost_distance_and_the_ensembles_spread(world):
    world_tasks, tasks = world
    scorers = [WorldScorer(world_tasks, 0.5, shift=s) for s in (0.0, 1.0)]
    search = PlanSearch(
        [RewardModelSelector(s) for s in scorers],
        [s.info for s in scorers],
        budget=6,
        cost_weight=0.2,
        distance_penalty=0.3,
        spread_weight=2.0,
    )
    found = search(tasks[0])
    node = found.best if found.best.depth else next(n for n in found.candidates if n)
    raw = [s.score([(tasks[0].question, node.plan)])[0].score / 2 for s in scorers]
    assert node.score == pytest.approx(sum(raw) / 2)
    assert node.spread == pytest.approx(abs(raw[0] - raw[1]) / 2)
    cost = predict_cost(node.plan).tokens
    expected = node.score - 2.0 * node.spread - 0.2 * math.log2(1 + cost) - 0.3 * node.depth
    assert node.objective == pytest.approx(expected)
    assert found.tokens == 2 * 10 * (8 + found.scored)


def test_the_worst_case_aggregate_scores_a_plan_by_its_lowest_member(world):
    world_tasks, tasks = world
    scorers = [WorldScorer(world_tasks, 0.5, shift=s) for s in (0.0, 1.0, -0.5)]
    search = PlanSearch(
        [RewardModelSelector(s) for s in scorers],
        [s.info for s in scorers],
        budget=6,
        cost_weight=0.0,
        aggregate="min",
    )
    found = search(tasks[0])
    for node in (*found.history, *(n for n in found.candidates if n)):
        raw = [s.score([(tasks[0].question, node.plan)])[0].score / 2 for s in scorers]
        assert node.score == pytest.approx(min(raw)) and node.objective == node.score
    assert found.best.objective == max(
        n.objective for n in (*found.history, *found.candidates) if n
    )
    with pytest.raises(ConfigError, match="unknown aggregate 'max'"):
        PlanSearch([RewardModelSelector(scorers[0])], [scorers[0].info], aggregate="max")


def test_one_search_gives_every_smaller_budgets_result(world):
    world_tasks, tasks = world
    full = [_search(world_tasks, budget=40, seed=2)(t) for t in tasks[:6]]
    for budget in (0, 1, 3, 7, 20):
        small = [_search(world_tasks, budget=budget, seed=2)(t) for t in tasks[:6]]
        assert [f.best_within(budget) for f in full] == [s.best for s in small]
        assert all(s.history == f.history[:budget] for s, f in zip(small, full, strict=True))


def test_stand_ins_of_other_seeds_err_independently(world):
    world_tasks, tasks = world
    item = [(tasks[0].question, tasks[0].candidates[0].orchestration)]
    same = [WorldScorer(world_tasks, 1.0, seed=s).score(item)[0].score for s in (0, 0, 1, 2)]
    assert same[0] == same[1] and len(set(same[1:])) == 3


def test_the_search_is_deterministic(world):
    world_tasks, tasks = world
    first = [_search(world_tasks, budget=9, seed=1)(t).best for t in tasks]
    again = [_search(world_tasks, budget=9, seed=1)(t).best for t in tasks]
    assert first == again


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"budget": -1}, "orchrm-search: budget must be 0 or more, got -1"),
        ({"max_edits": 0}, "orchrm-search: max_edits must be 1 or more, got 0"),
        ({"beam": 0}, "orchrm-search: beam must be 1 or more, got 0"),
        ({"cost_weight": -0.1}, "orchrm-search: cost_weight must be 0 or more, got -0.1"),
        ({"measure": "dollars"}, "orchrm-search: unknown cost measure 'dollars'"),
    ],
)
def test_bad_settings_are_one_line_errors(world, settings, message):
    with pytest.raises(ConfigError, match=message):
        _search(world[0], **settings)
    with pytest.raises(ConfigError, match="at least one reward model"):
        PlanSearch([])


def test_the_line_up_offers_the_search_only_where_its_plans_can_be_measured(world):
    world_tasks, tasks = world
    scorer = WorldScorer(world_tasks, 0.5)
    assert "orchrm-search" not in line_up(LineupInputs(rm=scorer))
    lineup = build_lineup(tasks, rm=scorer, world_tasks=world_tasks, reruns=0)
    assert "orchrm-search" in lineup.selectors
    assert lineup.selectors["orchrm-search"].search.models[0] is lineup.selectors["orchrm"]
    assert "orchrm-search" not in build_lineup(tasks, world_tasks=world_tasks).selectors


def test_an_edited_plan_is_measured_by_the_world(world):
    """The plan the search returns gets its true success probability and one world
    execution; its verification tokens are every plan scored."""
    world_tasks, tasks = world
    truth = {t.id: t for t in world_tasks}
    options = SelectorOptions(search_budget=12, cost_weight=0.0)
    lineup = build_lineup(
        tasks, rm=WorldScorer(world_tasks, 0.5), world_tasks=world_tasks, options=options
    )
    search = lineup.selectors["orchrm-search"]
    edited = [(t, search(t)) for t in lineup.tasks]
    edited = [(t, s) for t, s in edited if s.plan is not None]
    assert edited, "the search kept a sampled plan on every task"
    for task, chosen in edited:
        plan = chosen.plan.orchestration
        assert chosen.plan.p_success == success_probability(truth[task.task_id], plan)
        assert chosen.plan.execution_tokens > 0 and chosen.edits and chosen.executed == ()
        assert chosen.verification_tokens >= 10 * 9
    chosen = {"orchrm": lineup.selectors["orchrm"], "orchrm-search": search}
    at = evaluate_selectors(lineup.tasks, chosen, [8], bootstrap=50, baseline="orchrm").at(8)
    plans = [s.plan or t.candidates[s.index] for t, s in ((t, search(t)) for t in lineup.tasks)]
    mean_p = sum(c.p_success for c in plans) / len(plans)
    assert at["orchrm-search"].expected_accuracy == pytest.approx(mean_p)
    assert at["orchrm-search"].executions == 1.0


def test_world_outcome_refuses_a_task_the_world_does_not_know(world):
    world_tasks, tasks = world
    outcome = world_outcome(world_tasks[1:])
    plan = next(c.orchestration for c in tasks[0].candidates if c.orchestration)
    task = next(t for t in tasks if t.task_id == world_tasks[0].id)
    with pytest.raises(Exception, match="is not in the world task files"):
        outcome(task, plan)


def test_the_search_scores_through_a_real_reward_model_in_fp32(world, tmp_path: Path):
    """A tiny random decoder, loaded in fp32: every scored plan is read by its tokenizer
    and counted."""
    import json

    from orchrm.orchestration import RM_RENDER_VERSION
    from orchrm.rmodel.files import METADATA
    from orchrm.scoring.local import OrchRM
    from tests.samples import tiny_decoder

    _, tasks = world
    task = tasks[0]
    texts = [
        render_for_rm(task.question, c.orchestration) for c in task.candidates if c.orchestration
    ]
    folder = tiny_decoder(tmp_path / "rm", texts)
    (folder / METADATA).write_text(
        json.dumps({"render_version": RM_RENDER_VERSION, "max_length": 256})
    )
    rm = OrchRM.load(folder, dtype="fp32")
    base = RewardModelSelector(rm)
    found = PlanSearch([base], [rm.info], budget=5)(task)
    parsed = sum(c.orchestration is not None for c in task.candidates)
    assert found.scored == 5 and len(base._seen) == parsed + 5
    assert found.tokens == sum(tokens for tokens, _ in base._seen.values()) > 0


def test_the_page_draws_each_edited_plan_beside_the_candidate_it_came_from(world, tmp_path):
    from orchrm.viewer.graph import esc
    from orchrm.viewer.html import summary_rows
    from orchrm.viewer.json_form import read_view_json
    from orchrm.viewer.page import selections, write_evaluation_view

    world_tasks, tasks = world
    options = SelectorOptions(search_budget=12, cost_weight=0.0)
    lineup = build_lineup(
        tasks, rm=WorldScorer(world_tasks, 0.5), world_tasks=world_tasks, options=options
    )
    chosen = {k: lineup.selectors[k] for k in ("orchrm", "orchrm-search", "bayes")}
    picks = selections(lineup.tasks, chosen)
    page = write_evaluation_view(tmp_path, lineup.tasks, picks).read_text()
    pairs = list(zip(lineup.tasks, (p["orchrm-search"] for p in picks), strict=True))
    made = [(t, s) for t, s in pairs if s.plan is not None]
    assert made and page.count('data-edited="orchrm-search"') == len(made)
    task, first = made[0]
    section = page[page.index(f">{task.task_id}</h2>") :]
    section = section[: section.index("</section>")]
    source = section.index(f'data-index="{first.index}"')
    edited = section.index('data-edited="orchrm-search"')
    following = section.find(f'data-index="{first.index + 1}"')
    assert source < edited and (following < 0 or edited < following)
    assert all(esc(step, 200) in section for step in first.edits)
    assert "an edit of #" in section
    views = read_view_json(tmp_path / "view.json")
    back = next(v for v in views if v.task.task_id == task.task_id).edited["orchrm-search"]
    assert (back.source, back.edits) == (first.index, first.edits)
    assert back.plan.orchestration == first.plan.orchestration
    assert back.plan.p_success == first.plan.p_success
    rows = {name: p for name, _, _, p in summary_rows(views)}
    executed = [s.plan or t.candidates[s.index] for t, s in pairs]
    expected = sum(c.p_success for c in executed) / len(executed)
    assert rows["orchrm-search"] == pytest.approx(expected)

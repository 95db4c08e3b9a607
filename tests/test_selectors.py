"""orchrm.selection.selectors: what each selector chooses and the verification tokens it spends."""

from __future__ import annotations

import pytest

from orchrm.evaluation.lineup import build_lineup
from orchrm.evaluation.metrics import evaluate_selectors
from orchrm.rmodel.tokens import default_backbone
from orchrm.scoring.local import OrchRM
from orchrm.selection.selectors import (
    CandidateSet,
    RewardModelSelector,
    bayes_selector,
    logp_selector,
    majority_selector,
    oracle_selector,
    random_selector,
)
from tests.samples import candidate_set


def test_majority_votes_and_pays_for_the_extra_executions():
    t = candidate_set(["41", "42", "42", "41"], [False, True, True, False])
    chosen = majority_selector(t)
    assert chosen.index == 0  # 41 and 42 tie: the answer seen first wins
    assert chosen.verification_tokens == 300 and len(chosen.executed) == 4
    assert majority_selector(candidate_set(["1", "2", "2"], [False, True, True])).index == 1
    # answers that say the same thing vote together
    numbers = candidate_set(["7", "1,000", "1000.", "7", "1000"], [False, True, True, False, True])
    assert majority_selector(numbers).index == 1
    names = candidate_set(["Lyon", "Paris.", "paris"], [False, True, True])
    assert majority_selector(names).index == 1
    letters = candidate_set(
        ["A", "(B)", "The answer is B", "A) 42", "B"], [False, True, True, False, True]
    )
    assert majority_selector(CandidateSet("t", "?", letters.candidates, "gpqa")).index == 1


def test_cheap_selectors_cost_nothing_to_choose():
    t = candidate_set(
        ["1", "2", "3"], [False, False, True], logprobs=[-5.0, -1.0, -3.0], ps=[0.2, 0.1, 0.9]
    )
    assert logp_selector(t).index == 1 and bayes_selector(t).index == 2
    assert oracle_selector(t).index == 2
    first = random_selector(seed=3)(t)
    assert first == random_selector(seed=3)(t)  # seeded per task
    for select in (logp_selector, bayes_selector, oracle_selector, random_selector(0)):
        assert select(t).verification_tokens == 0


def test_reward_model_selector_counts_its_input_tokens_and_scores_each_plan_once(monkeypatch):
    rm = OrchRM.load(default_backbone(), check_version=False)
    select = RewardModelSelector(rm)
    t = candidate_set(["1", "2", "3", "1"], [True, False, False, True])
    chosen = select(t)
    texts = [rm.render(t.question, c.orchestration) for c in t.candidates]
    expected = [r.score for r in rm.score_texts(texts)]
    assert chosen.index == max(range(4), key=expected.__getitem__)
    assert list(chosen.scores) == pytest.approx(expected, abs=1e-5)
    tokens = sum(len(x) for x in rm.tokenizer(texts, truncation=True)["input_ids"])
    assert chosen.verification_tokens == tokens
    scored = len(select._seen)
    select(CandidateSet("t", t.question, t.candidates[:2]))  # a subset: nothing new to score
    assert len(select._seen) == scored
    calls: list[int] = []
    real = rm.score_texts
    monkeypatch.setattr(rm, "score_texts", lambda texts: calls.append(len(texts)) or real(texts))
    weighted = RewardModelSelector(rm, weighted=True, share_scores_with=select)(t)
    assert weighted.verification_tokens == tokens + 300  # plus the N - 1 executions
    assert calls == []  # orchrm's scores, shared: nothing scored again
    # warm: every plan of every task in one call, then selections only look up
    other = CandidateSet("u", "What is 5 x 5?", t.candidates)
    fresh = RewardModelSelector(rm)
    fresh.warm([t, other, t])
    assert calls == [4 + 4]
    assert fresh(other).scores != () and calls == [8]
    assert fresh(t).index == chosen.index
    # an evaluation: `orchrm` and `orchrm-weighted` (as `selectors` wires them) score
    # every plan once between them, in one call, whatever the subsets of N
    calls.clear()
    line_up = build_lineup([t, other], rm=rm).selectors
    both = {name: line_up[name] for name in ("orchrm", "orchrm-weighted")}
    evaluate_selectors([t, other], both, [1, 2, 4])
    assert calls == [8]

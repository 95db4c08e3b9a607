"""The domain line of the reward-model text: rendered only when asked, exported with
`domain_in_text`, and given at scoring time only to a model trained with it."""

from __future__ import annotations

import pytest

from orchrm.jsonl import write_jsonl
from orchrm.orchestration import Agent, DoM, Orchestration, approx_token_count, render_for_rm
from orchrm.scoring.base import RenderingScorer, Scored
from orchrm.selection.selectors import Candidate, CandidateSet, RewardModelSelector
from orchrm.store.db import Store
from orchrm.store.ingest import ingest_file
from orchrm.store.pairs import MineConfig, mine, preference_rows
from orchrm.world.generate import generate

PLAN = Orchestration(agents=(Agent("A", "DebateAgent", input="solve it"),), dom=DoM.HIGH)
QUESTION = "What is the smallest n such that n squared exceeds 50?"


class Recording(RenderingScorer):
    """A scorer that keeps the texts it is given and scores them by length."""

    budget = (512, approx_token_count)

    def __init__(self, domain_in_text: bool):
        self.metadata = {"domain_in_text": domain_in_text}
        self.texts: list[str] = []

    def score_texts(self, texts):
        self.texts += texts
        return [Scored(float(len(t)), approx_token_count(t)) for t in texts]


def test_the_domain_line_comes_first_and_leaves_the_rest_as_it_was():
    plain = render_for_rm(QUESTION, PLAN)
    assert plain.startswith("question: ")
    with_domain = render_for_rm(QUESTION, PLAN, domain="math")
    assert with_domain == "domain: math\n" + plain


def test_a_domain_is_one_short_line_whatever_the_log_holds():
    text = render_for_rm(QUESTION, PLAN, domain="multi\nhop  " + "x" * 200)
    first, second = text.split("\n")[:2]
    assert first.startswith("domain: multi hop x") and len(first) == len("domain: ") + 64
    assert second.startswith("question: ")


def test_the_domain_line_counts_against_the_budget():
    wordy = Orchestration(agents=PLAN.agents, dom=DoM.HIGH, thinking="think " * 200)
    text = render_for_rm(QUESTION, wordy, max_tokens=80, domain="search")
    assert approx_token_count(text) == 80 and text.endswith("...")


@pytest.mark.parametrize("reads", [True, False])
def test_only_a_model_trained_with_the_domain_line_is_given_it(reads):
    scorer = Recording(domain_in_text=reads)
    scorer.score([(QUESTION, PLAN, "math"), (QUESTION, PLAN, "search")])
    expected = ["domain: math\n", "domain: search\n"] if reads else ["question: "] * 2
    assert [t[: len(e)] for t, e in zip(scorer.texts, expected, strict=True)] == expected


def test_an_item_without_a_domain_gets_no_domain_line():
    scorer = Recording(domain_in_text=True)
    scored = scorer.score([(QUESTION, PLAN), (QUESTION, PLAN, "math")])
    assert scorer.texts[0].startswith("question: ")
    assert scorer.texts[1].startswith("domain: math\nquestion: ")
    assert [r.tokens for r in scored] == [approx_token_count(t) for t in scorer.texts]


def test_the_selector_gives_each_plan_its_tasks_domain():
    scorer = Recording(domain_in_text=True)
    task = CandidateSet("t", QUESTION, (Candidate(PLAN), Candidate(None)), domain="search")
    RewardModelSelector(scorer)(task)
    assert scorer.texts == [render_for_rm(QUESTION, PLAN, *scorer.budget, domain="search")]


def test_export_writes_the_domain_line_only_when_asked(tmp_path):
    log = tmp_path / "math.jsonl"
    write_jsonl(generate("math", 12, 4, seed=3, progress=False).records, log)
    with Store(tmp_path / "s.duckdb") as store:
        ingest_file(store, log)
        mine(store, MineConfig(specialized=("specialized",), base=("base",)))
        plain = preference_rows(store)
        tagged = preference_rows(store, domain_in_text=True)
    assert plain and all(r["prompt"].startswith("question: ") for r in plain)
    assert [r["prompt"] for r in tagged] == ["domain: math\n" + r["prompt"] for r in plain]
    assert [r["chosen"] for r in tagged] == [r["chosen"] for r in plain]

"""Best-of-N selection: pick one of N candidate orchestrations for a task, and count what
choosing cost.

Every selector takes a task and its candidates and returns a `Selection`: the chosen
index, the per-candidate scores it used, and its verification tokens (what it read and
wrote to choose). Reward-model selectors count their input tokens with the model's own
tokenizer; vote-based selectors pay the N - 1 extra executions they need; random, logp,
oracle and Bayes cost nothing to choose. Total tokens = verification + the execution(s)
that produce the answer, reported by `evaluate`.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from orchrm.orchestration import Orchestration
from orchrm.rm.scorer import Scorer, score_items_with_tokens
from orchrm.tasks.grading import answer_key


@dataclass(frozen=True)
class Candidate:
    """One orchestration sample of a task, with what executing it gave."""

    orchestration: Orchestration | None  # None: unparseable
    answer: str | None = None
    correct: bool = False
    execution_tokens: int = 0
    logprob: float | None = None
    p_success: float | None = None  # the world's ground truth, when known
    orch_id: str = ""
    trajectory: str = ""  # the executed calls' outputs, for a trajectory-level judge
    reruns: tuple[tuple[str | None, bool], ...] = ()
    """World only: (answer, correct) of K more executions of the same plan (other seeds),
    from which vote-based selectors get an expected accuracy (`orchrm.bestofn.reruns`)."""


@dataclass(frozen=True)
class CandidateSet:
    """A task and its N candidates."""

    task_id: str
    question: str
    candidates: tuple[Candidate, ...]
    domain: str = ""


@dataclass(frozen=True)
class Selection:
    """What a selector chose and what choosing cost."""

    index: int
    scores: tuple[float | None, ...] = ()
    verification_tokens: int = 0
    executed: tuple[int, ...] = field(default=())
    """Candidates executed to produce the answer (all N for vote-based selectors)."""


Selector = Callable[[CandidateSet], Selection]


def first_max(values: Sequence[float | None]) -> int:
    """The first index of the highest value, None values left out (0 when all are None):
    how `orchrm` picks from its scores, and `orchrm serve`'s `/select` too."""
    best = max((v for v in values if v is not None), default=None)
    return next((i for i, v in enumerate(values) if v == best), 0)


def random_selector(seed: int = 0) -> Selector:
    """A uniformly random candidate (seeded per task)."""

    def select(task: CandidateSet) -> Selection:
        index = random.Random(f"{seed}:{task.task_id}").randrange(len(task.candidates))
        return Selection(index, executed=(index,))

    return select


def logp_selector(task: CandidateSet) -> Selection:
    """The candidate the orchestrator itself found most likely."""
    scores = tuple(c.logprob for c in task.candidates)
    index = first_max(scores)
    return Selection(index, scores, executed=(index,))


def majority_selector(task: CandidateSet) -> Selection:
    """Execute all N and vote on their answers (ties: the answer seen first); the chosen
    candidate is the first one that gave the winning answer. Answers that say the same
    thing vote together (`orchrm.grading.answer_key`: "(B)" and "The answer is B" on
    GPQA, "1,000" and "1000", "Paris." and "paris")."""
    answers = [answer_key(c.answer, task.domain) for c in task.candidates]
    counts = Counter(a for a in answers if a is not None)
    everyone = tuple(range(len(answers)))
    if not counts:
        return Selection(0, verification_tokens=_extra_executions(task, 0), executed=everyone)
    top = max(counts.values())
    winner = next(a for a in answers if a is not None and counts[a] == top)
    index = answers.index(winner)
    scores = tuple(float(counts[a]) if a is not None else None for a in answers)
    return Selection(index, scores, _extra_executions(task, index), everyone)


def oracle_selector(task: CandidateSet) -> Selection:
    """A correct candidate when there is one (pass@N)."""
    index = next((i for i, c in enumerate(task.candidates) if c.correct), 0)
    return Selection(index, executed=(index,))


def bayes_selector(task: CandidateSet) -> Selection:
    """The candidate with the highest true success probability (world only)."""
    scores = tuple(c.p_success for c in task.candidates)
    index = first_max(scores)
    return Selection(index, scores, executed=(index,))


def _extra_executions(task: CandidateSet, kept: int) -> int:
    return sum(c.execution_tokens for i, c in enumerate(task.candidates) if i != kept)


class RewardModelSelector:
    """argmax of a reward model's scores (`orchrm`, or any HF reward model off the shelf:
    `external-rm`), local or behind a server (any `orchrm.rm.scorer.Scorer`); with
    `weighted`, execute all N and sum the scores per answer (the weighted vote of
    search-and-learn). Verification tokens: the model's input tokens (plus the extra
    executions when weighted)."""

    def __init__(self, rm: Scorer | None, weighted: bool = False, share_scores_with=None):
        self.rm = rm
        self.weighted = weighted
        self._seen: dict[tuple[str, Orchestration], tuple[int, float]] = (
            {} if share_scores_with is None else share_scores_with._seen
        )
        """(input tokens, score) of each (question, plan) scored so far; one dict for
        the selectors of one model (`share_scores_with`), so `orchrm` and
        `orchrm-weighted` score each plan once between them."""

    def _score_new(self, items: list[tuple[str, Orchestration]]) -> None:
        todo = [item for item in dict.fromkeys(items) if item not in self._seen]
        if todo:
            scores, tokens = score_items_with_tokens(self.rm, todo)
            for item, count, score in zip(todo, tokens, scores, strict=True):
                self._seen[item] = (count, score)

    def warm(self, tasks: list[CandidateSet]) -> None:
        """Score every plan of `tasks` now, in one pass of length-sorted batches, so that
        the selections that follow only look their scores up."""
        self._score_new(
            [(t.question, c.orchestration) for t in tasks for c in t.candidates if c.orchestration]
        )

    def _score(self, question: str, plans: list[Orchestration]) -> list[tuple[int, float]]:
        """(input tokens, score) per plan; each (question, plan) is scored once, however
        many subsets of N it appears in (the tokens still count at every selection)."""
        self._score_new([(question, o) for o in plans])
        return [self._seen[(question, o)] for o in plans]

    def __call__(self, task: CandidateSet) -> Selection:
        where = [i for i, c in enumerate(task.candidates) if c.orchestration is not None]
        scored = self._score(task.question, [task.candidates[i].orchestration for i in where])
        tokens = sum(t for t, _ in scored)
        scores: list[float | None] = [None] * len(task.candidates)
        for i, (_, s) in zip(where, scored, strict=True):
            scores[i] = s
        if not self.weighted:
            index = first_max(scores)
            return Selection(index, tuple(scores), tokens, (index,))
        keys = [answer_key(c.answer, task.domain) for c in task.candidates]
        totals: dict[str, float] = {}
        for key, s in zip(keys, scores, strict=True):
            if key is not None and s is not None:  # votes weighted by sigmoid(score)
                totals[key] = totals.get(key, 0.0) + 1 / (1 + math.exp(-s))
        if not totals:
            index = first_max(scores)
        else:
            best = max(totals.values())
            winner = next(a for a in totals if totals[a] == best)
            index = keys.index(winner)
        everyone = tuple(range(len(task.candidates)))
        return Selection(index, tuple(scores), tokens + _extra_executions(task, index), everyone)

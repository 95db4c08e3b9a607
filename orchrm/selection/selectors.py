"""Best-of-N selection: pick one of N candidate orchestrations for a task, and count what
choosing cost.

Every selector takes a task and its candidates and returns a `Selection`: the chosen
index, the per-candidate scores it used, and its verification tokens (what it read and
wrote to choose). Reward-model selectors count their input tokens with the model's own
tokenizer; vote-based selectors pay the N - 1 extra executions they need; random, logp,
oracle and Bayes cost nothing to choose. Total tokens = orchestrator tokens of the
candidates drawn + verification + the execution that produces the answer, reported by
`orchrm.evaluation.metrics`.

Beyond the argmax of N, on the `orchrm` selector's scores: `TopKVoteSelector` executes
the k best and votes; `AdaptiveSelector` stops drawing candidates once the model is
confident; `CostAwareSelector` trades score against the cost predicted from the plan.
Beyond choosing, `orchrm.selection.search.SearchSelector` edits the N plans and may
return a better edit than any of them (`Selection.plan`).
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from orchrm.calibration.methods import Calibration, calibration_from_metadata
from orchrm.errors import ConfigError
from orchrm.orchestration import Orchestration
from orchrm.scoring.base import ModelInfo, Scorer
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
    from which vote-based selectors get an expected accuracy (`orchrm.evaluation.reruns`)."""
    orchestrator_tokens: int = 0
    """What the orchestrator read and wrote to produce this sample: the cost of drawing
    it, paid by every selector that looks at it."""


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
    drawn: int | None = None
    """Candidates drawn from the orchestrator, the first ones in sample order (None: all
    N); a selector that stops drawing early (`AdaptiveSelector`) saves the orchestrator
    tokens of the rest."""
    plan: Candidate | None = None
    """A plan none of the candidates is, executed in their place (`orchrm-search`'s edit
    of candidate `index`): its orchestration and, where the selector could run it, what
    executing it gave; None: the answer is candidate `index`'s."""
    edits: tuple[str, ...] = ()
    """The edits that made `plan` from candidate `index`, in order."""
    plan_score: float | None = None
    """What the selector ranked `plan` by, as `scores` for the candidates."""


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
    thing vote together (`orchrm.tasks.grading.answer_key`: "(B)" and "The answer is B" on
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
    `external-rm`), local or behind a server (any `orchrm.scoring.base.Scorer`); with
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

    def _score_new(self, items: list[tuple[str, Orchestration]], domains: list[str]) -> None:
        todo = {}
        for item, domain in zip(items, domains, strict=True):
            if item not in self._seen:
                todo.setdefault(item, domain)
        if todo:
            scored = self.rm.score([(q, o, d) for (q, o), d in todo.items()])
            for item, result in zip(todo, scored, strict=True):
                self._seen[item] = (result.tokens, result.score)

    def warm(self, tasks: list[CandidateSet]) -> None:
        """Score every plan of `tasks` now, in one pass of length-sorted batches, so that
        the selections that follow only look their scores up."""
        plans = [(t, c.orchestration) for t in tasks for c in t.candidates if c.orchestration]
        self._score_new([(t.question, o) for t, o in plans], [t.domain for t, _ in plans])

    def score_plans(
        self, task: CandidateSet, plans: list[Orchestration]
    ) -> list[tuple[int, float]]:
        """(input tokens, score) per plan of `task`, in one batch; each (question, plan)
        is scored once, however many subsets of N (or searches) it appears in (the
        tokens still count at every selection)."""
        self._score_new([(task.question, o) for o in plans], [task.domain] * len(plans))
        return [self._seen[(task.question, o)] for o in plans]

    def __call__(self, task: CandidateSet) -> Selection:
        where = [i for i, c in enumerate(task.candidates) if c.orchestration is not None]
        scored = self.score_plans(task, [task.candidates[i].orchestration for i in where])
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


def ranked(scores: Sequence[float | None]) -> list[int]:
    """Indices of the scored candidates, best first (equal scores: the earlier first, as
    `first_max`)."""
    return sorted((i for i, s in enumerate(scores) if s is not None), key=lambda i: (-scores[i], i))


def _standard(info: ModelInfo | None, scores: Sequence[float | None]) -> list[float | None]:
    """Scores in units of the model's reward spread (`ModelInfo.normalize`); raw without
    a model to ask (cross-validation's per-fold models)."""
    return info.normalize(scores) if info is not None else list(scores)


def _warm(base: Selector, tasks: list[CandidateSet]) -> None:
    """Let the base selector score every plan of `tasks` at once, when it can."""
    warm = getattr(base, "warm", None)
    if warm is not None:
        warm(tasks)


class TopKVoteSelector:
    """Execute the `k` best candidates by the reward model (`base`, the `orchrm`
    selector) and vote among their answers; a tie goes to the answer of the higher
    score. Between argmax (one execution) and majority (N): verification tokens are the
    model's input tokens plus the k - 1 extra executions. Scores are read before any
    execution, so re-executions change only the vote (`replays_reruns`)."""

    def __init__(self, base: Selector, k: int):
        if k < 1:
            raise ConfigError(f"top-k vote: k must be 1 or more, got {k}")
        self.base, self.k = base, k

    def warm(self, tasks: list[CandidateSet]) -> None:
        _warm(self.base, tasks)

    def __call__(self, task: CandidateSet) -> Selection:
        chosen = self.base(task)
        top = ranked(chosen.scores)[: self.k]
        if not top:  # nothing scored: the base's own pick, one execution
            return chosen
        keys = [answer_key(task.candidates[i].answer, task.domain) for i in top]
        counts = Counter(key for key in keys if key is not None)
        index = top[0]
        if counts:
            most = max(counts.values())
            index = next(i for i, key in zip(top, keys, strict=True) if counts.get(key) == most)
        extra = sum(task.candidates[i].execution_tokens for i in top if i != index)
        return Selection(index, chosen.scores, chosen.verification_tokens + extra, tuple(top))


def _normal_cdf(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


class AdaptiveSelector:
    """Draw candidates one at a time in sample order and stop as soon as the reward
    model is confident that the best so far will not be beaten by the draws left, or at
    N; execute the best drawn. Only the drawn candidates cost orchestrator and
    verification tokens (`Selection.drawn`). An evaluation, where all N exist already,
    reads their scores in sample order and stops where drawing would have.

    Later draws are taken as scores from the model's reward distribution, a normal of
    its training-time mean and spread (`ModelInfo.normalize` of `info`; raw scores
    without it).
    With r draws left and the best score so far at z spreads above the mean, it stops
    - with a calibration (`orchrm.calibration.methods`, from the model's `orchrm.json` or
      given): when the accuracy it expects to lose by stopping is at most `tolerance`:
      E[P(correct | best of all) - P(correct | best so far)], the best of all being
      the higher of the best so far and the best of r draws (max of r normals);
    - without: when the chance that one of the r draws scores higher, 1 - Phi(z)^r, is
      at most 1 - `confidence`.
    """

    LOSS_GRID = 120
    """Steps of the integral over the best later score (up to 6 spreads above)."""

    def __init__(
        self,
        base: Selector,
        info: ModelInfo | None = None,
        confidence: float = 0.9,
        calibration: Calibration | None = None,
        tolerance: float = 0.01,
    ):
        if not 0.0 < confidence < 1.0:
            raise ConfigError(f"adaptive: confidence must be in (0, 1), got {confidence}")
        if not 0.0 <= tolerance < 1.0:
            raise ConfigError(f"adaptive: tolerance must be in [0, 1), got {tolerance}")
        self.base, self.info = base, info
        self.confidence, self.tolerance = confidence, tolerance
        self.calibration = calibration or calibration_from_metadata(
            info.metadata if info is not None else None
        )
        zero, one = _standard(info, [0.0, 1.0])
        self._spread = 1.0 / (one - zero) if one != zero else 1.0
        self._mean = -zero * self._spread  # raw score = mean + spread x z

    def risk(self, drawn: Sequence[float | None], remaining: int) -> float:
        """What stopping after `drawn` risks with `remaining` draws left: the expected
        accuracy lost (with a calibration) or the chance of a higher later score."""
        scored = [s for s in drawn if s is not None]
        if not scored:
            return 1.0
        best = max(scored)
        z = (best - self._mean) / self._spread
        if self.calibration is None:
            return 1 - _normal_cdf(z) ** remaining
        p_best = self.calibration.probability([best])[0]
        steps = [z + 6.0 * i / self.LOSS_GRID for i in range(self.LOSS_GRID + 1)]
        below = [_normal_cdf(x) ** remaining for x in steps]  # P(best later <= x)
        middles = [self._mean + self._spread * (a + b) / 2 for a, b in itertools.pairwise(steps)]
        gains = [p - p_best for p in self.calibration.probability(middles)]
        return sum(g * (b - a) for g, a, b in zip(gains, below, below[1:], strict=False))

    def stop_after(self, scores: Sequence[float | None]) -> int:
        """How many of the candidates with these scores (in sample order) it draws."""
        limit = self.tolerance if self.calibration is not None else 1 - self.confidence
        for m in range(1, len(scores)):
            if self.risk(scores[:m], len(scores) - m) <= limit:
                return m
        return len(scores)

    def warm(self, tasks: list[CandidateSet]) -> None:
        _warm(self.base, tasks)

    def __call__(self, task: CandidateSet) -> Selection:
        full = self.base(task)
        n = len(task.candidates)
        m = self.stop_after(full.scores) if len(full.scores) == n else n
        if m == n:
            return full
        prefix = CandidateSet(task.task_id, task.question, task.candidates[:m], task.domain)
        part = self.base(prefix)  # the verification tokens of the drawn ones only
        scores = tuple(part.scores) + (None,) * (n - m)
        return Selection(part.index, scores, part.verification_tokens, (part.index,), m)


class CostAwareSelector:
    """argmax of score - `cost_weight` x log2(1 + predicted cost): the reward model's
    score (in units of its reward spread) less the cost predicted from the orchestration
    alone (`orchrm.selection.cost.predict_cost`: `measure` is tokens, calls or
    critical_path_calls, the latency). `cost_weight` is what a doubling of the cost is
    worth in reward spreads; 0 is plain argmax. Nothing runs before the choice: the
    verification tokens are the model's input tokens."""

    def __init__(
        self,
        base: Selector,
        info: ModelInfo | None = None,
        *,
        cost_weight: float = 0.1,
        measure: str = "tokens",
        run_config=None,
        cost_model=None,
    ):
        from orchrm.selection.cost import MEASURES

        if not cost_weight >= 0:
            raise ConfigError(f"orchrm-cost: cost_weight must be 0 or more, got {cost_weight}")
        if measure not in MEASURES:
            raise ConfigError(
                f"orchrm-cost: unknown cost measure {measure!r}: choose one of "
                + ", ".join(MEASURES)
            )
        self.base, self.info = base, info
        self.cost_weight, self.measure = cost_weight, measure
        self.run_config, self.cost_model = run_config, cost_model
        self._costs: dict[Orchestration, float] = {}

    def cost(self, orchestration: Orchestration) -> float:
        """The predicted cost of one execution, in the chosen measure."""
        if orchestration not in self._costs:
            from orchrm.selection.cost import predict_cost

            predicted = predict_cost(orchestration, self.run_config, self.cost_model)
            self._costs[orchestration] = float(getattr(predicted, self.measure))
        return self._costs[orchestration]

    def warm(self, tasks: list[CandidateSet]) -> None:
        _warm(self.base, tasks)

    def __call__(self, task: CandidateSet) -> Selection:
        chosen = self.base(task)
        if len(chosen.scores) != len(task.candidates):
            return chosen
        adjusted = tuple(
            None
            if s is None or c.orchestration is None
            else s - self.cost_weight * math.log2(1 + self.cost(c.orchestration))
            for s, c in zip(_standard(self.info, chosen.scores), task.candidates, strict=True)
        )
        index = first_max(adjusted)
        return Selection(index, adjusted, chosen.verification_tokens, (index,))

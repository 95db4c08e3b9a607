"""Improve a plan before anything runs: search over edits of the N sampled plans with the
reward model, and execute only the best plan found.

Best-of-N chooses among what the orchestrator sampled; the reward model scores any plan
from its text alone, so `PlanSearch` edits the sampled plans (`orchrm.orchestration.
edits`: change a sub-agent's type, add a checker on the sink, insert a review step,
remove, split, merge), scores the edits in batches through the same `Scorer` as argmax,
and keeps the plan with the best objective:

    objective = score - spread_weight x spread - cost_weight x log2(1 + predicted cost)
                - distance_penalty x edits

`score` is the reward model's score in units of its reward spread (`ModelInfo.normalize`);
over an ensemble of models it is their mean (`aggregate="mean"`) or their worst case
(`aggregate="min"`), and `spread` is their standard deviation (a conservative score: mean
minus spread); the cost is predicted from the plan
alone (`orchrm.selection.cost.predict_cost`). The search is a best-first beam: each round
expands the `beam` best plans not yet expanded that lie fewer than `max_edits` edits from
a sampled plan (the leash), and scores their new neighbours, in a seeded order, until
`budget` edited plans are scored. With a budget of 0 it is the cost-aware argmax of N.

A reward model pushed away from the plans it was trained on may overrate what it has not
seen (reward over-optimization): the leash, the distance penalty and the ensemble's
spread are what hold it back, and `benchmarks/plan_search.py` measures where the search
starts to fool itself on the world, whose true success probabilities are known.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass

from orchrm.errors import ConfigError
from orchrm.orchestration import Orchestration, neighbours, validate
from orchrm.scoring.base import ModelInfo
from orchrm.selection.cost import MEASURES, predict_cost
from orchrm.selection.selectors import (
    Candidate,
    CandidateSet,
    RewardModelSelector,
    Selection,
    first_max,
)

SEARCH_AGGREGATES = ("mean", "min")
"""How the search combines an ensemble's scores of a plan: their mean or their worst case."""

PlanOutcome = Callable[[CandidateSet, Orchestration], Candidate]
"""What executing a plan none of a task's candidates is gives: a `Candidate` of the plan
with its answer, correctness, execution tokens and, on the world, true success
probability (`orchrm.evaluation.reruns.world_outcome`)."""


@dataclass(frozen=True)
class Node:
    """One plan the search scored."""

    plan: Orchestration
    origin: int
    """The candidate it was edited from (or is)."""
    edits: tuple[str, ...]
    """The edits that made it from the candidate, in order (empty: the candidate)."""
    score: float
    """The reward model's score in units of its reward spread (over an ensemble, the
    search's aggregate of its members' scores)."""
    spread: float
    """The ensemble's standard deviation of that score (0 with one model)."""
    cost: float
    """The predicted cost of one execution, in the search's measure."""
    objective: float

    @property
    def depth(self) -> int:
        return len(self.edits)


@dataclass(frozen=True)
class SearchResult:
    """What one search found and spent."""

    best: Node
    candidates: tuple[Node | None, ...]
    """The N sampled plans as scored (None: unparseable)."""
    scored: int
    """Edited plans scored (at most the budget)."""
    tokens: int
    """Input tokens every model read: the N candidates and every scored edit."""
    history: tuple[Node, ...] = ()
    """Every edited plan scored, in the order scored. A search of the same settings and
    seed with a smaller budget b scores exactly the first b of them, so one search
    gives every smaller budget's result (`best_within`)."""

    def best_within(self, budget: int) -> Node:
        """The plan the same search returns with a budget of `budget` edited plans."""
        nodes = [n for n in self.candidates if n is not None] + list(self.history[:budget])
        return max(nodes, key=lambda n: n.objective)


Scores = list[list[tuple[int, float]]]
"""Per reward model, (input tokens, raw score) of each plan asked for, in order."""


class PlanSearch:
    """Best-first beam search over edits of a task's candidates, scored by `models`
    (`RewardModelSelector`s, whose caches keep each (question, plan) scored once; the
    first is `orchrm`'s, so the candidates' scores are argmax's). See the module
    docstring for the objective.

    The search itself is `steps`, which asks for scores and never scores: calling the
    search drives it with `models`; `orchrm serve`'s `/select` drives it with its own
    micro-batched model (then `models` is empty and `infos` says how many models score)."""

    @classmethod
    def from_options(
        cls,
        options,
        models: Sequence[RewardModelSelector] = (),
        infos: Sequence[ModelInfo | None] = (),
        **extra,
    ) -> PlanSearch:
        """The search a `SelectorOptions` asks for (`search_*`, `cost_weight`,
        `cost_measure`); `extra` sets the other arguments."""
        return cls(
            models,
            infos,
            budget=options.search_budget,
            max_edits=options.search_max_edits,
            beam=options.search_beam,
            distance_penalty=options.search_distance_penalty,
            cost_weight=options.cost_weight,
            measure=options.cost_measure,
            **extra,
        )

    def __init__(
        self,
        models: Sequence[RewardModelSelector] = (),
        infos: Sequence[ModelInfo | None] = (),
        *,
        budget: int = 8,
        max_edits: int = 2,
        beam: int = 2,
        distance_penalty: float = 0.0,
        cost_weight: float = 0.1,
        measure: str = "tokens",
        spread_weight: float = 0.0,
        aggregate: str = "mean",
        kinds: tuple[str, ...] | None = None,
        max_agents: int = 6,
        run_config=None,
        cost_model=None,
        seed: int = 0,
    ):
        if not models and not infos:
            raise ConfigError("orchrm-search: give at least one reward model to score plans")
        for name, value in (("budget", budget), ("max_edits", max_edits), ("beam", beam)):
            if value < (0 if name == "budget" else 1):
                least = 0 if name == "budget" else 1
                raise ConfigError(f"orchrm-search: {name} must be {least} or more, got {value}")
        for name, value in (
            ("distance_penalty", distance_penalty),
            ("cost_weight", cost_weight),
            ("spread_weight", spread_weight),
        ):
            if not value >= 0:
                raise ConfigError(f"orchrm-search: {name} must be 0 or more, got {value}")
        if aggregate not in SEARCH_AGGREGATES:
            raise ConfigError(
                f"orchrm-search: unknown aggregate {aggregate!r}: choose one of "
                + ", ".join(SEARCH_AGGREGATES)
            )
        if measure not in MEASURES:
            raise ConfigError(
                f"orchrm-search: unknown cost measure {measure!r}: choose one of "
                + ", ".join(MEASURES)
            )
        self.models = tuple(models)
        self.infos = tuple(infos) + (None,) * (len(self.models) - len(infos))
        if self.models and len(self.infos) != len(self.models):
            raise ConfigError(
                f"orchrm-search: {len(self.infos)} model infos for {len(self.models)} models"
            )
        self.budget, self.max_edits, self.beam = budget, max_edits, beam
        self.distance_penalty, self.cost_weight = distance_penalty, cost_weight
        self.spread_weight, self.measure = spread_weight, measure
        self.aggregate = aggregate
        self.kinds, self.max_agents = kinds, max_agents
        self.run_config, self.cost_model, self.seed = run_config, cost_model, seed
        self._costs: dict[Orchestration, float] = {}

    def cost(self, plan: Orchestration) -> float:
        """The predicted cost of one execution of `plan`, in the search's measure."""
        if plan not in self._costs:
            predicted = predict_cost(plan, self.run_config, self.cost_model)
            self._costs[plan] = float(getattr(predicted, self.measure))
        return self._costs[plan]

    def warm(self, tasks: list[CandidateSet]) -> None:
        """Score every candidate of `tasks` with every model at once."""
        for model in self.models:
            model.warm(tasks)

    def _nodes(
        self, made: list[tuple[Orchestration, int, tuple[str, ...]]], scores: Scores
    ) -> tuple[list[Node], int]:
        """Each (plan, origin, edits) as a node from every model's scores of it, and the
        input tokens read."""
        if len(scores) != len(self.infos) or any(len(c) != len(made) for c in scores):
            raise ValueError(
                f"orchrm-search: asked {len(self.infos)} models for {len(made)} scores each"
            )
        columns, tokens = [], 0
        for column, info in zip(scores, self.infos, strict=True):
            tokens += sum(t for t, _ in column)
            raw = [s for _, s in column]
            columns.append(info.normalize(raw) if info is not None else raw)
        nodes = []
        for n, (plan, origin, edits) in enumerate(made):
            values = [column[n] for column in columns]
            score = min(values) if self.aggregate == "min" else statistics.fmean(values)
            spread = statistics.pstdev(values) if len(values) > 1 else 0.0
            cost = self.cost(plan)
            objective = (
                score
                - self.spread_weight * spread
                - self.cost_weight * math.log2(1 + cost)
                - self.distance_penalty * len(edits)
            )
            nodes.append(Node(plan, origin, edits, score, spread, cost, objective))
        return nodes, tokens

    def steps(
        self, task: CandidateSet
    ) -> Generator[list[Orchestration], Scores, SearchResult | None]:
        """The search of `task` as a generator: it yields the plans it needs scored (the
        parsed candidates first, then each round's edits) and is sent their `Scores`;
        it returns the `SearchResult` (None: no candidate parses)."""
        where = [i for i, c in enumerate(task.candidates) if c.orchestration is not None]
        if not where:
            return None
        made = [(task.candidates[i].orchestration, i, ()) for i in where]
        starts, tokens = self._nodes(made, (yield [plan for plan, _, _ in made]))
        candidates: list[Node | None] = [None] * len(task.candidates)
        for i, node in zip(where, starts, strict=True):
            candidates[i] = node
        seen: dict[Orchestration, Node] = {}
        for node in starts:  # a plan sampled twice keeps its first place
            seen.setdefault(node.plan, node)
        # an edit of a valid plan is valid: only the sampled plans need checking
        expanded = {n.plan for n in starts if validate(n.plan)}
        order = random.Random(f"{self.seed}:{task.task_id}")
        history: list[Node] = []
        while len(history) < self.budget:
            open_ = [
                n for n in seen.values() if n.plan not in expanded and n.depth < self.max_edits
            ]
            if not open_:
                break
            frontier = sorted(open_, key=lambda n: -n.objective)[: self.beam]
            made_now: dict[Orchestration, tuple[Orchestration, int, tuple[str, ...]]] = {}
            for node in frontier:
                expanded.add(node.plan)
                for edit in neighbours(node.plan, self.kinds, self.max_agents):
                    if edit.plan not in seen and edit.plan not in made_now:
                        made_now[edit.plan] = (edit.plan, node.origin, (*node.edits, edit.what))
            todo = list(made_now.values())
            order.shuffle(todo)
            todo = todo[: self.budget - len(history)]
            if not todo:
                continue
            nodes, spent = self._nodes(todo, (yield [plan for plan, _, _ in todo]))
            tokens += spent
            history += nodes
            for node in nodes:
                seen[node.plan] = node
        best = max(seen.values(), key=lambda n: n.objective)  # max keeps the first of ties
        return SearchResult(best, tuple(candidates), len(history), tokens, tuple(history))

    def __call__(self, task: CandidateSet) -> SearchResult | None:
        """The best plan of `task`'s candidates and their edits, scored by `models` in
        one batch a round each (None: no candidate parses)."""
        if not self.models:
            raise ConfigError("orchrm-search: no reward model to score with here")
        steps = self.steps(task)
        try:
            plans = next(steps)
            while True:
                plans = steps.send([m.score_plans(task, plans) for m in self.models])
        except StopIteration as done:
            return done.value


class SearchSelector:
    """`orchrm-search`: a `PlanSearch` from the N candidates, executing only the plan it
    returns. When that is a candidate, the selection is it (`index`); when it is an edit,
    the selection carries it (`Selection.plan`, made from candidate `index` by
    `Selection.edits`), with what executing it gave when `outcome` can run it (the
    world's, in an evaluation). Verification tokens: every model's input tokens for the
    N candidates and every edit scored."""

    def __init__(self, search: PlanSearch, outcome: PlanOutcome | None = None):
        self.search, self.outcome = search, outcome

    def warm(self, tasks: list[CandidateSet]) -> None:
        self.search.warm(tasks)

    def __call__(self, task: CandidateSet) -> Selection:
        found = self.search(task)
        if found is None:
            return Selection(0, (None,) * len(task.candidates), 0, (0,))
        scores = tuple(None if n is None else n.objective for n in found.candidates)
        best = found.best
        if not best.edits:
            index = first_max(scores)
            return Selection(index, scores, found.tokens, (index,))
        plan = self.outcome(task, best.plan) if self.outcome else Candidate(best.plan)
        return Selection(
            best.origin,
            scores,
            found.tokens,
            (),
            plan=plan,
            edits=best.edits,
            plan_score=best.objective,
        )

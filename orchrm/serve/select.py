"""`/select` on `orchrm serve`: best-of-N with any selector of the registry
(`orchrm.selection.registry`) that needs only the reward model and the candidates a
request gives.

Request `{"question", "orchestrations", "selector", "answers", "selector_options"}`:
- `selector` (default `orchrm`), one of `SERVED`: `orchrm` (argmax of the scores),
  `orchrm-adaptive` (reads the candidates in the order given and stops where drawing
  would have: `drawn`), `orchrm-cost` (the score less the cost predicted from each
  plan), and the votes `orchrm-top2-vote` and `orchrm-top3-vote`, which need `answers`.
  The other registered selectors need what a request does not hold (every candidate
  executed, the orchestrator's logprobs, an LLM judge, the world) and are refused like
  an unknown name: 422 `unknown_selector`, listing the served ones.
- `answers`: the answer each orchestration gave when executed (null: not executed), one
  per orchestration; required by the votes, read by no other selector.
- `selector_options`: any `orchrm.selection.options.SelectorOptions` field (a wrong name,
  type or value is a 422 naming it); the others keep their defaults.
- `orchrm-search` (`SEARCHES`) goes beyond choosing: it edits the orchestrations, has
  the model score the edits (rendered in a prepare worker, scored in the micro-batcher,
  round by round, at most `search_budget` of them, itself at most `max_items`), and
  answers with the plan to execute: `plan`, the edit of orchestration `chosen` as harmony
  XML, with `edits` naming each edit (null and [] when an orchestration itself is best);
  `tokens` counts every edit scored.

The body is read in a prepare worker (`prepare_select`), its plans scored in the
micro-batcher, and the choice made in a prepare worker again (`choose`): the cost a plan
predicts grows with the plan, so it runs where the request's deadline can stop it.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any

from orchrm.errors import ConfigError
from orchrm.orchestration import to_harmony
from orchrm.scoring.base import ModelInfo
from orchrm.selection.options import SelectorOptions
from orchrm.selection.registry import BY_NAME, RERUN_SELECTORS, LineupInputs
from orchrm.selection.search import PlanSearch, Scores, SearchResult
from orchrm.selection.selectors import Candidate, CandidateSet, Selection, first_max
from orchrm.serve.prepare import (
    ApiError,
    Limits,
    Rendered,
    Scored,
    answer_of,
    check_text,
    decode,
    domain_of,
    kind,
    known_fields,
    prepare_items,
    scoring_body,
)

SERVED = ("orchrm", "orchrm-top2-vote", "orchrm-top3-vote", "orchrm-adaptive", "orchrm-cost")
"""The selectors `/select` runs on the `orchrm` selector's scores alone."""
SEARCHES = ("orchrm-search",)
"""The selectors `/select` runs by scoring plans the request does not hold: edits of its
orchestrations, rendered in a prepare worker and scored in the micro-batcher, round by
round (`orchrm.selection.search.PlanSearch.steps`)."""
VOTES = tuple(name for name in SERVED if name in RERUN_SELECTORS)
"""The served selectors that read executed answers (`answers` required)."""


@dataclass(frozen=True)
class SelectBody:
    """A `/select` request as the service needs it."""

    question: str
    items: list[Scored | Rendered]
    """Each orchestration, prepared (`Rendered` keep their parsed plans)."""
    selector: str
    answers: tuple[str | None, ...] | None
    options: SelectorOptions
    domain: str = ""
    """The task's domain, as the request's orchestrations were rendered with it (a
    search renders its edits the same way)."""


@dataclass(frozen=True)
class Choice:
    """What the selector chose among a request's orchestrations."""

    index: int | None
    """The chosen orchestration (None: none parses)."""
    scores: tuple[float | None, ...]
    """What the selector ranked by (the cost-adjusted score for `orchrm-cost`; None for
    an unparseable orchestration and for one `orchrm-adaptive` did not draw)."""
    executed: tuple[int, ...]
    """The orchestrations whose executions the choice reads (the k best for a vote)."""
    drawn: int
    """How many orchestrations, the first ones, the selector read."""
    plan: str | None = None
    """`orchrm-search`: the edit of orchestration `index` to execute in its place, as
    harmony XML (None: execute orchestration `index` itself)."""
    edits: tuple[str, ...] = ()
    """The edits that made `plan`, in order."""
    tokens: int | None = None
    """`orchrm-search`: the input tokens the model read for the orchestrations and every
    edit scored (None: the orchestrations' alone)."""


def prepare_select(body: bytes, limits: Limits, deadline: float) -> SelectBody:
    """A `/select` body read, checked and its orchestrations prepared (422 for an
    unknown selector, wrong answers or options, naming the field)."""
    value = decode(body)
    known_fields(value, "select")
    question, texts = scoring_body(value, limits, required=True)
    selector = selector_name(value.get("selector", "orchrm"))
    answers = answers_of(value.get("answers"), len(texts), limits)
    if answers is None and selector in VOTES:
        raise ApiError(
            422,
            "missing_field",
            f"{selector} votes among executed answers: give answers, one per "
            "orchestration (null for one not executed)",
            "answers",
        )
    options = options_of(value.get("selector_options"))
    if selector in SEARCHES and options.search_budget > limits.max_items:
        raise ApiError(
            422,
            "invalid_value",
            f"search_budget {options.search_budget} is over max_items ({limits.max_items}), "
            "the most orchestrations one request may have scored",
            "selector_options.search_budget",
        )
    pairs = [(question, t) for t in texts]
    domain = domain_of(value, limits)
    items = prepare_items(pairs, limits, deadline, keep_plans=True, domain=domain)
    return SelectBody(question, items, selector, answers, options, domain)


def selector_name(name: Any) -> str:
    """`name` when `/select` serves it; 422 `unknown_selector` otherwise."""
    if not isinstance(name, str):
        raise ApiError(
            422, "wrong_type", f"selector must be a string, got {kind(name)}", "selector"
        )
    if name in SERVED or name in SEARCHES:
        return name
    served = ", ".join(SERVED + SEARCHES)
    if name in BY_NAME:
        message = (
            f"selector {name!r} needs more than the reward model and the orchestrations "
            f"given; /select serves {served}"
        )
    else:
        message = f"unknown selector {name[:100]!r}: /select serves {served}"
    raise ApiError(422, "unknown_selector", message, "selector")


def answers_of(value: Any, count: int, limits: Limits) -> tuple[str | None, ...] | None:
    """The request's `answers`, one string or null per orchestration (None: absent)."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise ApiError(422, "wrong_type", "answers must be a list of strings or nulls", "answers")
    if len(value) != count:
        raise ApiError(
            422,
            "length_mismatch",
            f"answers has {len(value)} items and orchestrations {count}: one answer per "
            "orchestration (null for one not executed)",
            "answers",
        )
    for i, answer in enumerate(value):
        if answer is not None and not isinstance(answer, str):
            field = f"answers[{i}]"
            message = f"{field} must be a string or null, got {kind(answer)}"
            raise ApiError(422, "wrong_type", message, field)
        if answer is not None:
            check_text(f"answers[{i}]", answer, limits.max_text_chars)
    return tuple(value)


def options_of(value: Any) -> SelectorOptions:
    """`SelectorOptions` with the request's `selector_options` applied."""
    if value is None:
        return SelectorOptions()
    if not isinstance(value, dict):
        message = f"selector_options must be an object, got {kind(value)}"
        raise ApiError(422, "wrong_type", message, "selector_options")
    known = typing.get_type_hints(SelectorOptions)
    for name, given in value.items():
        field = f"selector_options.{name}"
        if name not in known:
            message = f"unknown selector option {name[:100]!r}: known are {', '.join(known)}"
            raise ApiError(422, "unknown_field", message, field)
        number = isinstance(given, int | float) and not isinstance(given, bool)
        if known[name] is float and not number:
            raise ApiError(422, "wrong_type", f"{field} must be a number, got {kind(given)}", field)
        if known[name] is str and not isinstance(given, str):
            raise ApiError(422, "wrong_type", f"{field} must be a string, got {kind(given)}", field)
        whole = isinstance(given, int) and not isinstance(given, bool)
        if known[name] is int and not whole:
            message = f"{field} must be a whole number, got {kind(given)}"
            raise ApiError(422, "wrong_type", message, field)
    try:
        return SelectorOptions(**value)
    except ConfigError as err:
        raise ApiError(422, "invalid_value", str(err), "selector_options") from None


class _ServedScores:
    """The `orchrm` selector on the scores the service has already computed: argmax over
    the parsed candidates (`Candidate.orch_id` is the candidate's index)."""

    def __init__(self, scores: list[float], tokens: list[int]):
        self.scores, self.tokens = scores, tokens

    def __call__(self, task: CandidateSet) -> Selection:
        where = [int(c.orch_id) for c in task.candidates]
        parsed = [c.orchestration is not None for c in task.candidates]
        scores = tuple(self.scores[i] if p else None for i, p in zip(where, parsed, strict=True))
        tokens = sum(self.tokens[i] for i, p in zip(where, parsed, strict=True) if p)
        index = first_max(scores)
        return Selection(index, scores, tokens, (index,))


@dataclass(frozen=True)
class SelectJob:
    """What a prepare worker needs to choose: the candidates and their scores."""

    selector: str
    task: CandidateSet
    """The request's orchestrations as candidates (`orch_id`: the index)."""
    scores: tuple[float, ...]
    tokens: tuple[int, ...]
    options: SelectorOptions
    metadata: dict
    """The served model's `orchrm.json`."""


def select_job(body: SelectBody, results: list[Scored], metadata: dict) -> SelectJob:
    """The choice to make for a scored request (the plans, not their rendered texts)."""
    plans = [item.orchestration if isinstance(item, Rendered) else None for item in body.items]
    answers = body.answers or (None,) * len(plans)
    candidates = tuple(
        Candidate(plan, answer=answer, orch_id=str(i))
        for i, (plan, answer) in enumerate(zip(plans, answers, strict=True))
    )
    return SelectJob(
        body.selector,
        CandidateSet("request", body.question, candidates),
        tuple(r.score for r in results),
        tuple(r.tokens for r in results),
        body.options,
        metadata,
    )


def choose(job: SelectJob) -> Choice:
    """Run the job's selector, from the registry, on the scores (a prepare worker's job)."""
    base = _ServedScores(list(job.scores), list(job.tokens))
    inputs = LineupInputs(rm_info=ModelInfo(job.metadata), rm_selector=base, options=job.options)
    chosen = BY_NAME[job.selector].build(inputs, {"orchrm": base})(job.task)
    drawn = chosen.drawn if chosen.drawn is not None else len(job.task.candidates)
    return Choice(chosen.index, tuple(chosen.scores), tuple(chosen.executed), drawn)


def search_of(job: SelectJob) -> PlanSearch:
    """The search `orchrm-search` runs on a request: its options, the served model's
    reward statistics, and no model of its own (the service scores what it asks for)."""
    return PlanSearch.from_options(job.options, infos=[ModelInfo(job.metadata)])


def candidate_scores(job: SelectJob) -> Scores:
    """The scores a search asks for first: its parsed orchestrations', already known."""
    parsed = [i for i, c in enumerate(job.task.candidates) if c.orchestration is not None]
    return [[(job.tokens[i], job.scores[i]) for i in parsed]]


def search_choice(job: SelectJob, found: SearchResult) -> Choice:
    """The `/select` choice of a finished search."""
    scores = tuple(None if n is None else n.objective for n in found.candidates)
    best = found.best
    if not best.edits:
        index = first_max(scores)
        return Choice(index, scores, (index,), len(scores), tokens=found.tokens)
    return Choice(
        best.origin,
        scores,
        (),
        len(scores),
        plan=to_harmony(best.plan),
        edits=best.edits,
        tokens=found.tokens,
    )


def nothing_parses(body: SelectBody) -> Choice:
    """The choice when no orchestration parses: none."""
    return Choice(None, (None,) * len(body.items), (), len(body.items))


def select_answer(body: SelectBody, results: list[Scored], choice: Choice) -> dict:
    """The `/select` answer."""
    return {
        "selector": body.selector,
        "chosen": choice.index,
        "scores": [r.score for r in results],
        "selection_scores": list(choice.scores),
        "executed": list(choice.executed),
        "drawn": choice.drawn,
        "results": [answer_of(r) for r in results],
        "tokens": sum(r.tokens for r in results) if choice.tokens is None else choice.tokens,
        "plan": choice.plan,
        "edits": list(choice.edits),
    }

"""One scorer interface for everything that reads reward-model scores: best-of-N
selectors, the GRPO and verl rewards, `orchrm score`, `orchrm eval`, `orchrm serve`'s
`/select`.

A `Scorer` is a local `orchrm.scoring.local.OrchRM` or an `orchrm.scoring.remote.RemoteScorer`
(a model behind vLLM, SGLang, an OpenRLHF reward server or `orchrm serve`); `load_scorer`
makes either from a model directory, a server URL, or both (the directory then says how
to render for the served model). It has one verb, `score`: items (question,
orchestration or harmony text, and optionally the task's domain) in, one `Scored`
(score and the input tokens the model read) out per item. How an item becomes the text
the model reads is the scorer's own business: `render_for_rm` within the model's budget,
or a server that renders for itself. What a consumer reads of the model apart from its
scores (rendering version, budget, reward statistics, calibration) is its `info`, a
`ModelInfo`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol, runtime_checkable

from orchrm.orchestration import Orchestration, TokenCounter, render_for_rm
from orchrm.parse import ParseError, parse_harmony
from orchrm.scoring.callers import CallerBatcher

Item = tuple[str, Orchestration | str] | tuple[str, Orchestration | str, str]
"""(question, orchestration or harmony text) or (question, orchestration or harmony
text, domain of the task): what `Scorer.score` scores."""


@dataclass(frozen=True)
class Scored:
    """The score of one item and what scoring it cost."""

    score: float | None
    """The model's raw reward (higher is better); None for harmony text that does not
    parse (`reason`, `message`)."""
    tokens: int
    """Input tokens the model read, special tokens included: the verification cost (0
    for an item that does not parse)."""
    reason: str = ""
    """Why there is no score: the `ParseError` reason code ('' when scored)."""
    message: str = ""
    """The `ParseError` message ('' when scored)."""
    mean: float | None = None
    """An ensemble's mean of its members' normalized rewards (None: one model)."""
    spread: float | None = None
    """An ensemble's standard deviation of its members' normalized rewards, its
    uncertainty about the item (None: one model)."""
    members: tuple[float, ...] = ()
    """An ensemble's members' normalized rewards, in member order (empty: one model)."""


@dataclass(frozen=True)
class ModelInfo:
    """What a consumer reads of a reward model apart from its scores."""

    metadata: dict = field(default_factory=dict)
    """The model's `orchrm.json` (rendering version, max_length, reward statistics,
    calibration); {} for a model used off the shelf."""
    budget: tuple[int, TokenCounter] | None = None
    """(`max_tokens`, `count_tokens`) every text is cut to when rendered here; None where
    nothing renders here (a server that renders for itself, or scores alone)."""

    @property
    def render_version(self) -> str | None:
        """The rendering the model was trained on (None: not known)."""
        return self.metadata.get("render_version")

    @property
    def reads_domain(self) -> bool:
        """Whether the model was trained on texts with the domain line."""
        return bool(self.metadata.get("domain_in_text"))

    @property
    def calibration(self) -> dict | None:
        """The calibration map stored with the model, in its `to_dict` form
        (`orchrm.calibration.methods.calibration_from_metadata` reads it); None: none."""
        return self.metadata.get("calibration")

    def normalize(self, scores: Sequence[float | None]) -> list[float | None]:
        """(score - mean) / std with the training-time reward statistics of `orchrm.json`
        (none known: the scores as they are)."""
        mean = float(self.metadata.get("reward_mean", 0.0))
        std = float(self.metadata.get("reward_std", 1.0)) or 1.0
        return [None if s is None else (s - mean) / std for s in scores]


@runtime_checkable
class Scorer(Protocol):
    """What every consumer uses of a reward model."""

    @property
    def info(self) -> ModelInfo:
        """What the model is, apart from its scores."""
        ...

    def score(self, items: Sequence[Item]) -> list[Scored]:
        """One `Scored` per item, in input order, from batched passes."""
        ...


def parse_items(items: Sequence[Item]) -> list[tuple[str, Orchestration, str] | ParseError]:
    """Each item as (question, plan, domain), or the `ParseError` of harmony text that
    does not parse; a domain left out is ''."""
    out: list[tuple[str, Orchestration, str] | ParseError] = []
    for item in items:
        question, o = item[0], item[1]
        domain = item[2] if len(item) > 2 else ""
        if isinstance(o, str):
            try:
                o = parse_harmony(o)
            except ParseError as err:
                out.append(err)
                continue
        out.append((question, o, domain))
    return out


def gather(parsed: Sequence[object], scored: Sequence[Scored]) -> list[Scored]:
    """One `Scored` per entry of `parse_items`: the next of `scored` for a parsed item,
    None with the reason for a `ParseError`."""
    it = iter(scored)
    out = [
        Scored(None, 0, p.reason, p.message) if isinstance(p, ParseError) else next(it)
        for p in parsed
    ]
    if next(it, None) is not None:
        raise ValueError("more scores than parsed items")
    return out


class RenderingScorer:
    """What a reward model that renders its texts here shares, local or remote: `render`
    by its `budget` (from its `tokenizer` and `max_length`), `score` (an unparseable
    harmony text gets None) and `info`. A subclass gives `tokenizer`, `max_length`,
    `metadata` and `score_texts` (a `Scored` per text already rendered, in input
    order)."""

    metadata: dict

    @cached_property
    def budget(self) -> tuple[int, TokenCounter]:
        """The model's `render_budget`: what `render` cuts every text to."""
        from orchrm.rmodel.tokens import render_budget

        return render_budget(self.tokenizer, self.max_length)

    @property
    def info(self) -> ModelInfo:
        """The model's `orchrm.json` and rendering budget."""
        return ModelInfo(self.metadata, self.budget)

    def render(self, question: str, orchestration: Orchestration, domain: str = "") -> str:
        """The text the model reads, cut to its budget by its own tokenizer; the domain
        line only for a model that reads it (`ModelInfo.reads_domain`)."""
        domain = domain if ModelInfo(self.metadata).reads_domain else ""
        return render_for_rm(question, orchestration, *self.budget, domain=domain)

    def score(self, items: Sequence[Item]) -> list[Scored]:
        """One `Scored` per item, in input order: each parsed item rendered (`render`)
        and all of them scored together (`score_texts`). Safe to call from many threads
        at once: concurrent calls are scored together, one round at a time
        (`orchrm.scoring.callers`), so the model and its tokenizer see one thread."""
        callers = self.__dict__.get("_callers")
        if callers is None:  # setdefault: two first callers still share one batcher
            callers = self.__dict__.setdefault("_callers", CallerBatcher(self._score_round))
        return callers(items)

    def __getstate__(self) -> dict:
        """A copy or a pickle of the scorer gets a batcher of its own on first use."""
        state = dict(self.__dict__)
        state.pop("_callers", None)
        return state

    def _score_round(self, items: list[Item]) -> list[Scored]:
        """`score` of one round's items, in the batcher's worker thread (`CallerBatcher`)."""
        parsed = parse_items(items)
        texts = [self.render(*p) for p in parsed if not isinstance(p, ParseError)]
        return gather(parsed, self.score_texts(texts))

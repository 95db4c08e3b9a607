"""One scorer interface for everything that reads reward-model scores: best-of-N
selectors, the GRPO and verl rewards, `orchrm score`, `orchrm eval`.

A `Scorer` is a local `orchrm.scoring.local.OrchRM` or an `orchrm.scoring.remote.RemoteScorer` (a
model behind vLLM, SGLang, an OpenRLHF reward server or `orchrm serve`); `load_scorer`
makes either from a model directory, a server URL, or both (the directory then says how
to render for the served model). Consumers score parsed orchestrations with
`score_items_with_tokens`, which lets a server that renders for itself do so.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Protocol, runtime_checkable

from orchrm.orchestration import Orchestration, TokenCounter, render_for_rm
from orchrm.parse import ParseError, parse_harmony


@runtime_checkable
class Scorer(Protocol):
    """What every consumer uses of a reward model."""

    metadata: dict
    """The model's `orchrm.json` (rendering version, max_length, reward statistics)."""

    @property
    def budget(self) -> tuple[int, TokenCounter]:
        """(`max_tokens`, `count_tokens`) `render` cuts every text to."""
        ...

    def render(self, question: str, orchestration: Orchestration, domain: str = "") -> str:
        """The text the model reads for (question, orchestration) of a task of `domain`."""
        ...

    def score_batch(self, items: list[tuple[str, Orchestration | str]]) -> list[float | None]:
        """Scores of (question, orchestration or harmony text) items, in input order;
        None for text that does not parse."""
        ...

    def score_texts_with_tokens(self, texts: list[str]) -> tuple[list[float], list[int]]:
        """(raw reward, input tokens) of each rendered text, in input order."""
        ...

    def normalize(self, scores: list[float | None]) -> list[float | None]:
        """(score - mean) / std with the model's training-time reward statistics."""
        ...


class RenderingScorer:
    """What a reward model that renders its texts here shares, local or remote: `render`
    by its `budget` (from its `tokenizer` and `max_length`), `score`, `score_batch` (an
    unparseable harmony text gets None), `score_items_with_tokens` and `normalize`. A
    subclass gives `tokenizer`, `max_length`, `metadata` and `score_texts_with_tokens`."""

    metadata: dict

    @cached_property
    def budget(self) -> tuple[int, TokenCounter]:
        """The model's `render_budget`: what `render` cuts every text to."""
        from orchrm.scoring.backbone import render_budget

        return render_budget(self.tokenizer, self.max_length)

    @property
    def reads_domain(self) -> bool:
        """Whether the model was trained on texts with the domain line (one model of
        every domain), and so is given it."""
        return bool(self.metadata.get("domain_in_text"))

    def render(self, question: str, orchestration: Orchestration, domain: str = "") -> str:
        """The text the model reads, cut to its budget by its own tokenizer; the domain
        line only for a model that reads it."""
        domain = domain if self.reads_domain else ""
        return render_for_rm(question, orchestration, *self.budget, domain=domain)

    def score(self, question: str, orchestrations: list[Orchestration | str]) -> list[float | None]:
        """Scores of several orchestrations of one question (higher is better)."""
        return self.score_batch([(question, o) for o in orchestrations])

    def score_batch(self, items: list[tuple[str, Orchestration | str]]) -> list[float | None]:
        """Scores of (question, orchestration or harmony text) items, in input order;
        None for harmony text that does not parse."""
        parsed: list[tuple[str, Orchestration] | None] = []
        for question, o in items:
            if isinstance(o, str):
                try:
                    o = parse_harmony(o)
                except ParseError:
                    parsed.append(None)
                    continue
            parsed.append((question, o))
        scores = iter(self.score_items_with_tokens([p for p in parsed if p is not None])[0])
        return [None if p is None else next(scores) for p in parsed]

    def score_items_with_tokens(
        self,
        items: Sequence[tuple[str, Orchestration | str]],
        domains: Sequence[str] | None = None,
    ) -> tuple[list[float], list[int]]:
        """(raw reward, input tokens) of (question, orchestration) items, in order, each
        of its task's domain in `domains` (None: no domain known)."""
        plans = [(q, parse_harmony(o) if isinstance(o, str) else o) for q, o in items]
        texts = [
            self.render(q, o, d) for (q, o), d in zip(plans, _domains(items, domains), strict=True)
        ]
        return self.score_texts_with_tokens(texts)

    def normalize(self, scores: list[float | None]) -> list[float | None]:
        """(score - mean) / std with the training-time reward statistics of `orchrm.json`
        (none known: the scores as they are)."""
        mean = float(self.metadata.get("reward_mean", 0.0))
        std = float(self.metadata.get("reward_std", 1.0)) or 1.0
        return [None if s is None else (s - mean) / std for s in scores]


def _domains(items: Sequence, domains: Sequence[str] | None) -> Sequence[str]:
    if domains is None:
        return [""] * len(items)
    if len(domains) != len(items):
        raise ValueError(f"{len(domains)} domains for {len(items)} items")
    return domains


def score_items_with_tokens(
    scorer: Scorer,
    items: Sequence[tuple[str, Orchestration | str]],
    domains: Sequence[str] | None = None,
) -> tuple[list[float], list[int]]:
    """(raw reward, input tokens) of (question, orchestration) items, in input order;
    an orchestration may be harmony text that parses. The scorer's own
    `score_items_with_tokens` when it has one (a server that renders for itself gets
    the text as written), else `render` and `score_texts_with_tokens`."""
    own = getattr(scorer, "score_items_with_tokens", None)
    if own is not None:
        return own(list(items), domains) if domains is not None else own(list(items))
    plans = [(q, parse_harmony(o) if isinstance(o, str) else o) for q, o in items]
    texts = [
        scorer.render(q, o, d) for (q, o), d in zip(plans, _domains(items, domains), strict=True)
    ]
    return scorer.score_texts_with_tokens(texts)

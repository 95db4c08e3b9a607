"""One scorer interface for everything that reads reward-model scores: best-of-N
selectors, the GRPO and verl rewards, `orchrm score`, `orchrm eval`.

A `Scorer` is a local `orchrm.rm.model.OrchRM` or an `orchrm.rm.remote.RemoteScorer` (a
model behind vLLM, SGLang, an OpenRLHF reward server or `orchrm serve`); `load_scorer`
makes either from a model directory, a server URL, or both (the directory then says how
to render for the served model). Consumers score parsed orchestrations with
`score_items_with_tokens`, which lets a server that renders for itself do so.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Protocol, runtime_checkable

from orchrm.errors import ConfigError
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
        from orchrm.rm.model import render_budget

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


def load_scorer(
    rm: str | Path | None = None,
    rm_url: str | None = None,
    protocol: str | None = None,
    *,
    batch_size: int = 32,
    device: str | None = None,
    dtype: str = "auto",
    check_version: bool = True,
    trust_remote_code: bool = False,
    **remote,
) -> Scorer:
    """The reward model to score with: `rm` (a model directory) loaded here, or, with
    `rm_url`, the model that server holds, `rm` then being its local copy (rendering
    version and budget). `protocol` and `remote` (any `orchrm.rm.remote.RemoteConfig`
    field: `tokenizer`, `max_length`, `concurrency`, `timeout_s`, `api_key`, ...) only go
    with a URL; `api_key` defaults to the ORCHRM_API_KEY environment variable. `dtype`
    (auto, bf16 or fp32) only goes with a model scored here: a server scores in its own
    precision (`orchrm serve --dtype`). Raises an `OrchrmError` naming what is missing or
    wrong."""
    if rm_url and dtype not in (None, "", "auto"):
        raise ConfigError(
            f"dtype {dtype} only applies to a model scored here: a reward server scores in "
            "its own precision (orchrm serve --dtype)"
        )
    if rm_url:
        from orchrm.rm.remote import API_KEY_ENV, RemoteConfig, RemoteScorer

        known = {f.name for f in dataclasses.fields(RemoteConfig)} - {"url", "model_dir"}
        unknown = sorted(set(remote) - known)
        if unknown:
            raise ConfigError(f"unknown remote scoring option(s): {', '.join(unknown)}")
        if remote.get("api_key") is None:
            remote["api_key"] = os.environ.get(API_KEY_ENV) or None
        config = RemoteConfig(
            url=rm_url,
            protocol=protocol or "",
            model_dir=str(rm) if rm else "",
            batch_size=batch_size,
            check_version=check_version,
            trust_remote_code=trust_remote_code,
            **remote,
        )
        return RemoteScorer(config)
    if protocol or remote:
        given = ", ".join(["protocol"] * bool(protocol) + sorted(remote))
        raise ConfigError(f"{given} only apply to scoring through a server (rm_url)")
    if not rm:
        raise ConfigError("no reward model: give a model directory or a reward server's URL")
    from orchrm.rm.model import OrchRM

    return OrchRM.load(
        rm,
        device=device,
        dtype=dtype,
        trust_remote_code=trust_remote_code,
        check_version=check_version,
        batch_size=batch_size,
    )

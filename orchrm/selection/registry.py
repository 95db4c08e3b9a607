"""The selector registry: every best-of-N selector, what it needs and how reports show it.

A selector is one function or class (in `selectors` or `judges`) plus one `SelectorEntry`
in `REGISTRY`. Eval, the demo and cross-validation build their line-ups from it
(`line_up`), `metrics` reads which selectors replay re-executions, and the report reads
each one's label and colour. The entries' order is the line-up's order: the selectors
built on `orchrm`'s scores (top-k vote, adaptive, cost-aware, the search over edits)
follow it and share its scores, so each plan is scored once for all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from orchrm.scoring.base import ModelInfo
from orchrm.selection.judges import llm_judge
from orchrm.selection.options import SelectorOptions
from orchrm.selection.selectors import (
    AdaptiveSelector,
    CostAwareSelector,
    RewardModelSelector,
    Selector,
    TopKVoteSelector,
    bayes_selector,
    logp_selector,
    majority_selector,
    oracle_selector,
    random_selector,
)


@dataclass(frozen=True)
class LineupInputs:
    """What a line-up can be built from; a selector whose need is missing is left out."""

    rm: object | None = None
    """The Orch-RM reward model: an `orchrm.scoring.base.Scorer`, local (`OrchRM`) or behind
    a server (`orchrm.scoring.remote.RemoteScorer`), as `load_scorer` gives either."""
    external_rm: object | None = None
    """Another reward model used off the shelf (`external-rm`), a `Scorer` too."""
    mixed_rm: object | None = None
    """A reward model trained on every domain's pairs mixed (`orchrm-mixed`)."""
    unified_rm: object | None = None
    """One reward model of every domain that reads the domain line (`orchrm-unified`)."""
    rm_info: ModelInfo | None = None
    """What the selectors built on `orchrm`'s scores (adaptive, cost-aware) read of the
    model apart from its scores; None: `rm.info` (none without `rm`: raw scores)."""
    rm_selector: Selector | None = None
    """A ready `orchrm` selector used instead of one built from `rm` (cross-validation's,
    which scores each task with its own fold's model)."""
    judge: object | None = None
    """The judges' backend (`orchrm.runtime.backend.ChatBackend`)."""
    world: bool = False
    """The candidates carry the world's true success probabilities (`bayes`)."""
    seed: int = 0
    """Seeds `random`."""
    options: SelectorOptions = field(default_factory=SelectorOptions)
    """How `orchrm-adaptive` and `orchrm-cost` choose."""
    cost_model: object | None = None
    """`orchrm-cost` and `orchrm-search`: an `orchrm.selection.cost.CostModel` fitted on
    logs (None: its defaults)."""
    run_config: object | None = None
    """`orchrm-cost` and `orchrm-search`: the `RunConfig` the plans would run under
    (None: the defaults)."""
    plan_outcome: object | None = None
    """`orchrm-search`: what executing a plan none of the candidates is gives (an
    `orchrm.selection.search.PlanOutcome`; the world's in an evaluation on world logs).
    Without it an evaluation could not measure the plans the search makes, so the line-up
    leaves `orchrm-search` out."""


Build = Callable[[LineupInputs, dict[str, Selector]], Selector]
"""A selector from the inputs (its needs met) and the selectors built before it."""


@dataclass(frozen=True)
class SelectorEntry:
    """One selector as every command and the report see it."""

    name: str
    """The key in line-ups, reports and JSON."""
    label: str
    """What the report's tables and plots call it."""
    colour: str
    """Its colour in every plot, so a selector looks the same across domains."""
    build: Build
    needs: tuple[str, ...] = ()
    """`LineupInputs` fields of which it needs one (none: it runs on logs alone); without
    them it is left out of the line-up."""
    needs_all: tuple[str, ...] = ()
    """`LineupInputs` fields it needs every one of, besides one of `needs`."""
    replays_reruns: bool = False
    """It reads the executed answers (votes) or their correctness (the oracle), and only
    those, so its expected accuracy comes from replaying it on re-executions
    (`Candidate.reruns`), never from the success probability of the one it picked (the
    oracle's is then expected pass@N). `judge-traj` reads trajectories too: not replayed."""


def _orchrm(inputs: LineupInputs, built: dict[str, Selector]) -> Selector:
    return inputs.rm_selector or RewardModelSelector(inputs.rm)


def _orchrm_weighted(inputs: LineupInputs, built: dict[str, Selector]) -> Selector:
    # shares `orchrm`'s scores: each plan is scored once between the two
    return RewardModelSelector(inputs.rm, weighted=True, share_scores_with=built.get("orchrm"))


def _top_vote(k: int) -> Build:
    return lambda inputs, built: TopKVoteSelector(built["orchrm"], k)


def _info(inputs: LineupInputs) -> ModelInfo | None:
    if inputs.rm_info is not None:
        return inputs.rm_info
    return inputs.rm.info if inputs.rm is not None else None


def _adaptive(inputs: LineupInputs, built: dict[str, Selector]) -> Selector:
    return AdaptiveSelector(
        built["orchrm"],
        _info(inputs),
        inputs.options.adaptive_confidence,
        tolerance=inputs.options.adaptive_tolerance,
    )


def _cost(inputs: LineupInputs, built: dict[str, Selector]) -> Selector:
    return CostAwareSelector(
        built["orchrm"],
        _info(inputs),
        cost_weight=inputs.options.cost_weight,
        measure=inputs.options.cost_measure,
        run_config=inputs.run_config,
        cost_model=inputs.cost_model,
    )


def _search(inputs: LineupInputs, built: dict[str, Selector]) -> Selector:
    from orchrm.selection.search import PlanSearch, SearchSelector

    base = built.get("orchrm")
    if not isinstance(base, RewardModelSelector) or base.rm is not inputs.rm:
        base = RewardModelSelector(inputs.rm)
    search = PlanSearch.from_options(
        inputs.options,
        [base],
        [_info(inputs)],
        run_config=inputs.run_config,
        cost_model=inputs.cost_model,
        seed=inputs.seed,
    )
    return SearchSelector(search, inputs.plan_outcome)


def _judge(level: str) -> Build:
    return lambda inputs, built: llm_judge(inputs.judge, level)


def _rm(field: str) -> Build:
    return lambda inputs, built: RewardModelSelector(getattr(inputs, field))


def _always(selector: Selector) -> Build:
    return lambda inputs, built: selector


REGISTRY: tuple[SelectorEntry, ...] = (
    SelectorEntry("orchrm", "orchrm", "#d62728", _orchrm, needs=("rm_selector", "rm")),
    SelectorEntry(
        "orchrm-weighted",
        "orchrm-weighted",
        "#ff9896",
        _orchrm_weighted,
        needs=("rm",),
        replays_reruns=True,
    ),
    SelectorEntry(
        "orchrm-top2-vote",
        "orchrm-top2-vote",
        "#ff7f0e",
        _top_vote(2),
        needs=("rm_selector", "rm"),
        replays_reruns=True,
    ),
    SelectorEntry(
        "orchrm-top3-vote",
        "orchrm-top3-vote",
        "#b15928",
        _top_vote(3),
        needs=("rm_selector", "rm"),
        replays_reruns=True,
    ),
    SelectorEntry(
        "orchrm-adaptive", "orchrm-adaptive", "#e7298a", _adaptive, needs=("rm_selector", "rm")
    ),
    SelectorEntry("orchrm-cost", "orchrm-cost", "#393b79", _cost, needs=("rm_selector", "rm")),
    SelectorEntry(
        "orchrm-search",
        "orchrm-search",
        "#637939",
        _search,
        needs=("rm",),
        needs_all=("plan_outcome",),
    ),
    SelectorEntry(
        "majority", "majority", "#1f77b4", _always(majority_selector), replays_reruns=True
    ),
    SelectorEntry(
        "random", "random", "#7f7f7f", lambda inputs, built: random_selector(inputs.seed)
    ),
    SelectorEntry("logp", "logp", "#17becf", _always(logp_selector)),
    SelectorEntry("judge-orch", "judge-orch", "#2ca02c", _judge("orchestration"), needs=("judge",)),
    SelectorEntry("judge-traj", "judge-traj", "#98df8a", _judge("trajectory"), needs=("judge",)),
    SelectorEntry(
        "external-rm", "external-rm", "#9467bd", _rm("external_rm"), needs=("external_rm",)
    ),
    SelectorEntry("oracle", "oracle", "#000000", _always(oracle_selector), replays_reruns=True),
    SelectorEntry("bayes", "bayes", "#bcbd22", _always(bayes_selector), needs=("world",)),
    SelectorEntry("orchrm-mixed", "orchrm-mixed", "#fdbf6f", _rm("mixed_rm"), needs=("mixed_rm",)),
    SelectorEntry(
        "orchrm-unified", "orchrm-unified", "#1b9e77", _rm("unified_rm"), needs=("unified_rm",)
    ),
)

BY_NAME = {entry.name: entry for entry in REGISTRY}

RERUN_SELECTORS = frozenset(e.name for e in REGISTRY if e.replays_reruns)
"""Selectors replayed on re-executions (`SelectorEntry.replays_reruns`)."""


def _given(value: object) -> bool:
    # identity, not truth: a backend or model may define __len__
    return value is not None and value is not False


def line_up(inputs: LineupInputs) -> dict[str, Selector]:
    """Every registered selector whose needs `inputs` meets, in registry order."""
    built: dict[str, Selector] = {}
    for entry in REGISTRY:
        some = not entry.needs or any(_given(getattr(inputs, need)) for need in entry.needs)
        if some and all(_given(getattr(inputs, need)) for need in entry.needs_all):
            built[entry.name] = entry.build(inputs, built)
    return built


def label(name: str) -> str:
    """The report's name for a selector (its own name when it is not registered)."""
    entry = BY_NAME.get(name)
    return entry.label if entry else name


def colour(name: str) -> str | None:
    """A selector's plot colour (None: not registered, the plot picks one)."""
    entry = BY_NAME.get(name)
    return entry.colour if entry else None

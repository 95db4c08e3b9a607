"""`SelectorOptions`: how the selectors built on the reward model's scores choose
(`orchrm eval` and `orchrm serve` both read them), apart from their code so the
command line reads them without loading the selectors."""

from __future__ import annotations

from typing import Literal

from orchrm.configs import config, setting
from orchrm.selection.cost import MEASURES


@config(frozen=True)
class SelectorOptions:
    """The settings of `orchrm-adaptive`, `orchrm-cost` and `orchrm-search`, declared
    here once: `orchrm eval`'s options, `orchrm serve`'s `selector_options` and the
    line-up's `LineupInputs.options` all read them."""

    adaptive_confidence: float = setting(0.9, above=0.0, below=1.0)
    """orchrm-adaptive on a model without a calibration: stop drawing candidates once
    the chance that a later draw scores above the best so far is at most 1 - this."""
    adaptive_tolerance: float = setting(0.01, min=0.0, below=1.0)
    """orchrm-adaptive on a calibrated model (`orchrm calibrate`): stop drawing once the
    accuracy it expects to lose by stopping is at most this."""
    cost_weight: float = setting(0.1, min=0.0)
    """orchrm-cost and orchrm-search: what a doubling of the predicted cost is worth, in
    reward spreads (0: the score alone)."""
    cost_measure: Literal[MEASURES] = setting("tokens")
    """orchrm-cost and orchrm-search: the cost predicted from the plan and weighed:
    tokens, calls, or critical_path_calls (the latency)."""
    search_budget: int = setting(8, min=0)
    """orchrm-search: edited plans the reward model scores per task (0: the cost-aware
    argmax of N)."""
    search_max_edits: int = setting(2, min=1)
    """orchrm-search: the leash, how many edits a plan may be from a sampled one."""
    search_distance_penalty: float = setting(0.0, min=0.0)
    """orchrm-search: taken off a plan's objective per edit, in reward spreads."""
    search_beam: int = setting(2, min=1)
    """orchrm-search: plans expanded per round of the search (1: hill-climbing)."""

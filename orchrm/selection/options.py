"""`SelectorOptions`: how the selectors built on the reward model's scores choose
(`orchrm eval` and `orchrm serve` both read them), apart from their code so the
command line reads them without loading the selectors."""

from __future__ import annotations

from dataclasses import dataclass

from orchrm.configs import check, setting
from orchrm.errors import ConfigError
from orchrm.selection.cost import MEASURES


@dataclass(frozen=True)
class SelectorOptions:
    """The settings of `orchrm-adaptive` and `orchrm-cost`, declared here once: `orchrm
    eval`'s options, `orchrm serve`'s `selector_options` and the line-up's
    `LineupInputs.options` all read them."""

    adaptive_confidence: float = setting(0.9, min=0.0, max=1.0)
    """orchrm-adaptive on a model without a calibration: stop drawing candidates once
    the chance that a later draw scores above the best so far is at most 1 - this
    (strictly between 0 and 1)."""
    adaptive_tolerance: float = setting(0.01, min=0.0, max=1.0)
    """orchrm-adaptive on a calibrated model (`orchrm calibrate`): stop drawing once the
    accuracy it expects to lose by stopping is at most this (below 1)."""
    cost_weight: float = setting(0.1, min=0.0)
    """orchrm-cost: what a doubling of the predicted cost is worth, in reward spreads
    (0: plain argmax)."""
    cost_measure: str = setting("tokens", choices=MEASURES)
    """orchrm-cost: the cost it predicts from the plan and weighs: tokens, calls, or
    critical_path_calls (the latency)."""

    def __post_init__(self) -> None:
        check(self)
        if not 0.0 < self.adaptive_confidence < 1.0:
            raise ConfigError(
                f"adaptive_confidence must be strictly between 0 and 1, got "
                f"{self.adaptive_confidence!r}"
            )
        if not self.adaptive_tolerance < 1.0:
            raise ConfigError(
                f"adaptive_tolerance must be below 1, got {self.adaptive_tolerance!r}"
            )

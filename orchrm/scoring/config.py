"""`ScoreConfig`: what `orchrm score` and `orchrm evaluate-rm` can set."""

from __future__ import annotations

from typing import Literal

from orchrm.configs import config, setting
from orchrm.rmodel.ensemble import AGGREGATES
from orchrm.rmodel.precision import DTYPES
from orchrm.scoring.remote_protocols import PROTOCOLS


@config
class ScoreConfig:
    """Which reward model scores, where, and in which precision."""

    rm: str | None = setting(None, panel="Model")
    """A trained reward model directory (with --rm-url: its local copy)."""
    rm_url: str | None = setting(None, panel="Model")
    """Score through a reward server: .../classify (vLLM), .../get_reward (OpenRLHF),
    .../score (orchrm serve); docs/remote-scoring.md."""
    protocol: Literal[PROTOCOLS] | None = setting(None, panel="Model")
    """With --rm-url: the server's protocol (default: read from the URL's route)."""
    tokenizer: str | None = setting(None, panel="Model")
    """With --rm-url and no --rm: the tokenizer to render with."""
    max_length: int | None = setting(None, min=2, panel="Model")
    """With --rm-url and no --rm: tokens per text."""
    batch_size: int = setting(32, min=1, panel="Scale")
    """Orchestrations per forward pass (per request with --rm-url)."""
    dtype: Literal[DTYPES] = setting("auto", panel="Scale")
    """Precision of the forward passes; auto: bf16 where the hardware runs it fast (CUDA
    with bf16, a CPU with AMX), else fp32; the ORCHRM_BF16 environment variable (1 or 0)
    overrides the detection. Not with --rm-url: a server scores in its own."""
    aggregate: Literal[AGGREGATES] | None = setting(None, panel="Model")
    """With an ensemble (`orchrm train --ensemble K`): the score its members' normalized
    rewards make (mean, min, mean_minus_std, or warm: the averaged weights alone);
    None: the ensemble's own. Rows then also carry score_mean and score_spread."""
    spread_weight: float | None = setting(None, min=0.0, panel="Model")
    """With an ensemble: lambda of mean_minus_std; None: the ensemble's own."""
    question: str | None = setting(None, panel="Data")
    """The question of records that carry none (a harmony text file, records without a
    `question` field); a record's own question is used where it has one."""
    out: str | None = setting(None, panel="Output")
    """JSONL of scores (default: stdout)."""


@config
class EvaluateConfig(ScoreConfig):
    """What `orchrm evaluate-rm` reads besides the model: pairs, or executed logs for the
    fit of plan to task (`orchrm.evaluation.fit`)."""

    fit_logs: tuple[str, ...] = setting((), panel="Data")
    """Executed `orchrm.run/1` logs of held-out tasks: per task kind and plan structure,
    the model's mean score beside the measured success, and their rank correlation
    within each kind."""
    fit_tasks: tuple[str, ...] = setting((), panel="Data")
    """The world task files of those logs (`*.tasks.jsonl`): a world task's kind is the
    sub-agent type that fits it best."""
    plot: str | None = setting(None, panel="Output")
    """With --fit-logs: a PNG of each kind's structures, mean score against success."""

"""`MineConfig`, what `orchrm pairs mine` can set, `IngestConfig` and `ExportConfig`, what
`orchrm ingest` and `orchrm pairs export` can, and `OpenConfig`, which store every store
command opens and how (kept apart from the store's code so the command line reads them
without loading DuckDB)."""

from __future__ import annotations

import math
from dataclasses import field

from orchrm.configs import config, setting
from orchrm.errors import ConfigError

KINDS = ("sob", "soo", "coi")
"""The pair kinds: specialized over base, specialized over other, correct over incorrect."""


@config
class MineConfig:
    """What `mine` pairs and how it mixes and splits them."""

    dataset: str = "default"
    """Name the pairs are stored under (mining again replaces that dataset)."""
    ratio: dict[str, float] = field(default_factory=lambda: {"sob": 1, "soo": 0, "coi": 3})
    """Mix of kinds, SoB : SoO : CoI = 1 : 0 : 3 as in the paper. A kind with no pair
    available is left out and the others keep their proportions."""
    cap_per_task: int = setting(16, min=1)
    """Most pairs of one kind from one task (drawn at random, seeded)."""
    specialized: tuple[str, ...] = ()
    """Orchestrator ids that count as specialized (SoB chosen side)."""
    base: tuple[str, ...] = ()
    """Orchestrator ids that count as base (SoB rejected side)."""
    step_threshold: int | None = None
    """Checkpoints at or past this step count as specialized, earlier ones as base."""
    specialized_for: dict[str, str] = field(default_factory=dict)
    """Orchestrator id -> the domain it is specialized for, for SoO pairs (on the command
    line ORCHESTRATOR=DOMAIN, repeatable)."""
    allow_invalid_rejected: bool = True
    """Whether an orchestration that breaks a graph rule may be the rejected side (it is
    never the chosen one; unparseable ones are never paired: they cannot be rendered)."""
    denoise: bool = False
    """Judge correct-over-incorrect pairs on each plan's success rate over its repeated
    executions (of one task and reward-model text) instead of on outcomes that all
    agree: the chosen plan's rate beats the rejected one's by `min_gap` or more, and the
    pair's `weight` is P(chosen's true success > rejected's) under uniform priors
    (docs/ingest-and-pairs.md#pairs-from-repeated-executions)."""
    min_runs: int = setting(2, min=1)
    """With `denoise`: executions a plan needs to be paired; plans with fewer are left
    out and counted."""
    min_gap: float = setting(0.25, min=0.0, max=1.0)
    """With `denoise`: least success-rate difference, chosen minus rejected (above 0)."""
    domain: str | None = None
    """Mine one domain only (None: every domain, a mixed-domain dataset)."""
    split: tuple[float, float, float] = (0.8, 0.1, 0.1)
    """Train, validation and test shares of tasks (a task is in exactly one split)."""
    seed: int = 0
    """Seeds the per-task draws and the task split."""

    def __post_init__(self) -> None:
        unknown = set(self.ratio) - set(KINDS)
        if unknown:
            raise ConfigError(f"unknown pair kind(s) {sorted(unknown)}: choose from {KINDS}")
        if any(not math.isfinite(v) or v < 0 for v in self.ratio.values()):
            raise ConfigError(f"ratio shares must be finite and >= 0; got {self.ratio}")
        if not self.min_gap > 0:
            raise ConfigError(
                f"min_gap must be above 0 (a plan is never paired with an equal one); "
                f"got {self.min_gap}"
            )
        shares = tuple(self.split)
        if (
            len(shares) != 3
            or not all(math.isfinite(x) and x >= 0 for x in shares)
            or abs(sum(shares) - 1) > 1e-9
        ):
            raise ConfigError(
                "split shares must be three (train, validation, test), each >= 0, summing "
                f"to 1; got {self.split}"
            )


MAX_LENGTH = 256
"""Tokens per reward-model text unless told otherwise: what `orchrm pairs export` renders
to and `orchrm train` reads (`TrainConfig.max_length`), the same so no text is cut twice."""


@config
class OpenConfig:
    """Which store a command opens, and how when another process holds it."""

    store: str = "orchrm.duckdb"
    """The DuckDB store file."""
    wait_for_lock: float = setting(0.0, min=0)
    """Seconds to wait for a store another process holds (an ingest writing to it),
    trying again with a growing pause of at most half a second; 0 fails at once."""

    def __post_init__(self) -> None:
        if not math.isfinite(self.wait_for_lock):
            raise ConfigError(
                f"wait_for_lock must be a finite number of seconds; got {self.wait_for_lock}"
            )


@config
class IngestConfig(OpenConfig):
    """How `orchrm ingest` reads log files into the store."""

    adapter: str = "auto"
    """auto, orchrm, diagram, steps, preference or generic."""
    strict: bool = False
    """A malformed record keeps a file out."""
    domain: str | None = None
    """Domain of records that name none (diagram: pages whose name says none; else
    masbench)."""
    orchestrator: str | None = None
    """Orchestrator id (steps)."""
    map: dict[str, str] = field(default_factory=dict)
    """generic: FIELD=COLUMN, e.g. question=prompt (repeatable)."""


@config
class ExportConfig(OpenConfig):
    """Which mined dataset `orchrm pairs export` writes, where, and how its texts are cut."""

    out: str | None = None
    """Folder (jsonl, parquet) or file (orchrm-datasets)."""
    dataset: str = "default"
    """The mined dataset to export."""
    format: str = "jsonl"
    """jsonl, parquet or orchrm-datasets."""
    max_length: int = setting(MAX_LENGTH, min=16)
    """Tokens per reward-model text, special tokens included: what `orchrm train
    --max-length` reads, so exported texts are never cut again by the trainer."""
    tokenizer: str = ""
    """Count tokens with this model's tokenizer (dir or id); default: the default
    backbone's, as `orchrm train` uses; 'approx' for a word-based estimate."""
    domain_in_text: bool = False
    """Start each text with its task's domain line, to train one reward model for every
    domain (it then reads the domain at scoring time too)."""

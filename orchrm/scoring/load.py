"""`load_scorer`: the reward model to score with, a model directory loaded here or a
reward server behind a URL (with the directory as its local copy)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from orchrm.errors import ConfigError
from orchrm.scoring.base import Scorer


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
    aggregate: str | None = None,
    spread_weight: float | None = None,
    **remote,
) -> Scorer:
    """The reward model to score with: `rm` (a model directory) loaded here, or, with
    `rm_url`, the model that server holds, `rm` then being its local copy (rendering
    version and budget). `protocol` and `remote` (any `orchrm.scoring.remote.RemoteConfig`
    field: `tokenizer`, `max_length`, `concurrency`, `timeout_s`, `api_key`, ...) only go
    with a URL; `api_key` defaults to the ORCHRM_API_KEY environment variable. `dtype`
    (auto, bf16 or fp32) only goes with a model scored here: a server scores in its own
    precision (`orchrm serve --dtype`). A model directory that holds an ensemble
    (`orchrm train --ensemble K`) gives an `EnsembleScorer` whose scores are `aggregate`
    (mean, min, mean_minus_std with `spread_weight`; None: the ensemble's own) of its
    members', with the spread beside them; `aggregate="warm"` scores with its averaged
    weights alone (`orchrm.rmodel.ensemble`). Raises an `OrchrmError` naming what is
    missing or wrong."""
    if rm_url and dtype not in (None, "", "auto"):
        raise ConfigError(
            f"dtype {dtype} only applies to a model scored here: a reward server scores in "
            "its own precision (orchrm serve --dtype)"
        )
    if rm_url and (aggregate or spread_weight is not None):
        raise ConfigError(
            "aggregate and spread_weight only apply to an ensemble scored here: a reward "
            "server aggregates as it was started (orchrm serve --aggregate)"
        )
    if rm_url:
        from orchrm.scoring.remote import API_KEY_ENV, RemoteConfig, RemoteScorer

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
    from orchrm.rmodel.files import check_model_files, model_directory
    from orchrm.rmodel.precision import bf16_forced

    if dtype in (None, "", "auto"):
        bf16_forced()  # a bad ORCHRM_BF16 is said before the model directory is read
    check_model_files(model_directory(rm))  # before torch loads: a wrong path fails at once
    from orchrm.scoring.local import OrchRM

    load = dict(
        device=device,
        dtype=dtype,
        trust_remote_code=trust_remote_code,
        check_version=check_version,
        batch_size=batch_size,
    )
    if aggregate != "warm" and is_ensemble(rm):
        from orchrm.scoring.ensemble import EnsembleScorer

        return EnsembleScorer.load(rm, aggregate, spread_weight, **load)
    if aggregate not in (None, "warm") or spread_weight is not None:
        raise ConfigError(f"{rm} is one model, not an ensemble: it has no aggregate to choose")
    return OrchRM.load(rm, **load)


def is_ensemble(rm: str | Path) -> bool:
    """Whether the model directory `rm` holds an ensemble (checked loads come after)."""
    from orchrm.rmodel.ensemble import ensemble_settings
    from orchrm.rmodel.files import model_directory, read_metadata

    return ensemble_settings(read_metadata(model_directory(rm))) is not None

"""Orch-RM as a verl reward: a custom reward function with verl's signature.

verl's reward loop (verl 0.9: `verl.experimental.reward_loop`, reward manager `naive`, the
default) calls `compute_score(data_source=..., solution_str=..., ground_truth=...,
extra_info=..., **reward_kwargs)` once per response, from an executor thread per sample,
in each of `reward.num_workers` worker processes, and reads a float or a dict whose
`score` is the reward (the other keys are logged). Any number of threads may call it at
once: the model is loaded once per process, and the responses of concurrent calls are
scored together in batched forward passes (`orchrm.scoring.callers`), with the same
rewards as one call at a time. `compute_score_batch(data_sources=..., solution_strs=...,
ground_truths=..., extra_infos=...)` takes many responses in one call (verl releases
before the reward loop had a `batch` reward manager that called it).

`solution_str` is the orchestrator's output; the question comes from the row's
`extra_info["question"]` (put it there when building the parquet files); `ground_truth`
is not used: nothing executes.

Settings are read from the row's `extra_info`, then the reward kwargs, then an
environment variable. Reward kwargs reach every worker process on every node;
environment variables reach only the processes that inherit them (a Ray worker on
another node does not), so give settings as reward kwargs.
- `rm_path` (`ORCHRM_RM_PATH`): a reward model directory, loaded in each worker process.
  A reward loop worker gets no GPU from Ray, so it scores on the CPU in `dtype` (`auto`,
  `bf16`, `fp32`; `ORCHRM_DTYPE`); for a large model, serve it on a GPU and give `rm_url`.
- `rm_url` (`ORCHRM_RM_URL`): a reward server. `orchrm serve`'s `/score` is what a URL
  without a route means; a vLLM or SGLang `/classify` or an OpenRLHF `/get_reward` can
  be named with `rm_protocol` (`ORCHRM_RM_PROTOCOL`); the bearer token comes from
  `ORCHRM_API_KEY` (docs/remote-scoring.md). With both, `rm_path` is the served model's
  local copy, which tells the client how to render.
- `penalty` (`ORCHRM_PENALTY`, default -3.0): the reward of an output that does not parse
  into a valid graph, which is not scored.
- `normalize` (`ORCHRM_NORMALIZE`, default on; `0` turns it off): scores normalized by the
  model's training-time statistics when they are known (a local model's, or a server's
  whose model directory is given); otherwise used as the server returns them.
- `aggregate`, `spread_weight` (reward kwargs or extra_info only): with `rm_path` an
  ensemble (`orchrm train --ensemble K`), the score its members make (`mean`, `min`,
  `mean_minus_std` with `spread_weight`, `warm`; default: the ensemble's own); the
  result then also carries `rm_spread`, the members' standard deviation, which verl
  logs. A server aggregates as it was started (`orchrm serve --aggregate`).
- `centre` (reward kwargs or extra_info; `1`/`true`): the reward centred on the row's
  reference plans and bounded (PAR, arXiv 2502.18770), as `orchrm rl --centre` gives it:
  sigmoid(r - r_ref), r_ref the mean of the (normalized) scores of the plan texts in
  `extra_info["reference"]` (the reference policy's plans for the question; those that
  do not parse are left out), scored once per question in each worker process and
  logged as `rm_reference`. An invalid output keeps the penalty.

verl 0.9 configuration (command-line overrides of `ppo_trainer.yaml`):

    reward.custom_reward_function.path=pkg://orchrm.rl.verl_reward
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.rm_path=/models/orchrm-math
    # or, scoring through `orchrm serve --rm /models/orchrm-math --port 8080`:
    +reward.custom_reward_function.reward_kwargs.rm_url=http://rm-host:8080

verl 0.9 reads only the keys under `reward.`: the top-level `custom_reward_function.*`
keys of older releases are ignored there, and verl then rewards with its default scorer.
On those older releases, use `custom_reward_function.path=` with the file path that
`python -c 'import orchrm.rl.verl_reward as m; print(m.__file__)'` prints.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

from orchrm.calibration.methods import sigmoid
from orchrm.errors import ConfigError, InputError
from orchrm.rl.rewards import runnable
from orchrm.scoring.base import Scorer
from orchrm.scoring.load import load_scorer

RM_PATH_ENV = "ORCHRM_RM_PATH"
RM_URL_ENV = "ORCHRM_RM_URL"
PENALTY_ENV = "ORCHRM_PENALTY"
NORMALIZE_ENV = "ORCHRM_NORMALIZE"
RM_PROTOCOL_ENV = "ORCHRM_RM_PROTOCOL"
DTYPE_ENV = "ORCHRM_DTYPE"
DEFAULT_PENALTY = -3.0


@dataclass(frozen=True)
class Settings:
    """Where one row's reward comes from (module docstring)."""

    rm_path: str
    rm_url: str
    rm_protocol: str
    dtype: str
    normalize: bool
    aggregate: str = ""
    spread_weight: float | None = None


_SCORERS: dict[Settings, Scorer] = {}
_SCORERS_LOCK = threading.Lock()
_REFERENCES: dict[tuple[Settings, str, tuple[str, ...]], float] = {}
"""The reference value of each (settings, question, reference plan texts), once scored."""
_REFERENCE_LOCKS: dict[tuple[Settings, str, tuple[str, ...]], threading.Lock] = {}


def _scorer(settings: Settings) -> Scorer:
    """The scorer of these settings, made once per worker process however many threads
    ask for it at once (a model is loaded once); its `score` batches concurrent callers."""
    with _SCORERS_LOCK:
        if settings not in _SCORERS:
            url = settings.rm_url
            if url and not urlsplit(url).path.strip("/"):
                url = url.rstrip("/") + "/score"  # a bare server address: orchrm serve
            _SCORERS[settings] = load_scorer(
                settings.rm_path or None,
                url or None,
                settings.rm_protocol or None,
                dtype="auto" if url else settings.dtype,  # a server scores in its own
                aggregate=settings.aggregate or None,
                spread_weight=settings.spread_weight,
            )
        return _SCORERS[settings]


def _setting(name: str, extra: dict, kwargs: dict, env: str, default=None):
    value = extra.get(name, kwargs.get(name))
    return value if value is not None else os.environ.get(env, default)


def _settings(extra: dict, kwargs: dict) -> Settings:
    """The `Settings` of one row: its extra_info, then the reward kwargs, then the
    environment."""

    def text(name: str, env: str, default: str = "") -> str:
        return str(_setting(name, extra, kwargs, env, default) or default)

    settings = Settings(
        rm_path=text("rm_path", RM_PATH_ENV),
        rm_url=text("rm_url", RM_URL_ENV),
        rm_protocol=text("rm_protocol", RM_PROTOCOL_ENV),
        dtype=text("dtype", DTYPE_ENV, "auto"),
        normalize=text("normalize", NORMALIZE_ENV, "1") not in ("0", "false", "False"),
        aggregate=str(extra.get("aggregate", kwargs.get("aggregate")) or ""),
        spread_weight=_number(extra.get("spread_weight", kwargs.get("spread_weight"))),
    )
    if not settings.rm_path and not settings.rm_url:
        raise ConfigError(
            f"no reward model: set the rm_path or rm_url reward kwarg (or {RM_PATH_ENV} / "
            f"{RM_URL_ENV})"
        )
    return settings


def _number(value) -> float | None:
    """A reward kwarg given as a number or its text (None: not given)."""
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"spread_weight {value!r}: give a number >= 0") from None


def _centred(extra: dict, kwargs: dict) -> bool:
    """Whether the row asks for the centred reward (`centre`: 1 or true)."""
    return str(extra.get("centre", kwargs.get("centre", ""))).lower() in ("1", "true")


def _reference(settings: Settings, scorer: Scorer, question: str, texts) -> tuple[float, int]:
    """The reference value of the question's reference plans (the mean normalized score
    of those that parse) and the tokens scored for it by this call (0 once known)."""
    texts = () if texts is None else tuple(texts)  # a list, or an array from a parquet file
    key = (settings, question, texts)
    with _SCORERS_LOCK:
        lock = _REFERENCE_LOCKS.setdefault(key, threading.Lock())
    with lock:  # the group's other samples wait for the one that scores the references
        if key in _REFERENCES:
            return _REFERENCES[key], 0
        value, tokens = _reference_value(settings, scorer, question, texts)
        _REFERENCES[key] = value
        return value, tokens


def _reference_value(settings: Settings, scorer: Scorer, question: str, texts: tuple):
    plans = [t for t in texts if isinstance(t, str) and runnable(t) is not None]
    if not plans:
        raise InputError(
            f"the centred Orch-RM reward needs reference plans that parse in the row's "
            f"extra_info['reference'] (question {question[:60]!r}: {len(texts)} given, "
            "none valid)"
        )
    scored = scorer.score([(question, t) for t in plans])
    values = [r.score for r in scored]
    if settings.normalize:
        values = scorer.info.normalize(values)
    return sum(values) / len(values), sum(r.tokens for r in scored)


def compute_score_batch(
    data_sources, solution_strs, ground_truths, extra_infos=None, **kwargs
) -> list[dict]:
    """Rewards of many responses in one call, in order (module docstring)."""
    extras = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    out: list[dict | None] = [None] * len(solution_strs)
    pending: list[tuple[int, str, str, dict]] = []
    for n, (text, extra) in enumerate(zip(solution_strs, extras, strict=True)):
        extra = dict(extra or {})
        question = extra.get("question", kwargs.get("question"))
        if not question:
            raise InputError(
                "the Orch-RM reward needs the question: put it in the row's extra_info['question']"
            )
        penalty = float(_setting("penalty", extra, kwargs, PENALTY_ENV, DEFAULT_PENALTY))
        if runnable(text) is None:
            out[n] = {"score": penalty, "valid": 0.0, "rm_tokens": 0}
        else:
            pending.append((n, question, text, extra))
    # The output goes as written: a server that renders for itself reads the text verl saw.
    groups: dict[Settings, list[tuple[int, str, str, dict]]] = {}
    for n, question, text, extra in pending:
        groups.setdefault(_settings(extra, kwargs), []).append((n, question, text, extra))
    for settings, members in groups.items():
        scorer = _scorer(settings)
        scored = scorer.score([(q, o) for _, q, o, _ in members])
        scores = [r.score for r in scored]
        tokens = [r.tokens for r in scored]
        if settings.normalize:
            scores = scorer.info.normalize(scores)
        for (n, q, _, extra), score, count, r in zip(members, scores, tokens, scored, strict=True):
            out[n] = {"score": float(score), "valid": 1.0, "rm_tokens": count}
            if _centred(extra, kwargs):
                reference, more = _reference(settings, scorer, q, extra.get("reference"))
                out[n] |= {"score": sigmoid(score - reference), "rm_reference": reference}
                out[n]["rm_tokens"] += more
            if r.spread is not None:
                out[n]["rm_spread"] = r.spread
    return [r for r in out if r is not None]


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict:
    """The reward of one response, as verl's `naive` reward manager asks for it, from any
    number of threads at once: `{"score": reward, "valid": 0 or 1, "rm_tokens":
    reward-model input tokens}` (module docstring)."""
    return compute_score_batch(
        [data_source], [solution_str], [ground_truth], [extra_info], **kwargs
    )[0]

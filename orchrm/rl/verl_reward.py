"""Orch-RM as a verl reward: a custom reward function with verl's signature.

verl (volcengine/verl) calls `compute_score(data_source=..., solution_str=...,
ground_truth=..., extra_info=...)` once per response (`reward_model.reward_manager=naive`,
the default) and reads a float, or a dict whose `score` is the reward (the other keys are
logged); `compute_score_batch(data_sources=..., solution_strs=..., ground_truths=...,
extra_infos=...)` serves `reward_model.reward_manager=batch`. `solution_str` is the
orchestrator's output; the question comes from the row's `extra_info["question"]` (put it
there when building the parquet files), `ground_truth` is not used: nothing executes.

The reward model is local (a directory, from `extra_info["rm_path"]`, the `rm_path`
reward kwarg or `ORCHRM_RM_PATH`; loaded once per worker process) or behind a reward
server (`rm_url` / `ORCHRM_RM_URL`: `orchrm serve`'s `/score`, which is what a URL
without a route means, a vLLM or SGLang `/classify` or an OpenRLHF `/get_reward`, with
`rm_protocol` / `ORCHRM_RM_PROTOCOL` to name one; bearer token from `ORCHRM_API_KEY`;
docs/remote-scoring.md). With both, `rm_path` is the served model's local copy, which
tells the client how to render. An output that does not parse into a valid graph gets
`penalty` (`penalty` kwarg / `ORCHRM_PENALTY`, default -3.0) and is not scored. Scores
are normalized by the model's training-time statistics (`normalize`,
`ORCHRM_NORMALIZE=0` to turn off) when they are known: a local model's, or a server's
whose model directory is given; otherwise used as the server returns them.

verl configuration (`ppo_trainer.yaml` keys, as command-line overrides):

    custom_reward_function.path=$(python -c 'import orchrm.rl.verl_reward as m; print(m.__file__)')
    custom_reward_function.name=compute_score
    +custom_reward_function.reward_kwargs.rm_path=/models/orchrm-math
    # or, scoring through `orchrm serve --rm /models/orchrm-math --port 8080`:
    +custom_reward_function.reward_kwargs.rm_url=http://rm-host:8080
"""

from __future__ import annotations

import os
from functools import lru_cache
from urllib.parse import urlsplit

from orchrm.errors import ConfigError, InputError
from orchrm.rl.rewards import runnable
from orchrm.scoring.load import load_scorer

RM_PATH_ENV = "ORCHRM_RM_PATH"
RM_URL_ENV = "ORCHRM_RM_URL"
PENALTY_ENV = "ORCHRM_PENALTY"
NORMALIZE_ENV = "ORCHRM_NORMALIZE"
RM_PROTOCOL_ENV = "ORCHRM_RM_PROTOCOL"
DEFAULT_PENALTY = -3.0


@lru_cache(maxsize=4)
def _scorer(path: str, url: str, protocol: str):
    """The scorer of these settings, made once per worker process."""
    if url and not urlsplit(url).path.strip("/"):
        url = url.rstrip("/") + "/score"  # a bare server address: orchrm serve
    return load_scorer(path or None, url or None, protocol or None)


def _setting(name: str, extra: dict, kwargs: dict, env: str, default=None):
    value = extra.get(name, kwargs.get(name))
    return value if value is not None else os.environ.get(env, default)


def _settings(extra: dict, kwargs: dict) -> tuple[str, str, str, bool]:
    """(rm_path, rm_url, rm_protocol, normalize) of one row."""
    path = str(_setting("rm_path", extra, kwargs, RM_PATH_ENV, "") or "")
    url = str(_setting("rm_url", extra, kwargs, RM_URL_ENV, "") or "")
    protocol = str(_setting("rm_protocol", extra, kwargs, RM_PROTOCOL_ENV, "") or "")
    if not path and not url:
        raise ConfigError(
            f"no reward model: set {RM_PATH_ENV} or {RM_URL_ENV}, or the rm_path / "
            "rm_url reward kwarg"
        )
    flag = str(_setting("normalize", extra, kwargs, NORMALIZE_ENV, "1"))
    return path, url, protocol, flag not in ("0", "false", "False")


def compute_score_batch(
    data_sources, solution_strs, ground_truths, extra_infos=None, **kwargs
) -> list[dict]:
    """Rewards of many responses (verl's batch reward manager); see the module docstring."""
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
    groups: dict[tuple, list[tuple[int, str, str]]] = {}
    for n, question, text, extra in pending:
        groups.setdefault(_settings(extra, kwargs), []).append((n, question, text))
    for (path, url, protocol, normalize), members in groups.items():
        scorer = _scorer(path, url, protocol)
        scored = scorer.score([(q, o) for _, q, o in members])
        scores = [r.score for r in scored]
        tokens = [r.tokens for r in scored]
        if normalize:
            scores = scorer.info.normalize(scores)
        for (n, _, _), score, count in zip(members, scores, tokens, strict=True):
            out[n] = {"score": float(score), "valid": 1.0, "rm_tokens": count}
    return [r for r in out if r is not None]


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict:
    """The reward of one response (verl's naive reward manager): `{"score": reward,
    "valid": 0 or 1, "rm_tokens": reward-model input tokens}`."""
    return compute_score_batch(
        [data_source], [solution_str], [ground_truth], [extra_info], **kwargs
    )[0]

"""Orch-RM as a verl reward: a custom reward function with verl's signature.

verl (volcengine/verl) calls `compute_score(data_source=..., solution_str=...,
ground_truth=..., extra_info=...)` once per response (`reward_model.reward_manager=naive`,
the default) and reads a float, or a dict whose `score` is the reward (the other keys are
logged); `compute_score_batch(data_sources=..., solution_strs=..., ground_truths=...,
extra_infos=...)` serves `reward_model.reward_manager=batch`. `solution_str` is the
orchestrator's output; the question comes from the row's `extra_info["question"]` (put it
there when building the parquet files), `ground_truth` is not used: nothing executes.

The reward model is local (a directory, from `extra_info["rm_path"]`, the `rm_path`
reward kwarg or `ORCHRM_RM_PATH`; loaded once per worker process) or the HTTP service
(`orchrm serve`; `rm_url` / `ORCHRM_RM_URL`, `POST {url}/score`, bearer token from
`ORCHRM_API_KEY`). An output that does not parse into a valid graph gets `penalty`
(`penalty` kwarg / `ORCHRM_PENALTY`, default -3.0) and is not scored. Local scores are
normalized by the model's training-time statistics (`normalize`, `ORCHRM_NORMALIZE=0` to
turn off); the service's scores are used as it returns them.

verl configuration (`ppo_trainer.yaml` keys, as command-line overrides):

    custom_reward_function.path=$(python -c 'import orchrm.rl.verl_reward as m; print(m.__file__)')
    custom_reward_function.name=compute_score
    +custom_reward_function.reward_kwargs.rm_path=/models/orchrm-math
    # or, scoring through `orchrm serve --rm /models/orchrm-math --port 8000`:
    +custom_reward_function.reward_kwargs.rm_url=http://rm-host:8000
"""

from __future__ import annotations

import json
import os
import urllib.request
from functools import lru_cache

from orchrm.rl.rewards import runnable

RM_PATH_ENV = "ORCHRM_RM_PATH"
RM_URL_ENV = "ORCHRM_RM_URL"
PENALTY_ENV = "ORCHRM_PENALTY"
NORMALIZE_ENV = "ORCHRM_NORMALIZE"
API_KEY_ENV = "ORCHRM_API_KEY"
DEFAULT_PENALTY = -3.0


@lru_cache(maxsize=4)
def _local_rm(path: str):
    from orchrm.rm.model import OrchRM

    return OrchRM.load(path)


def _setting(name: str, extra: dict, kwargs: dict, env: str, default=None):
    value = extra.get(name, kwargs.get(name))
    return value if value is not None else os.environ.get(env, default)


def _score_local(path: str, items: list[tuple[str, object]], normalize: bool):
    rm = _local_rm(path)
    texts = [rm.render(q, o) for q, o in items]
    scores, tokens = rm.score_texts_with_tokens(texts)
    if normalize:
        scores = rm.normalize(scores)
    return list(zip(scores, tokens, strict=True))


def _score_http(url: str, question: str, texts: list[str], timeout: float = 60.0):
    body = json.dumps({"question": question, "orchestrations": texts}).encode()
    request = urllib.request.Request(
        url.rstrip("/") + "/score", data=body, headers={"Content-Type": "application/json"}
    )
    key = os.environ.get(API_KEY_ENV)
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        results = json.loads(response.read())["results"]
    return [(float(r["score"]), int(r.get("tokens", 0))) for r in results]


def compute_score_batch(
    data_sources, solution_strs, ground_truths, extra_infos=None, **kwargs
) -> list[dict]:
    """Rewards of many responses (verl's batch reward manager); see the module docstring."""
    extras = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    out: list[dict | None] = [None] * len(solution_strs)
    pending: list[tuple[int, str, object, dict]] = []
    for n, (text, extra) in enumerate(zip(solution_strs, extras, strict=True)):
        extra = dict(extra or {})
        question = extra.get("question", kwargs.get("question"))
        if not question:
            raise ValueError(
                "the Orch-RM reward needs the question: put it in the row's extra_info['question']"
            )
        penalty = float(_setting("penalty", extra, kwargs, PENALTY_ENV, DEFAULT_PENALTY))
        o = runnable(text)
        if o is None:
            out[n] = {"score": penalty, "valid": 0.0, "rm_tokens": 0}
        else:
            pending.append((n, question, o, extra))
    for n, question, o, extra in pending:
        url = _setting("rm_url", extra, kwargs, RM_URL_ENV)
        path = _setting("rm_path", extra, kwargs, RM_PATH_ENV)
        if url:
            (score, tokens), *_ = _score_http(url, question, [solution_strs[n]])
        elif path:
            normalize = str(_setting("normalize", extra, kwargs, NORMALIZE_ENV, "1")) not in (
                "0",
                "false",
                "False",
            )
            (score, tokens), *_ = _score_local(str(path), [(question, o)], normalize)
        else:
            raise ValueError(
                f"no reward model: set {RM_PATH_ENV} or {RM_URL_ENV}, or the rm_path / "
                "rm_url reward kwarg"
            )
        out[n] = {"score": float(score), "valid": 1.0, "rm_tokens": tokens}
    return [r for r in out if r is not None]


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict:
    """The reward of one response (verl's naive reward manager): `{"score": reward,
    "valid": 0 or 1, "rm_tokens": reward-model input tokens}`."""
    return compute_score_batch(
        [data_source], [solution_str], [ground_truth], [extra_info], **kwargs
    )[0]

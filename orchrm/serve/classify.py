"""vLLM's `/classify` and `/pooling` routes on `orchrm serve`, as vLLM 0.34 defines them
(`vllm/entrypoints/pooling/`): the body read in a prepare worker, and the answer in
vLLM's shape, so a client written for a vLLM-served reward model works against `orchrm
serve` unchanged.

Request `{"model", "input": text or [text, ...], "use_activation"}`, and on `/pooling`
also `"task"` (absent or `"classify"`, the task of a sequence classifier) and
`"encoding_format"` (absent or `"float"`). Each input is already the text the reward
model reads (no parsing, no rendering), checked against the same limits as `/score`
(item count, length, valid Unicode). `model` is accepted and not checked. The one-label
score goes through a sigmoid unless `use_activation` is false. Other fields are accepted
and ignored, as vLLM ignores fields it does not know: `activation` and `softmax`, which
vLLM 0.11.1 to 0.15 read ahead of `use_activation`, change nothing. `normalize`, and a
`task` of `score` or `encode`, which vLLM refuses as removed, get 422.

Answers, each item's `prompt_tokens` (the model's input tokens for that text) being
orchrm's addition:
- `/classify`: `{"id", "object": "list", "created", "model", "data": [{"index", "label",
  "probs": [score], "num_classes": 1, "prompt_tokens"}, ...], "usage"}`;
- `/pooling`: `{"id", "object": "list", "created", "model", "data": [{"index", "object":
  "pooling", "data": [score], "prompt_tokens"}, ...], "usage"}`;
with `"usage": {"prompt_tokens", "total_tokens", "completion_tokens": 0}`.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

from orchrm.calibration.methods import sigmoid
from orchrm.serve.prepare import ApiError, Limits, Rendered, Scored, decode, kind, strings

REMOVED_TASKS = {"score": "classify", "encode": "token_embed or token_classify"}
"""Pooling tasks vLLM refuses as removed, and what it names in their place."""


@dataclass(frozen=True)
class ClassifyBody:
    """A `/classify` or `/pooling` request as the scoring thread needs it."""

    items: list[Rendered]
    activation: bool


def prepare_classify(body: bytes, limits: Limits, deadline: float) -> ClassifyBody:
    """The texts of a `/classify` body and whether to apply the sigmoid (422 for a wrong
    shape, a removed field or a text over the limits, naming the field and index). Its
    work is one pass over the body, so `deadline` is the pool's to enforce."""
    return _classify_body(decode(body), limits)


def prepare_pooling(body: bytes, limits: Limits, deadline: float) -> ClassifyBody:
    """As `prepare_classify`, for a `/pooling` body: 422 for a task other than
    `classify` (this server holds a sequence classifier) or an encoding other than
    `float`."""
    value = decode(body)
    task = value.get("task")
    if task is not None and task != "classify" and task not in REMOVED_TASKS:
        raise ApiError(422, "unsupported_task", f"task must be classify, got {task!r}", "task")
    encoding = value.get("encoding_format")
    if encoding is not None and encoding != "float":
        raise ApiError(
            422,
            "unsupported_encoding",
            f"encoding_format must be float, got {encoding!r}",
            "encoding_format",
        )
    return _classify_body(value, limits)


def _classify_body(value: dict, limits: Limits) -> ClassifyBody:
    _refuse_removed(value)
    if isinstance(value.get("input"), str):
        value = {**value, "input": [value["input"]]}
    texts = strings(value, "input", limits)
    if not texts:
        raise ApiError(422, "empty", "input needs at least one text", "input")
    activation = value.get("use_activation")
    if activation is not None and not isinstance(activation, bool):
        raise ApiError(
            422,
            "wrong_type",
            f"use_activation must be true or false, got {kind(activation)}",
            "use_activation",
        )
    return ClassifyBody([Rendered(t, ()) for t in texts], activation is not False)


def _refuse_removed(value: dict) -> None:
    """422 for the parameters vLLM refuses as removed (`normalize`; `task` `score` or
    `encode`), with vLLM's advice."""
    if "normalize" in value:
        raise ApiError(
            422,
            "removed_field",
            "normalize was removed from vLLM's protocol; use use_activation instead",
            "normalize",
        )
    task = value.get("task")
    if isinstance(task, str) and task in REMOVED_TASKS:
        raise ApiError(
            422,
            "removed_field",
            f"task {task} was removed from vLLM's protocol; use {REMOVED_TASKS[task]} instead",
            "task",
        )


def classify_answer(results: list[Scored], activation: bool, *, model: str, label: str) -> dict:
    """vLLM's `/classify` answer for the scored texts."""
    data = [
        {
            "index": i,
            "label": label,
            "probs": [_output(r, activation)],
            "num_classes": 1,
            "prompt_tokens": r.tokens,
            **_spread(r),
        }
        for i, r in enumerate(results)
    ]
    return _answer("classify", model, data, results)


def pooling_answer(results: list[Scored], activation: bool, *, model: str) -> dict:
    """vLLM's `/pooling` answer for the scored texts (a sequence classifier's output)."""
    data = [
        {
            "index": i,
            "object": "pooling",
            "data": [_output(r, activation)],
            "prompt_tokens": r.tokens,
            **_spread(r),
        }
        for i, r in enumerate(results)
    ]
    return _answer("pool", model, data, results)


def _spread(result: Scored) -> dict:
    """An ensemble's `spread` of the item's members (absent from one model's answer)."""
    return {} if result.spread is None else {"spread": result.spread}


def _output(result: Scored, activation: bool) -> float:
    return sigmoid(result.score) if activation else result.score


def _answer(prefix: str, model: str, data: list[dict], results: list[Scored]) -> dict:
    tokens = sum(r.tokens for r in results)
    return {
        "id": f"{prefix}-{secrets.token_hex(16)}",
        "object": "list",
        "created": int(time.time()),
        "model": model,
        "data": data,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens, "completion_tokens": 0},
    }

"""vLLM's `/classify` protocol on `orchrm serve`: the body read in a prepare worker, and
the answer in vLLM's shape, so a client written for a vLLM-served reward model works
against `orchrm serve` unchanged.

Request `{"model", "input": text or [text, ...], "use_activation"}`: each input is
already the text the reward model reads (no parsing, no rendering), checked against the
same limits as `/score` (item count, length, valid Unicode). `model` is accepted and not
checked. As in vLLM, the one-label score goes through a sigmoid unless the request says
`"use_activation": false` (vLLM's older `activation` and `softmax` flags are read the same
way; `use_activation` wins when several are given).

Answer `{"id", "object": "list", "created", "model", "data": [{"index", "label", "probs":
[score], "num_classes": 1, "prompt_tokens"}, ...], "usage": {"prompt_tokens",
"total_tokens", "completion_tokens": 0, "prompt_tokens_details": null}}`: each item's
`prompt_tokens` (the model's input tokens for that text) is orchrm's addition.
"""

from __future__ import annotations

import math
import secrets
import time
from dataclasses import dataclass

from orchrm.serve.prepare import ApiError, Limits, Rendered, Scored, decode, kind, strings

ACTIVATION_FLAGS = ("use_activation", "activation", "softmax")
"""Request fields that turn the sigmoid on or off, the first given wins."""


@dataclass(frozen=True)
class ClassifyBody:
    """A `/classify` request as the scoring thread needs it."""

    items: list[Rendered]
    activation: bool


def prepare_classify(body: bytes, limits: Limits, deadline: float) -> ClassifyBody:
    """The texts of a `/classify` body and whether to apply the sigmoid (422 for a wrong
    shape or a text over the limits, naming the field and index). Its work is one pass
    over the body, so `deadline` is the pool's to enforce."""
    value = decode(body)
    if isinstance(value.get("input"), str):
        value = {**value, "input": [value["input"]]}
    texts = strings(value, "input", limits)
    if not texts:
        raise ApiError(422, "empty", "input needs at least one text", "input")
    activation = True
    for flag in reversed(ACTIVATION_FLAGS):
        given = value.get(flag)
        if given is not None and not isinstance(given, bool):
            raise ApiError(
                422, "wrong_type", f"{flag} must be true or false, got {kind(given)}", flag
            )
        if given is not None:
            activation = given
    return ClassifyBody([Rendered(t, ()) for t in texts], activation)


def sigmoid(x: float) -> float:
    """1 / (1 + e^-x), without overflow at either end."""
    if x >= 0:
        return 1 / (1 + math.exp(-x))
    e = math.exp(x)
    return e / (1 + e)


def classify_answer(results: list[Scored], activation: bool, *, model: str, label: str) -> dict:
    """vLLM's `/classify` answer for the scored texts."""
    data = [
        {
            "index": i,
            "label": label,
            "probs": [sigmoid(r.score) if activation else r.score],
            "num_classes": 1,
            "prompt_tokens": r.tokens,
        }
        for i, r in enumerate(results)
    ]
    tokens = sum(r.tokens for r in results)
    return {
        "id": f"classify-{secrets.token_hex(16)}",
        "object": "list",
        "created": int(time.time()),
        "model": model,
        "data": data,
        "usage": {
            "prompt_tokens": tokens,
            "total_tokens": tokens,
            "completion_tokens": 0,
            "prompt_tokens_details": None,
        },
    }

"""The wire formats of reward servers: the body orchrm sends each kind and how it reads
back one raw score per text (docs/remote-scoring.md has each server's side).

- `vllm`: vLLM's `POST /classify` `{"model", "input": [text, ...], "use_activation":
  false}` -> `{"data": [{"index", "probs": [score]}, ...], "usage": {"prompt_tokens"}}`.
  `orchrm serve`'s `/classify` answers the same (plus each item's `prompt_tokens`).
- `vllm-pooling`: vLLM's `POST /pooling` `{"model", "input": [text, ...], "task":
  "classify", "use_activation": false}` -> `{"data": [{"index", "object": "pooling",
  "data": [score]}, ...], "usage": {"prompt_tokens"}}`, the route vLLM's reward-model
  documentation uses; `orchrm serve`'s `/pooling` answers the same.
- `sglang`: SGLang's native `POST /classify` `{"model", "text": [text, ...]}` -> `[{"embedding":
  [score], "meta_info": {"prompt_tokens"}}, ...]`, raw.
- `openrlhf`: an OpenRLHF reward server's `POST /get_reward` `{"query": [text, ...]}` ->
  `{"rewards": [score, ...]}`.
- `orchrm`: `orchrm serve`'s `POST /score` `{"question", "orchestrations": [harmony
  XML, ...]}` -> `{"results": [{"score", "status", "tokens"}, ...]}`: the server renders.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from urllib.parse import urlsplit

from orchrm.errors import ConfigError
from orchrm.scoring.remote_http import RemoteError

PROTOCOLS = ("vllm", "vllm-pooling", "sglang", "openrlhf", "orchrm")
ROUTE_PROTOCOLS = {
    "classify": "vllm",
    "pooling": "vllm-pooling",
    "get_reward": "openrlhf",
    "score": "orchrm",
}
"""The protocol a URL's last path segment picks when none is named."""
VLLM_PROTOCOLS = ("vllm", "vllm-pooling")
"""The protocols of vLLM's classification head, whose activation the request switches."""
ACTIVATIONS = ("none", "sigmoid")
"""What a vLLM server applies to a one-label score: nothing, or a sigmoid."""


def protocol_of(url: str, protocol: str = "") -> str:
    """`protocol` when given, else the one the URL's route names (`ROUTE_PROTOCOLS`)."""
    if protocol:
        if protocol not in PROTOCOLS:
            raise ConfigError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
        return protocol
    route = urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1]
    if route not in ROUTE_PROTOCOLS:
        routes = ", ".join(f"/{r}" for r in ROUTE_PROTOCOLS)
        raise ConfigError(
            f"cannot tell the protocol of {url!r} from its route (/{route}); end the URL "
            f"with {routes}, or name the protocol ({', '.join(PROTOCOLS)})"
        )
    return ROUTE_PROTOCOLS[route]


@dataclass(frozen=True)
class Reply:
    """One request's answer: a raw score per text, in the order sent."""

    scores: list[float]
    tokens: list[int] | None = None
    """Input tokens per text, as the server counted them (None: it did not say)."""
    total_tokens: int | None = None
    """Input tokens of the whole request, when the server gives only that (vLLM)."""


def classify_body(texts: list[str], model: str, activation: str) -> dict:
    """A vLLM `/classify` request asking for raw scores when the server can give them."""
    body: dict = {"input": texts}
    if model:
        body["model"] = model
    if activation == "none":
        body["use_activation"] = False
    return body


def pooling_body(texts: list[str], model: str, activation: str) -> dict:
    """A vLLM `/pooling` request for the classification head's output (`task`
    `classify`: a server whose model pools otherwise refuses it rather than answering
    embeddings), raw when the server can give it."""
    return {**classify_body(texts, model, activation), "task": "classify"}


def read_classify(value: object, n: int, activation: str, url: str) -> Reply:
    """The scores of a vLLM-shaped `/classify` answer for `n` texts: each item's
    `probs`, raw or (with activation `sigmoid`) read back through `logit`."""
    return _read_vllm(value, n, activation, url, "probs")


def read_pooling(value: object, n: int, activation: str, url: str) -> Reply:
    """The scores of a vLLM `/pooling` answer for `n` texts: each item's `data`, as
    `read_classify` reads `probs`."""
    return _read_vllm(value, n, activation, url, "data")


def _read_vllm(value: object, n: int, activation: str, url: str, field: str) -> Reply:
    data = value.get("data") if isinstance(value, dict) else None
    if not isinstance(data, list):
        raise RemoteError(f"the answer from {url} has no data list (a vLLM answer)")
    items = _in_order(data, n, url)
    scores = []
    for i, item in enumerate(items):
        values = item.get(field)
        if not isinstance(values, list):
            raise RemoteError(f"item {i} of the answer from {url} has no {field} list")
        if any(isinstance(v, list) for v in values):
            raise RemoteError(
                f"{url} returned a score per token for text {i}: serve the model's "
                "sequence classification head (pooling task classify)"
            )
        score = _one_label(values, i, url)
        scores.append(logit(score, f"{url} item {i}") if activation == "sigmoid" else score)
    tokens = [item.get("prompt_tokens") for item in items]
    usage = value.get("usage") if isinstance(value.get("usage"), dict) else {}
    return Reply(scores, _counts(tokens), _count(usage.get("prompt_tokens")))


def sglang_body(texts: list[str], model: str) -> dict:
    """An SGLang native `/classify` request."""
    return {"text": texts, **({"model": model} if model else {})}


def read_sglang(value: object, n: int, url: str) -> Reply:
    """The raw scores (`embedding[0]`) and token counts of an SGLang native `/classify`
    answer: one object per text, or the object itself for a single text."""
    items = [value] if isinstance(value, dict) else value
    if not isinstance(items, list) or len(items) != n:
        raise RemoteError(_count_message(url, items, n))
    scores, tokens = [], []
    for i, item in enumerate(items):
        embedding = item.get("embedding") if isinstance(item, dict) else None
        if not isinstance(embedding, list):
            raise RemoteError(f"item {i} of the answer from {url} has no embedding list")
        scores.append(_one_label(embedding, i, url))
        meta = item.get("meta_info") if isinstance(item.get("meta_info"), dict) else {}
        tokens.append(meta.get("prompt_tokens"))
    return Reply(scores, _counts(tokens))


def read_get_reward(value: object, n: int, url: str) -> Reply:
    """The scores of an OpenRLHF `/get_reward` answer; `orchrm serve`'s own route is
    refused, since it reads orchestrator output, not the reward model's text."""
    logs = value.get("extra_logs") if isinstance(value, dict) else None
    if isinstance(logs, dict) and "orchrm_parsed" in logs:
        raise RemoteError(
            f"{url} is orchrm serve's OpenRLHF route, which reads orchestrator output "
            "rather than the reward model's text: use the same server's /score URL"
        )
    rewards = value.get("rewards") if isinstance(value, dict) else None
    if not isinstance(rewards, list) or len(rewards) != n:
        raise RemoteError(_count_message(url, rewards, n))
    return Reply([_number(r, i, url) for i, r in enumerate(rewards)])


def read_score(value: object, n: int, url: str) -> Reply:
    """The scores and tokens of an `orchrm serve` `/score` answer; an orchestration the
    server could not parse is an error (orchrm wrote it, so it must parse)."""
    results = value.get("results") if isinstance(value, dict) else None
    if not isinstance(results, list) or len(results) != n:
        raise RemoteError(_count_message(url, results, n))
    scores, tokens = [], []
    for i, r in enumerate(results):
        if not isinstance(r, dict) or r.get("status") == "unparseable":
            reason = r.get("reason") if isinstance(r, dict) else "not an object"
            raise RemoteError(f"{url} could not read orchestration {i}: {reason}")
        scores.append(_number(r.get("score"), i, url))
        tokens.append(r.get("tokens"))
    return Reply(scores, _counts(tokens))


def logit(p: float, where: str) -> float:
    """The score s with sigmoid(s) = p. A float32 p near 1 keeps few digits of s (see
    docs/remote-scoring.md); p of 0 or 1 keeps none and is refused."""
    if not 0.0 < p < 1.0:
        raise RemoteError(
            f"{where}: probability {p!r} cannot be turned back into a score (the server's "
            "sigmoid saturated); serve raw scores instead (docs/remote-scoring.md)"
        )
    return math.log(p) - math.log1p(-p)


def apportion(total: int, weights: list[int]) -> list[int]:
    """`total` split in proportion to `weights` (largest remainders, ties to the earlier;
    equal parts when every weight is 0): whole numbers that add up to `total`."""
    if not weights:
        return []
    if sum(weights) <= 0:
        weights = [1] * len(weights)
    whole = sum(weights)
    parts = [total * w // whole for w in weights]
    order = sorted(range(len(weights)), key=lambda i: (-(total * weights[i] % whole), i))
    for i in order[: total - sum(parts)]:
        parts[i] += 1
    return parts


def _in_order(data: list, n: int, url: str) -> list[dict]:
    """`data` items in input order (by their `index`, else as listed)."""
    if len(data) != n or not all(isinstance(item, dict) for item in data):
        raise RemoteError(_count_message(url, data, n))
    indexes = [item.get("index") for item in data]
    if all(type(i) is int for i in indexes) and sorted(indexes) == list(range(n)):
        return sorted(data, key=lambda item: item["index"])
    return data


def _one_label(values: list, i: int, url: str) -> float:
    if len(values) != 1:
        raise RemoteError(
            f"{url} returned {len(values)} classes for text {i}: a reward model has one "
            "label (num_labels=1)"
        )
    return _number(values[0], i, url)


def _number(value: object, i: int, url: str) -> float:
    if type(value) not in (int, float) or not math.isfinite(value):
        raise RemoteError(f"{url} returned {value!r} as the score of text {i}, not a number")
    return float(value)


def _count(value: object) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _counts(values: list) -> list[int] | None:
    """Per-text token counts when the server gave every one of them."""
    counts = [_count(v) for v in values]
    return None if not counts or None in counts else counts


def _count_message(url: str, items: object, n: int) -> str:
    got = f"{len(items)} scores" if isinstance(items, list) else "no list of scores"
    return f"the answer from {url} has {got} for {n} texts"

"""Scoring through a reward server: `RemoteScorer`, the `Scorer` of a model that vLLM
(`/classify` or `/pooling`), SGLang, an OpenRLHF reward server or `orchrm serve` holds.

The client renders each orchestration exactly as the model was trained: the rendering
version and token budget come from the model's `orchrm.json` and tokenizer (a local
directory, `model_dir`), or from a tokenizer and `max_length` given as options, or (for
`orchrm serve`) from the server's `/healthz`; a model trained on another rendering
version is refused. Texts go out in batches of `batch_size`, `concurrency` requests at a
time; `orchrm.scoring.remote_http` retries and times out; `orchrm.scoring.remote_protocols` holds
the wire formats. Token counts are the server's when it gives them per text; when it
gives only a request's total (vLLM's `usage.prompt_tokens`) the total is split in
proportion to each text's count by the local tokenizer; with no count from the server,
the local count (what `OrchRM` reports). PyTorch and Transformers are imported only
when a tokenizer is loaded.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from orchrm.errors import ConfigError, MissingInput
from orchrm.orchestration import (
    RM_RENDER_VERSION,
    Orchestration,
    replace_surrogates,
    to_harmony,
)
from orchrm.parse import ParseError
from orchrm.runtime.retry import RetryPolicy
from orchrm.scoring.base import Item, ModelInfo, RenderingScorer, Scored, gather, parse_items
from orchrm.scoring.remote_http import JsonClient, RemoteError
from orchrm.scoring.remote_protocols import (
    ACTIVATIONS,
    VLLM_PROTOCOLS,
    Reply,
    apportion,
    classify_body,
    pooling_body,
    protocol_of,
    read_classify,
    read_get_reward,
    read_pooling,
    read_score,
    read_sglang,
    sglang_body,
)

API_KEY_ENV = "ORCHRM_API_KEY"
"""Where `orchrm.scoring.load.load_scorer` reads the bearer token when none is given."""
METADATA = "orchrm.json"
DEFAULT_MAX_LENGTH = 512
"""Tokens per text when nothing says otherwise (as `OrchRM.max_length`)."""
ACTIVATION_TOLERANCE = 1e-6
"""How close a score asked for with and without the activation must be for the server
to count as ignoring `use_activation` (float32 rounding; sigmoid moves any score in
(0, 1) other than its fixed point near 0.659 by more)."""


@dataclass
class RemoteConfig(RetryPolicy):
    """Where the reward server is, how to speak to it and how to render for its model;
    how long a request may wait and how it is retried are the `RetryPolicy` fields
    (`timeout_s`, `retries`, `backoff_s`, `max_backoff_s`)."""

    url: str = ""
    """The server's scoring route: `.../classify` (vLLM, or SGLang's native route with
    protocol `sglang`), `.../pooling` (vLLM), `.../get_reward` (an OpenRLHF reward
    server) or `.../score` (`orchrm serve`)."""
    protocol: str = ""
    """`vllm`, `vllm-pooling`, `sglang`, `openrlhf` or `orchrm`; empty: the one the URL's
    route names."""
    model_dir: str = ""
    """A local copy of the served model's directory (at least its `orchrm.json` and
    tokenizer files): the rendering version and budget texts are rendered with."""
    tokenizer: str = ""
    """A tokenizer name or directory to count the rendering budget with, when there is
    no `model_dir`."""
    max_length: int | None = None
    """Tokens per text, special tokens included; None: the model's `orchrm.json`, else
    `orchrm serve`'s /healthz, else 512."""
    model: str = ""
    """The `model` of vLLM and SGLang requests (the name the server serves); empty: not
    sent, so the server uses the model it serves."""
    server_activation: str = "none"
    """What a vLLM server applies to the score: `none` (the raw score, asked for with
    `use_activation: false`) or `sigmoid` (the server can only return a probability p,
    read back as logit(p), which loses resolution as scores grow)."""
    check_activation: bool = True
    """With `server_activation` none, probe a vLLM server whose first scores all lie in
    (0, 1) and refuse one that ignores `use_activation: false`
    (`RemoteScorer.check_activation`)."""
    logit_mean: float = 0.0
    """The vLLM server's `--pooler-config` `logit_mean`: its head returns (score -
    logit_mean) / logit_sigma, which is read back as the model's score."""
    logit_sigma: float = 1.0
    """The vLLM server's `--pooler-config` `logit_sigma` (see `logit_mean`)."""
    batch_size: int = 32
    """Texts per request."""
    concurrency: int = 4
    """Requests in flight at once."""
    api_key: str | None = None
    """Bearer token sent with every request (vLLM's --api-key, orchrm serve's key)."""
    check_version: bool = True
    """Refuse a model trained on another rendering version than this orchrm's."""
    trust_remote_code: bool = False
    """Let the tokenizer run code shipped with it."""

    def check(self) -> None:
        """Raise ConfigError for a setting that cannot work, before any request."""
        if not self.url:
            raise ConfigError("a remote scorer needs the server's URL")
        protocol = protocol_of(self.url, self.protocol)
        if protocol == "sglang" and urlsplit(self.url).path.rstrip("/").endswith("/v1/classify"):
            raise ConfigError(
                "SGLang's /v1/classify applies a softmax over the model's one label, so every "
                "score reads 1.0: use SGLang's native /classify route"
            )
        if self.server_activation not in ACTIVATIONS:
            raise ConfigError(
                f"server_activation must be none or sigmoid, got {self.server_activation!r}"
            )
        self._check_logit_shift(protocol)
        for name in ("batch_size", "concurrency"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        super().check()
        if self.max_length is not None and self.max_length < 2:
            raise ConfigError(f"max_length must be at least 2, got {self.max_length}")

    def _check_logit_shift(self, protocol: str) -> None:
        if not (math.isfinite(self.logit_mean) and math.isfinite(self.logit_sigma)):
            raise ConfigError("logit_mean and logit_sigma must be finite numbers")
        if self.logit_sigma == 0:
            raise ConfigError("logit_sigma cannot be 0 (vLLM refuses it too)")
        shifted = (self.logit_mean, self.logit_sigma) != (0.0, 1.0)
        if shifted and protocol not in VLLM_PROTOCOLS:
            raise ConfigError(
                f"logit_mean and logit_sigma are vLLM's pooler settings; protocol {protocol} "
                "returns the model's score as it is"
            )


def _read_metadata(model_dir: str) -> dict:
    """The `orchrm.json` of a model directory ({} for a model used off the shelf); a
    `MissingInput` (exit 3) naming it when it cannot be read or is half-written."""
    if not model_dir:
        return {}
    path = Path(model_dir)
    if not path.is_dir():
        raise ConfigError(f"model directory {path} does not exist")
    try:
        value = json.loads((path / METADATA).read_text()) if (path / METADATA).exists() else {}
    except (OSError, ValueError) as err:
        raise MissingInput(
            f"{path / METADATA}: cannot be read ({err}): half-written or damaged; copy the "
            "model directory again, or re-train it"
        ) from None
    if not isinstance(value, dict):
        raise MissingInput(f"{path / METADATA}: not a JSON object; copy the model directory again")
    return value


def _harmony(o: Orchestration | str) -> str:
    return o if isinstance(o, str) else to_harmony(o)


def _check_render_version(version: object, where: str) -> None:
    if version and version != RM_RENDER_VERSION:
        raise ConfigError(
            f"{where} was trained on rendering {version!r}; this orchrm renders "
            f"{RM_RENDER_VERSION!r}: retrain, or score with check_version off"
        )


class RemoteScorer(RenderingScorer):
    """A reward model behind an HTTP server, used as `OrchRM` is: `score` and `info`
    (and, when texts are rendered here, `render`, `budget` and `score_texts`)."""

    def __init__(self, config: RemoteConfig):
        config.check()
        self.config = config
        self.protocol = protocol_of(config.url, config.protocol)
        self.client = JsonClient(config, config.api_key)
        self.metadata = _read_metadata(config.model_dir)
        if config.check_version:
            _check_render_version(self.metadata.get("render_version"), config.model_dir)
        if self.protocol == "orchrm":
            self._read_health()
        self._pool = ThreadPoolExecutor(config.concurrency, thread_name_prefix="orchrm-remote")
        self._activation_lock = threading.Lock()
        self._activation_checked = not (
            self.protocol in VLLM_PROTOCOLS
            and config.server_activation == "none"
            and config.check_activation
        )

    @property
    def url(self) -> str:
        return self.config.url

    @property
    def batch_size(self) -> int:
        return self.config.batch_size

    def _route(self, name: str) -> str:
        """The URL of another route of the same server (`orchrm serve`'s)."""
        parts = urlsplit(self.config.url)
        base = parts.path.rstrip("/").rsplit("/", 1)[0] if parts.path.rstrip("/") else ""
        return urlunsplit((parts.scheme, parts.netloc, f"{base}/{name}", "", ""))

    def _read_health(self) -> None:
        """`orchrm serve`'s rendering version and max_length, checked against the model
        directory's when both are known."""
        try:
            health = self.client.get(self._route("healthz"))
        except RemoteError as err:
            if err.status is None:
                raise
            health = None  # no /healthz there: the version and max_length stay unknown
        health = health if isinstance(health, dict) else {}
        if self.config.check_version:
            _check_render_version(health.get("render_version"), f"the model at {self.url}")
        served = health.get("max_length")
        known = self.config.max_length or self.metadata.get("max_length")
        if type(served) is int and known and known != served:
            raise ConfigError(
                f"max_length is {known} here and {served} at {self.url}: is the model "
                "directory the served model?"
            )
        if type(served) is int:
            self.metadata.setdefault("max_length", served)
        if health.get("render_version"):
            self.metadata.setdefault("render_version", health["render_version"])

    @property
    def max_length(self) -> int:
        return int(self.config.max_length or self.metadata.get("max_length", DEFAULT_MAX_LENGTH))

    @property
    def renders(self) -> bool:
        """Whether texts are rendered here (a tokenizer to count the budget with)."""
        return bool(self.config.model_dir or self.config.tokenizer)

    @cached_property
    def tokenizer(self):
        """The model's tokenizer (loads Transformers)."""
        name = self.config.model_dir or self.config.tokenizer
        if not name:
            raise ConfigError(
                f"scoring through {self.url} renders texts here, which needs the model's "
                "tokenizer: give the model directory or a tokenizer"
            )
        from transformers import AutoTokenizer

        try:
            return AutoTokenizer.from_pretrained(
                name, trust_remote_code=self.config.trust_remote_code
            )
        except (OSError, ValueError) as err:
            raise ConfigError(f"cannot load the tokenizer of {name!r}: {err}") from None

    @property
    def info(self) -> ModelInfo:
        """The model's `orchrm.json` (with what `orchrm serve`'s /healthz adds) and, when
        texts are rendered here, the rendering budget."""
        return ModelInfo(self.metadata, self.budget if self.renders else None)

    def score(self, items: Sequence[Item]) -> list[Scored]:
        """One `Scored` per item, in input order: rendered here when a tokenizer is
        known, else by `orchrm serve` (`/score`), which gets harmony text as given and
        an `Orchestration` as `to_harmony` writes it, and each task's domain. Harmony
        text that does not parse here gets a None score and is not sent."""
        if self.renders or self.protocol != "orchrm":
            return super().score(items)
        parsed = parse_items(items)
        sent = [
            (item[0], item[1], p[2])
            for item, p in zip(items, parsed, strict=True)
            if not isinstance(p, ParseError)
        ]
        return gather(parsed, self._score_on_server(sent))

    def _score_on_server(self, items: list[tuple[str, Orchestration | str, str]]) -> list[Scored]:
        """(question, orchestration, domain) items sent as harmony XML to `orchrm
        serve`'s `/score`, which renders them with the served model's tokenizer: one
        request per question, domain and batch."""
        by_question: dict[tuple[str, str], list[int]] = {}
        for n, (question, _, domain) in enumerate(items):
            by_question.setdefault((question, domain), []).append(n)
        jobs = [
            (key, members[start : start + self.batch_size])
            for key, members in by_question.items()
            for start in range(0, len(members), self.batch_size)
        ]

        def post(job: tuple[tuple[str, str], list[int]]) -> Reply:
            (question, domain), members = job
            body = {
                "question": question,
                "orchestrations": [_harmony(items[n][1]) for n in members],
            }
            if domain:
                body["domain"] = domain
            return read_score(self.client.post(self.url, body), len(members), self.url)

        out: list[Scored | None] = [None] * len(items)
        for (_, members), reply in zip(jobs, self._pool.map(post, jobs), strict=True):
            counts = reply.tokens or [0] * len(members)
            for n, score, count in zip(members, reply.scores, counts, strict=True):
                out[n] = Scored(score, count)
        return out

    def score_texts(self, texts: list[str]) -> list[Scored]:
        """Raw reward and input tokens of each rendered text, in input order (tokens as
        the module docstring says)."""
        if not texts:
            return []
        clean = [replace_surrogates(t) for t in texts]  # JSON cannot carry lone surrogates
        chunks = [clean[i : i + self.batch_size] for i in range(0, len(clean), self.batch_size)]
        out = []
        for chunk, reply in zip(chunks, self._replies(chunks), strict=True):
            tokens = reply.tokens or self._local_tokens(chunk, reply)
            scores = [self._unshifted(s) for s in reply.scores]
            out += [Scored(s, t) for s, t in zip(scores, tokens, strict=True)]
        return out

    def _unshifted(self, score: float) -> float:
        """The model's score from the (score - logit_mean) / logit_sigma a vLLM server
        with those pooler settings returns."""
        mean, sigma = self.config.logit_mean, self.config.logit_sigma
        return score if (mean, sigma) == (0.0, 1.0) else score * sigma + mean

    def _replies(self, chunks: list[list[str]]) -> list[Reply]:
        """Each chunk's reply; the first chunk a scorer sends goes alone, and its scores
        are checked (`check_activation`) before the others go."""
        with self._activation_lock:
            if not self._activation_checked:
                first = self._pool.submit(self._checked_reply, chunks[0]).result()
                self._activation_checked = True
                return [first, *self._pool.map(self._post_texts, chunks[1:])]
        return list(self._pool.map(self._post_texts, chunks))

    def _checked_reply(self, texts: list[str]) -> Reply:
        """One chunk's reply, checked (on a request thread, keeping its connection)."""
        reply = self._post_texts(texts)
        self.check_activation(texts[0], reply.scores)
        return reply

    def check_activation(self, text: str, scores: list[float]) -> None:
        """Refuse a vLLM server that ignores `use_activation: false` (vLLM before 0.11.1
        drops request fields it does not know) and so returns sigmoid probabilities where
        raw scores were asked for. A raw score outside (0, 1) settles it; when every
        score of the first batch (as the server sent it) lies inside, the first text is
        sent again with `use_activation: true`: a server that reads the field answers
        sigmoid(score), one that ignores it the same number. Raises RemoteError naming
        the server's version (its `/version`) and the fixes."""
        if not all(0.0 < s < 1.0 for s in scores):
            return
        activated = self._post_vllm(self.url, [text], "none", use_activation=True)
        if abs(activated.scores[0] - scores[0]) > ACTIVATION_TOLERANCE:
            return
        raise RemoteError(
            f"{self.url} ({self._server_version()}) ignores use_activation and returns "
            "probabilities, not raw scores: serve with vLLM 0.11.1 or later, or start it with "
            "--pooler-config '{\"use_activation\": false}' (0.12 on) or "
            "--override-pooler-config '{\"activation\": false}' (0.10.1 to 0.11.x), or set "
            "server_activation=sigmoid to read probabilities back as logits "
            "(docs/remote-scoring.md); check_activation=false keeps scores that are raw"
        )

    def _server_version(self) -> str:
        """`vLLM X` from the server's `/version`, or what stands in for it."""
        try:
            answer = self.client.get(self._route("version"))
        except RemoteError:
            return "its /version does not answer"
        version = answer.get("version") if isinstance(answer, dict) else None
        return f"vLLM {version}" if isinstance(version, str) else "its /version names none"

    def _post_texts(self, texts: list[str]) -> Reply:
        """One request of rendered texts, in the server's protocol."""
        config, n = self.config, len(texts)
        if self.protocol == "sglang":
            answer = self.client.post(self.url, sglang_body(texts, config.model))
            return read_sglang(answer, n, self.url)
        if self.protocol == "openrlhf":
            return read_get_reward(self.client.post(self.url, {"query": texts}), n, self.url)
        if self.protocol == "orchrm":
            return self._post_vllm(self._route("classify"), texts, "none")
        return self._post_vllm(self.url, texts, config.server_activation)

    def _post_vllm(
        self, url: str, texts: list[str], activation: str, use_activation: bool | None = None
    ) -> Reply:
        """One request to a vLLM-shaped route (`/pooling` for protocol `vllm-pooling`,
        else `/classify`); `use_activation` replaces the field `activation` sets."""
        pooling = self.protocol == "vllm-pooling"
        body = (pooling_body if pooling else classify_body)(texts, self.config.model, activation)
        if use_activation is not None:
            body["use_activation"] = use_activation
        read = read_pooling if pooling else read_classify
        return read(self.client.post(url, body), len(texts), activation, url)

    def _local_tokens(self, texts: list[str], reply: Reply) -> list[int]:
        """Input tokens per text by the local tokenizer (as `OrchRM` counts them), scaled
        to the server's total when it gave one that differs; without a tokenizer, the
        total split by characters."""
        if not self.renders:
            return apportion(reply.total_tokens or 0, [len(t) for t in texts])
        encoded = self.tokenizer(texts, truncation=True, max_length=self.max_length)
        counts = [len(ids) for ids in encoded["input_ids"]]
        total = reply.total_tokens
        return counts if total is None or total == sum(counts) else apportion(total, counts)

    def close(self) -> None:
        """Stop the request threads (a scorer is also usable until the process ends)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


__all__ = ["API_KEY_ENV", "RemoteConfig", "RemoteError", "RemoteScorer"]

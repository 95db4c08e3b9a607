"""What a request body becomes before the reward model sees it: decoded, checked, parsed,
validated and rendered, item by item.

`prepare_request` runs in the prepare workers (`orchrm.serve.workers`), never on the event
loop and never in the scoring thread: the work grows with the body, so it runs where a
deadline can stop it. Checks, in order: JSON (400), shape and limits (422 naming the
field and index), valid Unicode (422 `invalid_unicode`: a lone surrogate, which JSON
`\\ud800` escapes can carry, names its field and character offset). An orchestration
that does not parse is never an error: it gets the configured penalty.
"""

from __future__ import annotations

import pickle
import time
from dataclasses import asdict, dataclass
from typing import Any

from orchrm.jsonl import BadLine, loads, printable
from orchrm.orchestration import Orchestration, TokenCounter, render_for_rm, validate
from orchrm.parse import ParseError, parse_harmony
from orchrm.serve.openrlhf import read_query

SCORING_ROUTES = ("score", "select")
"""Routes whose body is `{"question", "orchestrations"}`; `get_reward` reads OpenRLHF's."""
BODY_FIELDS = {
    "score": ("question", "orchestrations", "domain"),
    "select": ("question", "orchestrations", "domain", "selector", "answers", "selector_options"),
}
"""The fields of orchrm's own bodies: any other is a 422 `unknown_field` naming it, so a
typo (`"domian"`) is not ignored. `/get_reward` and `/classify` speak OpenRLHF's and
vLLM's shapes, whose clients add fields of their own (`labels`, `model`, `user`, ...):
fields they do not read are accepted and ignored."""


class ApiError(Exception):
    """A request the service refuses: HTTP status, stable code, sentence, field."""

    passthrough = True  # a worker's ApiError reaches the caller as itself

    def __init__(self, status: int, code: str, message: str, field: str | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field

    def __reduce__(self):  # crosses the worker pipe intact
        return ApiError, (self.status, self.code, self.message, self.field)


@dataclass(frozen=True)
class Limits:
    """What a prepare worker needs of the service's settings and model."""

    max_items: int
    max_text_chars: int
    invalid_penalty: float
    max_tokens: int
    """The rendering budget (`OrchRM.budget`): tokens without the special ones."""
    max_request_seconds: float
    reads_domain: bool = False
    """The model was trained on texts with the domain line: a request's `domain` is
    rendered into each text (and ignored otherwise)."""


@dataclass(frozen=True)
class Scored:
    """One orchestration's score and what parsing it found."""

    score: float
    status: str  # ok | invalid | unparseable
    reason: str | None  # ParseError code, or the broken rules joined by ","
    message: str | None
    tokens: int  # reward-model input tokens (0 when unparseable)
    p_correct: float | None = None
    """P(executing it gives a right answer), from the model's calibration (None: the
    model has none, or the orchestration does not parse)."""
    mean: float | None = None
    """An ensemble's mean of its members' normalized rewards (None: one model, or the
    orchestration does not parse)."""
    spread: float | None = None
    """An ensemble's standard deviation of its members' normalized rewards (None: one
    model, or the orchestration does not parse)."""


def answer_of(result: Scored) -> dict:
    """A result as a route answers it: `mean` and `spread` only from an ensemble."""
    out = asdict(result)
    if result.spread is None:
        del out["mean"], out["spread"]
    return out


@dataclass(frozen=True)
class Rendered:
    """A parsed orchestration rendered for the model, waiting for its score."""

    text: str
    broken: tuple[str, ...]
    """The graph rules it breaks (scored all the same, reported as `invalid`)."""
    orchestration: Orchestration | None = None
    """The parsed plan, kept for a selector that reads it (`/select`)."""

    def scored(self, result) -> Scored:
        """Its result from the model's `orchrm.scoring.base.Scored` (score, input tokens
        read, an ensemble's mean and spread)."""
        reason = ",".join(self.broken) or None
        message = f"breaks graph rules: {reason}" if self.broken else None
        status = "invalid" if self.broken else "ok"
        return Scored(
            result.score, status, reason, message, result.tokens,
            mean=result.mean, spread=result.spread,
        )  # fmt: skip


class Tokens:
    """The model's tokenizer as the renderer counts with it, from `tokenizer_spec`."""

    def __init__(self, spec: tuple[str, Any]):
        kind, data = spec
        if kind == "fast":
            from tokenizers import Tokenizer

            self.fast = Tokenizer.from_str(data)
            self.fast.no_truncation()  # as `tokenizer(text)` without truncation reads it
            self.fast.no_padding()
        else:
            self.fast, self.slow = None, pickle.loads(data)

    def count(self, text: str) -> int:
        """Tokens of `text` without special tokens (`orchrm.rmodel.tokens.token_counter`)."""
        if self.fast is not None:
            return len(self.fast.encode(text, add_special_tokens=False).ids)
        return len(self.slow(text, add_special_tokens=False)["input_ids"])

    def token_ends(self, text: str) -> list[int]:
        """Where each token of `text` ends (a fast tokenizer's offsets)."""
        return [end for _, end in self.fast.encode(text, add_special_tokens=False).offsets]

    @property
    def counter(self) -> TokenCounter:
        """The `count_tokens` to render with: with token ends for a fast tokenizer, so a
        cut piece is tokenized once (as `orchrm.rmodel.tokens.token_counter` gives)."""
        return _OffsetCounter(self) if self.fast is not None else self.count


class _OffsetCounter:
    """`Tokens` of a fast tokenizer as an `OffsetTokenCounter`."""

    def __init__(self, tokens: Tokens):
        self.tokens = tokens

    def __call__(self, text: str) -> int:
        return self.tokens.count(text)

    def token_ends(self, text: str) -> list[int]:
        return self.tokens.token_ends(text)


def tokenizer_spec(tokenizer) -> tuple[str, Any]:
    """A Hugging Face tokenizer in a form a worker process loads quickly: the Rust
    tokenizer's JSON when it is a fast one, else the pickled tokenizer."""
    if getattr(tokenizer, "is_fast", False):
        return "fast", tokenizer.backend_tokenizer.to_str()
    return "pickled", pickle.dumps(tokenizer)


_TOKENS: Tokens | None = None  # set once per worker process by `install_tokenizer`


def install_tokenizer(spec: tuple[str, Any]) -> None:
    """Worker initializer: load the tokenizer every later `prepare_request` counts with."""
    global _TOKENS
    _TOKENS = Tokens(spec)


def prepare_request(
    route: str, body: bytes, limits: Limits, deadline: float
) -> list[Scored | Rendered]:
    """The items of one request body for `route`, in input order: a final `Scored` for
    each unparseable orchestration, a `Rendered` for each parsed one. Raises `ApiError`
    for a refused body, and 503 `over_budget` past `deadline` (`time.monotonic`, which
    processes share; checked between items, so one item's work is the most a deadline
    can overrun here: the pool kills a worker that overruns further)."""
    value = decode(body)
    if route in BODY_FIELDS:
        known_fields(value, route)
    if route not in SCORING_ROUTES:  # (query, prompt) pairs, read into (question, plan)
        return prepare_items(reward_body(value, limits), limits, deadline, queries=True)
    question, texts = scoring_body(value, limits, required=route == "select")
    domain = domain_of(value, limits)
    return prepare_items([(question, t) for t in texts], limits, deadline, domain=domain)


def prepare_items(
    pairs: list[tuple],
    limits: Limits,
    deadline: float,
    *,
    queries: bool = False,
    keep_plans: bool = False,
    domain: str = "",
) -> list[Scored | Rendered]:
    """`prepare_item` of each (question, orchestration) pair in order, or of each
    OpenRLHF (query, prompt) pair read by `read_query` with `queries`; `keep_plans`
    keeps each parsed plan in its `Rendered`. 503 `over_budget` past `deadline`, checked
    between items."""
    if _TOKENS is None:
        raise RuntimeError("install_tokenizer has not run in this process")
    out: list[Scored | Rendered] = []
    for i, (first, second) in enumerate(pairs):
        if time.monotonic() > deadline:
            where = f"to be prepared ({i} of {len(pairs)} items were)"
            raise over_budget(limits.max_request_seconds, where)
        if queries:
            read = read_query(first, second)
            first, second = read.question, read.orchestration
        out.append(prepare_item(first, second, limits, _TOKENS, keep_plans, domain))
    return out


def render_plans(
    question: str,
    plans: list[Orchestration],
    limits: Limits,
    deadline: float,
    domain: str = "",
) -> list[str]:
    """The text the model reads of each plan a request does not hold (`/select`'s search
    over edits of its orchestrations), rendered as `prepare_item` renders. 503
    `over_budget` past `deadline`, checked between plans."""
    if _TOKENS is None:
        raise RuntimeError("install_tokenizer has not run in this process")
    out = []
    for i, o in enumerate(plans):
        if time.monotonic() > deadline:
            raise over_budget(limits.max_request_seconds, f"searching ({i} edits rendered)")
        out.append(render_for_rm(question, o, limits.max_tokens, _TOKENS.counter, domain))
    return out


def over_budget(seconds: float, where: str) -> ApiError:
    """The refusal of a request that ran past `max_request_seconds`."""
    return ApiError(
        503,
        "over_budget",
        f"the request needed more than max_request_seconds ({seconds:g} s) {where}; send "
        "fewer or shorter orchestrations, or retry when the service is less busy",
    )


def prepare_item(
    question: str,
    text: str,
    limits: Limits,
    tokens: Tokens,
    keep_plan: bool = False,
    domain: str = "",
) -> Scored | Rendered:
    """Parse, validate and render one orchestration of a task of `domain` (`keep_plan`:
    keep the parsed plan)."""
    try:
        o = parse_harmony(text)
    except ParseError as err:
        return Scored(limits.invalid_penalty, "unparseable", err.reason, err.message, 0)
    broken = tuple(sorted({str(v.rule) for v in validate(o)}))
    rendered = render_for_rm(question, o, limits.max_tokens, tokens.counter, domain)
    return Rendered(rendered, broken, o if keep_plan else None)


def decode(body: bytes) -> dict:
    """The body as a JSON object (400 when it is not UTF-8 JSON or nests deeper than
    `orchrm.jsonl.MAX_JSON_DEPTH`, refused before the decoder could recurse; 422 when
    not an object)."""
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ApiError(
            400, "malformed_json", f"the body is not UTF-8: byte {err.start} is invalid"
        ) from None
    value = loads(text, surrogates=False)  # lone surrogates: `check_text` names the field
    if isinstance(value, BadLine):
        raise ApiError(400, "malformed_json", f"the body is not valid JSON: {value.message}")
    if not isinstance(value, dict):
        raise ApiError(422, "wrong_type", f"the body must be a JSON object, got {kind(value)}")
    return value


def known_fields(value: dict, route: str) -> None:
    """422 `unknown_field` naming the first field of a `route` body that is not one of
    `BODY_FIELDS[route]` (with the nearest known name when one is close)."""
    fields = BODY_FIELDS[route]
    unknown = next((name for name in value if name not in fields), None)
    if unknown is None:
        return
    import difflib

    shown = printable(unknown) if len(unknown) <= 40 else printable(unknown[:37]) + "..."
    near = difflib.get_close_matches(unknown[:40], fields, n=1)
    hint = f"did you mean {near[0]}? " if near else ""
    raise ApiError(
        422,
        "unknown_field",
        f"{shown} is not a field of a /{route} body: {hint}its fields are {', '.join(fields)}",
        shown,
    )


def domain_of(value: dict, limits: Limits) -> str:
    """The body's optional `domain`, for a model that reads it ('' otherwise)."""
    domain = value.get("domain", "")
    if not isinstance(domain, str):
        raise ApiError(422, "wrong_type", f"domain must be a string, got {kind(domain)}", "domain")
    check_text("domain", domain, limits.max_text_chars)
    return domain if limits.reads_domain else ""


def scoring_body(value: dict, limits: Limits, *, required: bool) -> tuple[str, list[str]]:
    """(question, orchestrations) of a /score or /select body; `required`: at least one."""
    question = value.get("question")
    if not isinstance(question, str):
        raise ApiError(
            422, "wrong_type", f"question must be a string, got {kind(question)}", "question"
        )
    check_text("question", question, limits.max_text_chars)
    texts = strings(value, "orchestrations", limits)
    if required and not texts:
        raise ApiError(422, "empty", "orchestrations needs at least one item", "orchestrations")
    return question, texts


def reward_body(value: dict, limits: Limits) -> list[tuple[str, str | None]]:
    """OpenRLHF's `query` and optional `prompts` as (query, prompt or None) pairs, read
    by `read_query` one at a time under the deadline."""
    queries = strings(value, "query", limits)
    prompts = strings(value, "prompts", limits, required=False)
    if prompts is not None and len(prompts) != len(queries):
        raise ApiError(
            422,
            "length_mismatch",
            f"prompts has {len(prompts)} items and query {len(queries)}: one prompt per "
            "query, or no prompts",
            "prompts",
        )
    return [(q, prompts[i] if prompts else None) for i, q in enumerate(queries)]


def strings(value: dict, name: str, limits: Limits, required: bool = True) -> Any:
    """`value[name]` as a list of strings within the item and length limits (422 naming
    the field and index otherwise); None when absent and not required."""
    items = value.get(name)
    if items is None:
        if required:
            raise ApiError(422, "missing_field", f"{name} is required", name)
        return None
    if not isinstance(items, list):
        raise ApiError(422, "wrong_type", f"{name} must be a list of strings", name)
    if len(items) > limits.max_items:
        raise ApiError(
            422,
            "too_many_items",
            f"{name} has {len(items)} items; the limit is {limits.max_items}",
            name,
        )
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise ApiError(
                422, "wrong_type", f"{name}[{i}] must be a string, got {kind(text)}", f"{name}[{i}]"
            )
        check_text(f"{name}[{i}]", text, limits.max_text_chars)
    return items


def check_text(field: str, text: str, limit: int) -> None:
    """422 when `text` is longer than `limit` characters or is not valid Unicode."""
    if len(text) > limit:
        raise ApiError(
            422, "text_too_long", f"{field} has {len(text)} characters; the limit is {limit}", field
        )
    if text.isascii():
        return
    try:
        text.encode("utf-8")  # one C pass; fails exactly on lone surrogates
    except UnicodeEncodeError as err:
        raise ApiError(
            422,
            "invalid_unicode",
            f"{field} has a lone surrogate (U+{ord(text[err.start]):04X}) at character "
            f"{err.start}: text must be valid Unicode (a \\ud800-\\udfff escape must be "
            "half of a pair)",
            field,
        ) from None


def kind(value: Any) -> str:
    """The JSON name of a value's type."""
    names = {bool: "boolean", int: "number", float: "number", str: "string"}
    names |= {list: "array", dict: "object", type(None): "null"}
    return names.get(type(value), type(value).__name__)

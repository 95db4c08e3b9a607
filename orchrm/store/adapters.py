"""Log formats -> `LogRecord`s: one adapter per format, each naming what is malformed.

`orchrm` (orchrm's run and world logs), `diagram` (MAS-Orchestra diagram-browser
records, each in the domain its page's name says: `diagram_domain`), `steps`
(MAS-Orchestra training-step folders: generated code joined with responses),
`preference` (OrchRM-datasets records), `generic` (any JSONL, with a field mapping).
An adapter yields `(line, LogRecord | Malformed)` for every input record (and `BLANK`
for a blank line), so every line of a file is accounted for.

Lines are read by `orchrm.jsonl` (bytes split by hand, each line decoded and checked on
its own) and every field by `orchrm.store.fields`, so a record reaches the store only
with the types its columns need; anything else is a `Malformed` with a reason code:
the line reasons of `orchrm.jsonl.LINE_REASONS`, `not_a_record`, `bad_field`,
`missing_field`, `invalid_orchestration`, `unreadable`, or a format's own
(`not_run_record`, `not_preference`; `unparseable_side` from `orchrm.store.ingest`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from orchrm.errors import OrchrmError
from orchrm.jsonl import BLANK, BadLine, lone_surrogate, read_document, read_values
from orchrm.orchestration import Orchestration
from orchrm.parse import (
    ParseError,
    from_dict,
    parse_diagram_record,
    parse_harmony,
    parse_mas_code,
    parse_record,
)
from orchrm.store.fields import (
    INT64_MAX,
    FieldError,
    boolean,
    describe,
    integer,
    mapping,
    number,
    text,
)
from orchrm.tasks.run import RUN_SCHEMA


class FormatError(OrchrmError):
    """A file or folder is not in a format an adapter reads, or options are missing."""


ADAPTERS = ("orchrm", "diagram", "steps", "preference", "generic")
PAIR_KINDS = {
    "correct-over-incorrect": "coi",
    "specialized-over-base": "sob",
    "specialized-over-other-domain": "soo",
}
"""OrchRM-datasets `source` values -> orchrm pair kinds."""
GENERIC_FIELDS = (
    "task_id",
    "question",
    "truth",
    "domain",
    "orchestration",
    "orchestrator",
    "step",
    "sample_index",
    "answer",
    "correct",
    "logprob",
)
"""Fields a generic record can map (`--map field=column`); `question` and
`orchestration` are required."""
DIAGRAM_DOMAINS = (
    (re.compile(r"aime\d*"), "aime"),
    (re.compile(r"hotpot(qa)?"), "hotpotqa"),
    (re.compile(r"browsecomp\w*"), "browsecomp-plus"),
    (re.compile(r"gpqa\w*"), "gpqa"),
    (re.compile(r"masbench\w*"), "masbench"),
)
"""A word of a diagram page's name -> the domain it names (the benchmark names of
`orchrm.tasks.benchmarks`): MAS-Orchestra publishes AIME24, HotpotQA and BrowseComp+ runs
beside MASBench ones in the same format, e.g. `harmony_grpo_7b_120b_aime24.html`."""
DIAGRAM_DEFAULT_DOMAIN = "masbench"


@dataclass
class LogRecord:
    """One orchestration sample, normalized from any log format."""

    question: str
    orchestration: Orchestration | ParseError | str  # str: raw harmony, parsed later
    orchestrator: str
    task_id: str | None = None
    truth: str | None = None
    domain: str = ""
    raw: str = ""
    step: int | None = None
    sample_index: int | None = None
    logprob: float | None = None
    executed: bool = False
    answer: str | None = None
    correct: bool | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None
    p_success: float | None = None
    execution_seed: int | None = None
    """The seed of this execution: records of one sample with other seeds are its
    repeated executions, each kept (None: the sample's one execution)."""
    pair: tuple[str, str] | None = None  # preference import: (kind, "chosen" | "rejected")


@dataclass(frozen=True)
class Malformed:
    """A record that is not what its format says: why, and what exactly."""

    reason: str
    message: str


# --------------------------------------------------------------------------- adapters


def _steps(path: Path, options: dict) -> Iterator[tuple[int, LogRecord | Malformed]]:
    """Join generated_code/step_N_generated_code.json with
    responses_and_ground_truth/step_N_responses.json on (step, sample_index, question).
    A step file that cannot be read or decoded counts as one malformed record."""
    line = 0
    for code_file in sorted(
        (path / "generated_code").glob("step_*_generated_code.json"), key=_step_order
    ):
        try:
            step = integer(code_file.name.split("_")[1], "step (in the file name)")
            answers = path / "responses_and_ground_truth" / f"step_{step}_responses.json"
            generated, responses = _step_documents(code_file, answers)
        except (FieldError, _BadDocument) as err:
            line += 1
            yield line, Malformed(err.reason, f"{code_file.name}: {err}")
            continue
        outcome = {_join_key(r): r for r in responses if isinstance(r, dict)}
        for r in generated:
            line += 1
            try:
                yield line, _step_record(r, step, outcome, path, options)
            except FieldError as err:
                yield line, Malformed(err.reason, f"{code_file.name}: {err}")


def _step_order(code_file: Path) -> tuple[int, str]:
    part = code_file.name.split("_")[1]
    return (int(part) if part.isascii() and part.isdigit() and len(part) < 20 else -1, part)


class _BadDocument(Exception):
    """A training-step file that is not a readable list of records."""

    def __init__(self, reason: str, message: str):
        self.reason = reason
        super().__init__(message)


def _step_documents(code_file: Path, answers_file: Path) -> tuple[list, list]:
    """The records of a step's two files (the responses file may be absent)."""
    documents = []
    for file in (code_file, answers_file):
        if file is answers_file and not file.exists():
            documents.append([])
            continue
        try:
            value = read_document(file)
        except OSError as err:
            raise _BadDocument("unreadable", f"cannot read {file.name}: {err.strerror}") from None
        if isinstance(value, BadLine):
            raise _BadDocument(value.reason, f"{file.name}: {value.message}")
        if not isinstance(value, list):
            raise _BadDocument("not_a_record", f"{file.name}: expected a list of records")
        documents.append(value)
    return documents[0], documents[1]


def _join_key(r: dict) -> tuple | None:
    """(sample_index, question) when both are plain values, the key steps join on."""
    key = (r.get("sample_index"), r.get("question"))
    return key if all(isinstance(k, str | int | float | None) for k in key) else None


def _step_record(
    r: object, step: int | None, outcome: dict, path: Path, options: dict
) -> LogRecord:
    """One generated-code record joined with its response, fields checked."""
    if not isinstance(r, dict):
        raise FieldError("record", "an object", r, "not_a_record")
    problem = lone_surrogate(r)
    if problem:
        raise FieldError("record", "valid Unicode text", problem)
    text_ = text(r.get("full_response"), "full_response") or ""
    try:
        parsed: Orchestration | ParseError = parse_harmony(text_)
    except ParseError as err:
        parsed = err
        code = text(r.get("extracted_code"), "extracted_code")
        if code:  # the orchestration survives as mas_code
            parsed = _first_parse(code, err)
    result = outcome.get(_join_key(r)) or {}
    problem = lone_surrogate(result)
    if problem:
        raise FieldError("response", "valid Unicode text", problem)
    return LogRecord(
        question=text(r.get("question"), "question", required=True),
        orchestration=parsed,
        orchestrator=options.get("orchestrator") or path.name,
        step=step,
        sample_index=integer(r.get("sample_index"), "sample_index"),
        raw=text_,
        domain=options.get("domain") or "",
        executed=bool(result),
        truth=_stripped(text(result.get("ground_truth"), "ground_truth", numbers=True)),
        answer=_stripped(text(result.get("execution_result"), "execution_result", numbers=True)),
        correct=boolean(result.get("answer_correct"), "answer_correct"),
        error=text(result.get("execution_error"), "execution_error"),
    )


def _orchrm(r: dict, path: Path, options: dict) -> list[LogRecord | Malformed]:
    if r.get("schema") != RUN_SCHEMA or "question" not in r:
        return [Malformed("not_run_record", f"not an {RUN_SCHEMA} record")]
    parsed = _run_orchestration(r)
    if isinstance(parsed, Malformed):
        return [parsed]
    execution = mapping(r.get("execution"), "execution")
    world = mapping(r.get("world"), "world")
    tokens = {
        name: integer(execution.get(name), f"execution.{name}", high=INT64_MAX)
        for name in ("prompt_tokens", "completion_tokens")
    }
    return [
        LogRecord(
            question=text(r["question"], "question", required=True),
            orchestration=parsed,
            orchestrator=text(r.get("orchestrator"), "orchestrator", required=True, numbers=True),
            task_id=text(r.get("task_id"), "task_id", numbers=True),
            truth=_stripped(text(r.get("ground_truth"), "ground_truth", numbers=True)),
            domain=text(r.get("domain"), "domain") or options.get("domain") or "",
            raw=text(r.get("raw"), "raw") or "",
            step=integer(r.get("step"), "step"),
            sample_index=integer(r.get("sample_index"), "sample_index"),
            logprob=number(r.get("orchestrator_logprob"), "orchestrator_logprob"),
            executed=bool(execution),
            answer=_stripped(text(r.get("answer"), "answer", numbers=True)),
            correct=boolean(r.get("correct"), "correct"),
            prompt_tokens=tokens["prompt_tokens"],
            completion_tokens=tokens["completion_tokens"],
            error=text(execution.get("error"), "execution.error"),
            p_success=number(world.get("p_success"), "world.p_success", low=0.0, high=1.0),
            execution_seed=integer(r.get("execution_seed"), "execution_seed", high=INT64_MAX),
        )
    ]


def _run_orchestration(r: dict) -> Orchestration | ParseError | str | Malformed:
    """A run record's orchestration: parsed JSON, the parse error it logged, or raw text."""
    if r.get("orchestration"):
        try:
            return from_dict(r["orchestration"])
        except ParseError as err:
            return Malformed("invalid_orchestration", f"orchestration: {err}")
    if r.get("parse_error"):
        e = mapping(r["parse_error"], "parse_error")
        return ParseError(
            text(e.get("reason"), "parse_error.reason") or "unknown",
            text(e.get("message"), "parse_error.message") or "",
            integer(e.get("offset"), "parse_error.offset", high=INT64_MAX),
        )
    return text(r.get("raw"), "raw") or ""


def _diagram(r: dict, path: Path, options: dict) -> list[LogRecord | Malformed]:
    question = text(r.get("question"), "question", required=True)
    thinking, code = text(r.get("thinking"), "thinking"), text(r.get("mas_code"), "mas_code")
    try:
        parsed: Orchestration | ParseError = parse_diagram_record(r)
    except ParseError as err:
        parsed = err
    output = r.get("execution_output")
    return [
        LogRecord(
            question=question.strip(),
            orchestration=parsed,
            orchestrator=Path(text(r.get("source"), "source") or path.name).stem,
            truth=_stripped(text(r.get("ground_truth"), "ground_truth", numbers=True)),
            domain=diagram_domain(text(r.get("source"), "source"), path, options),
            raw=thinking or code or "",
            step=integer(r.get("step"), "step"),
            sample_index=integer(r.get("row"), "row"),
            executed=output is not None,
            answer=_stripped(text(output, "execution_output", numbers=True)),
        )
    ]


def diagram_domain(source: str | None, path: Path, options: dict) -> str:
    """A diagram record's domain: the one its page's name (`source`) names, else
    `--domain`, else the one the file's name names, else MASBench's."""
    for name in (source, None, path.name):
        found = options.get("domain") if name is None else _named_domain(name)
        if found:
            return found
    return DIAGRAM_DEFAULT_DOMAIN


def _named_domain(name: str) -> str | None:
    """The domain a page or file name names (a word of it, in `DIAGRAM_DOMAINS`), or None."""
    for word in re.split(r"[^a-z0-9]+", name.lower()):
        for pattern, domain in DIAGRAM_DOMAINS:
            if pattern.fullmatch(word):
                return domain
    return None


def _preference(r: dict, path: Path, options: dict) -> list[LogRecord | Malformed]:
    ok = all(isinstance(r.get(k), str) for k in ("input", "chosen", "rejected", "source"))
    kind = PAIR_KINDS.get(r["source"].split(":")[0]) if ok else None
    if kind is None:
        return [
            Malformed(
                "not_preference",
                f"needs string input, chosen, rejected and a source in {sorted(PAIR_KINDS)}",
            )
        ]
    question = question_from_prompt(r["input"])
    return [
        LogRecord(
            question=question,
            orchestration=r[side],
            raw=r[side],
            orchestrator=f"{path.stem}:{side}",
            domain=options.get("domain") or "",
            pair=(kind, side),
        )
        for side in ("chosen", "rejected")
    ]


def _generic(r: dict, path: Path, options: dict) -> list[LogRecord | Malformed]:
    mapping_ = options["map"]
    values = {k: r.get(v) for k, v in mapping_.items()}
    missing = [k for k in ("question", "orchestration") if values.get(k) in (None, "")]
    if missing:
        return [
            Malformed(
                "missing_field",
                f"no {', '.join(missing)} (mapped from {[mapping_[m] for m in missing]})",
            )
        ]
    try:
        parsed: Orchestration | ParseError = parse_record(values["orchestration"])
    except ParseError as err:
        parsed = err
    raw = values["orchestration"]

    def field(name: str, read, **kw):
        return read(values.get(name), f"{name} (mapped from {mapping_.get(name)})", **kw)

    return [
        LogRecord(
            question=field("question", text, required=True),
            orchestration=parsed,
            orchestrator=field("orchestrator", text, numbers=True) or path.stem,
            task_id=field("task_id", text, numbers=True),
            truth=_stripped(field("truth", text, numbers=True)),
            domain=field("domain", text) or options.get("domain") or "",
            raw=raw if isinstance(raw, str) else json.dumps(raw),
            step=field("step", integer),
            sample_index=field("sample_index", integer),
            logprob=field("logprob", number),
            executed=values.get("answer") is not None or values.get("correct") is not None,
            answer=_stripped(field("answer", text, numbers=True)),
            correct=field("correct", boolean),
        )
    ]


def _per_record(convert):
    """A JSONL reader from a per-record converter: a line that is not an accepted JSON
    object, or a record with a field of the wrong type, becomes a Malformed naming why;
    blank lines come through as `BLANK`."""

    def read(path: Path, options: dict) -> Iterator[tuple[int, LogRecord | Malformed | object]]:
        for line, value in read_values(path):
            if value is BLANK:
                yield line, value
                continue
            if isinstance(value, BadLine):
                yield line, Malformed(value.reason, value.message)
                continue
            if not isinstance(value, dict):
                message = f"a record must be a JSON object, found {describe(value)}"
                yield line, Malformed("not_a_record", message)
                continue
            try:
                items = convert(value, path, options)
            except FieldError as err:
                items = [Malformed(err.reason, str(err))]
            for item in items:
                yield line, item

    return read


READERS = {
    "orchrm": _per_record(_orchrm),
    "diagram": _per_record(_diagram),
    "steps": _steps,
    "preference": _per_record(_preference),
    "generic": _per_record(_generic),
}
"""Adapter name -> reader: `reader(path, options)` yields `(line, item)` for every line
or record, where item is a `LogRecord`, a `Malformed`, or `BLANK` (a blank line)."""


def check_options(adapter: str, options: dict) -> None:
    """Raise FormatError when the adapter is unknown or its options are incomplete."""
    if adapter not in READERS:
        raise FormatError(f"unknown adapter {adapter!r}: choose from {', '.join(ADAPTERS)}")
    if adapter == "generic":
        columns = options.get("map") or {}
        for name in ("question", "orchestration"):
            if name not in columns:
                raise FormatError(f"generic ingest needs --map {name}=FIELD")
        unknown = sorted(set(columns) - set(GENERIC_FIELDS))
        if unknown:
            raise FormatError(f"unknown --map field(s) {unknown}: choose from {GENERIC_FIELDS}")
    problem = lone_surrogate(options)
    if problem:  # e.g. an argument whose bytes were not UTF-8
        raise FormatError(f"options: {problem}")


_MARKERS = ("task", "question", "problem")
_SPACES = re.compile(r"\s*")  # one greedy run, matched only where a run starts


def question_from_prompt(prompt: str) -> str:
    """The question inside an orchestrator prompt: the text after its last `Task:`,
    `Question:` or `Problem:` marker (any case) that starts a line, blank lines and
    spaces allowed before it and around its colon, else the whole prompt.

    A scan in linear time: each candidate is the first character or a newline; the
    whitespace run after it is measured once, and a failed candidate moves the scan past
    that run. Markers are matched left to right and the whitespace after a marker's
    colon belongs to it, so a marker right after another's colon is text, not a marker.
    """
    end, candidate = None, 0
    while candidate >= 0:
        start = _SPACES.match(prompt, candidate).end()
        after = _marker_end(prompt, start)
        resume = start if after is None else _SPACES.match(prompt, after).end()
        if after is not None:
            end = after
        candidate = prompt.find("\n", resume)
    return prompt[end:].strip() if end is not None else prompt.strip()


def _marker_end(prompt: str, at: int) -> int | None:
    """The index after the colon of a marker word starting at `at`, or None."""
    for word in _MARKERS:
        if prompt[at : at + len(word)].lower() == word:
            colon = _SPACES.match(prompt, at + len(word)).end()
            return colon + 1 if prompt.startswith(":", colon) else None
    return None


def _first_parse(code: str, fallback: ParseError) -> Orchestration | ParseError:
    try:
        return parse_mas_code(code)
    except ParseError:
        return fallback


def _stripped(value: str | None) -> str | None:
    return None if value is None else value.strip()

"""Log formats -> `LogRecord`s: one adapter per format, each naming what is malformed.

`orchrm` (orchrm's run and world logs), `diagram` (MAS-Orchestra diagram-browser
records), `steps` (MAS-Orchestra training-step folders: generated code joined with
responses), `preference` (OrchRM-datasets records), `generic` (any JSONL, with a field
mapping). An adapter yields `(line, LogRecord | Malformed)` for every input record.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from orchrm.jsonl import BadLine, jsonl_values, read_jsonl
from orchrm.orchestration import Orchestration
from orchrm.parse import (
    ParseError,
    from_dict,
    parse_diagram_record,
    parse_harmony,
    parse_mas_code,
    parse_record,
)
from orchrm.runtime.run import RUN_SCHEMA


class FormatError(Exception):
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
    pair: tuple[str, str] | None = None  # preference import: (kind, "chosen" | "rejected")


@dataclass(frozen=True)
class Malformed:
    """A record that is not what its format says: why, and what exactly."""

    reason: str
    message: str


# --------------------------------------------------------------------------- adapters


def detect_adapter(path: Path) -> str:
    """The adapter a file or folder needs, from its layout or its first record."""
    if path.is_dir():
        if (path / "generated_code").is_dir():
            return "steps"
        raise FormatError(f"{path}: a folder must hold generated_code/ (MAS-Orchestra steps)")
    try:
        first = next((r for _, r in read_jsonl(path)), None)
    except ValueError as err:
        raise FormatError(f"cannot detect the format of {path}: {err}") from None
    if isinstance(first, dict):
        if first.get("schema") == RUN_SCHEMA:
            return "orchrm"
        if "chosen" in first and "rejected" in first:
            return "preference"
        if "mas_code" in first or ("thinking" in first and "question" in first):
            return "diagram"
    raise FormatError(f"cannot detect the format of {path}: give --adapter (generic needs --map)")


def _steps(path: Path, options: dict) -> Iterator[tuple[int, LogRecord | Malformed]]:
    """Join generated_code/step_N_generated_code.json with
    responses_and_ground_truth/step_N_responses.json on (step, sample_index, question)."""
    line = 0
    for code_file in sorted(
        (path / "generated_code").glob("step_*_generated_code.json"),
        key=lambda p: _int(p.name.split("_")[1]) or 0,
    ):
        step = _int(code_file.name.split("_")[1])
        answers_file = path / "responses_and_ground_truth" / f"step_{step}_responses.json"
        try:
            generated = json.loads(code_file.read_text(encoding="utf-8"))
            responses = (
                json.loads(answers_file.read_text(encoding="utf-8"))
                if answers_file.exists()
                else []
            )
        except ValueError as err:
            line += 1
            yield line, Malformed("invalid_json", f"{code_file.name}: {err}")
            continue
        outcome = {
            (r.get("sample_index"), r.get("question")): r for r in responses if isinstance(r, dict)
        }
        for r in generated if isinstance(generated, list) else []:
            line += 1
            if not isinstance(r, dict) or not isinstance(r.get("question"), str):
                yield line, Malformed("missing_question", f"{code_file.name}: no question")
                continue
            text = r.get("full_response") or ""
            try:
                parsed: Orchestration | ParseError = parse_harmony(text)
            except ParseError as err:
                parsed = err
                if r.get("extracted_code"):  # the orchestration survives as mas_code
                    parsed = _first_parse(r["extracted_code"], err)
            result = outcome.get((r.get("sample_index"), r.get("question")))
            yield (
                line,
                LogRecord(
                    question=r["question"],
                    orchestration=parsed,
                    orchestrator=options.get("orchestrator") or path.name,
                    step=step,
                    sample_index=_int(r.get("sample_index")),
                    raw=text,
                    domain=options.get("domain") or "",
                    executed=result is not None,
                    truth=_text(result.get("ground_truth")) if result else None,
                    answer=_text(result.get("execution_result")) if result else None,
                    correct=result.get("answer_correct") if result else None,
                    error=result.get("execution_error") if result else None,
                ),
            )


def _orchrm(r: object, path: Path, options: dict) -> list[LogRecord | Malformed]:
    if not isinstance(r, dict) or r.get("schema") != RUN_SCHEMA or "question" not in r:
        return [Malformed("not_run_record", f"not an {RUN_SCHEMA} record")]
    if r.get("orchestration"):
        parsed: Orchestration | ParseError | str = from_dict(r["orchestration"])
    elif r.get("parse_error"):
        e = r["parse_error"]
        parsed = ParseError(e.get("reason", "unknown"), e.get("message", ""), e.get("offset"))
    else:
        parsed = r.get("raw") or ""
    execution = r.get("execution") or {}
    return [
        LogRecord(
            question=r["question"],
            orchestration=parsed,
            orchestrator=str(r["orchestrator"]),
            task_id=r.get("task_id"),
            truth=_text(r.get("ground_truth")),
            domain=r.get("domain") or "",
            raw=r.get("raw") or "",
            step=_int(r.get("step")),
            sample_index=_int(r.get("sample_index")),
            logprob=r.get("orchestrator_logprob"),
            executed=bool(execution),
            answer=_text(r.get("answer")),
            correct=r.get("correct"),
            prompt_tokens=execution.get("prompt_tokens"),
            completion_tokens=execution.get("completion_tokens"),
            error=execution.get("error"),
            p_success=(r.get("world") or {}).get("p_success"),
        )
    ]


def _diagram(r: object, path: Path, options: dict) -> list[LogRecord | Malformed]:
    if not isinstance(r, dict) or not isinstance(r.get("question"), str):
        return [Malformed("missing_question", "a diagram record needs a question")]
    try:
        parsed: Orchestration | ParseError = parse_diagram_record(r)
    except ParseError as err:
        parsed = err
    output = r.get("execution_output")
    return [
        LogRecord(
            question=r["question"].strip(),
            orchestration=parsed,
            orchestrator=Path(str(r.get("source") or path.name)).stem,
            truth=_text(r.get("ground_truth")),
            domain=options.get("domain") or "masbench",
            raw=r.get("thinking") or r.get("mas_code") or "",
            step=_int(r.get("step")),
            sample_index=_int(r.get("row")),
            executed=output is not None,
            answer=_text(output),
        )
    ]


def _preference(r: object, path: Path, options: dict) -> list[LogRecord | Malformed]:
    ok = isinstance(r, dict) and all(
        isinstance(r.get(k), str) for k in ("input", "chosen", "rejected")
    )
    kind = PAIR_KINDS.get(str(r.get("source", "")).split(":")[0]) if ok else None
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


def _generic(r: object, path: Path, options: dict) -> list[LogRecord | Malformed]:
    mapping = options["map"]
    if not isinstance(r, dict):
        return [Malformed("not_an_object", "a record must be a JSON object")]
    values = {k: r.get(v) for k, v in mapping.items()}
    missing = [k for k in ("question", "orchestration") if values.get(k) in (None, "")]
    if missing or not isinstance(values["question"], str):
        names = missing or ["question"]
        return [
            Malformed(
                "missing_field",
                f"no {', '.join(names)} (mapped from {[mapping[m] for m in names]})",
            )
        ]
    try:
        parsed: Orchestration | ParseError = parse_record(values["orchestration"])
    except ParseError as err:
        parsed = err
    raw = values["orchestration"]
    return [
        LogRecord(
            question=values["question"],
            orchestration=parsed,
            orchestrator=str(values.get("orchestrator") or path.stem),
            task_id=_text(values.get("task_id")),
            truth=_text(values.get("truth")),
            domain=str(values.get("domain") or options.get("domain") or ""),
            raw=raw if isinstance(raw, str) else json.dumps(raw),
            step=_int(values.get("step")),
            sample_index=_int(values.get("sample_index")),
            logprob=values.get("logprob"),
            executed=values.get("answer") is not None or values.get("correct") is not None,
            answer=_text(values.get("answer")),
            correct=None if values.get("correct") is None else bool(values["correct"]),
        )
    ]


def _per_record(convert):
    """A JSONL reader from a per-record converter: a line that is not JSON, or a record
    the converter chokes on, becomes a Malformed naming why."""

    def read(path: Path, options: dict) -> Iterator[tuple[int, LogRecord | Malformed]]:
        with open(path, encoding="utf-8") as f:
            for line, record in jsonl_values(f):
                if isinstance(record, BadLine):
                    yield line, Malformed("invalid_json", record.message)
                    continue
                try:
                    items = convert(record, path, options)
                except (ParseError, KeyError, TypeError, ValueError, AttributeError) as err:
                    items = [Malformed("bad_record", f"{type(err).__name__}: {err}")]
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


def check_options(adapter: str, options: dict) -> None:
    """Raise FormatError when the adapter is unknown or its options are incomplete."""
    if adapter not in READERS:
        raise FormatError(f"unknown adapter {adapter!r}: choose from {', '.join(ADAPTERS)}")
    if adapter == "generic":
        mapping = options.get("map") or {}
        for name in ("question", "orchestration"):
            if name not in mapping:
                raise FormatError(f"generic ingest needs --map {name}=FIELD")
        unknown = sorted(set(mapping) - set(GENERIC_FIELDS))
        if unknown:
            raise FormatError(f"unknown --map field(s) {unknown}: choose from {GENERIC_FIELDS}")


_QUESTION_MARKERS = re.compile(r"(?:^|\n)\s*(?:Task|Question|Problem)\s*:\s*", re.IGNORECASE)


def question_from_prompt(prompt: str) -> str:
    """The question inside an orchestrator prompt: the text after its last `Task:`,
    `Question:` or `Problem:` marker, else the whole prompt."""
    found = list(_QUESTION_MARKERS.finditer(prompt))
    return prompt[found[-1].end() :].strip() if found else prompt.strip()


def _first_parse(code: str, fallback: ParseError) -> Orchestration | ParseError:
    try:
        return parse_mas_code(code)
    except ParseError:
        return fallback


def _int(value) -> int | None:
    try:
        return int(value) if value is not None and str(value).strip() != "" else None
    except (TypeError, ValueError):
        return None


def _text(value) -> str | None:
    return None if value is None else str(value).strip()

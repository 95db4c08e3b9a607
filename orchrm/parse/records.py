"""JSON forms, log records and files -> `Orchestration`.

orchrm's own JSON (`from_dict`, lossless), the JSON graph form (`parse_json_graph`),
whole log records of any supported kind (`parse_record`), the file reader that turns
every line of a file into a record or a counted `ParseError` (`read_records`, through
`orchrm.jsonl`, so a bad line fails only itself), and what `orchrm score` reads of each
record (`score_inputs`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from orchrm.jsonl import (
    BLANK,
    BadLine,
    FileSummary,
    lone_surrogate,
    printable,
    read_document,
    read_text,
    read_values,
)
from orchrm.orchestration import ORCHRM_JSON_FORMAT, Agent, DoM, Edge, Orchestration, validate
from orchrm.parse.error import ParseError
from orchrm.parse.harmony import extract_thinking, parse_harmony, parse_roles
from orchrm.parse.mas_code import parse_mas_code


def from_dict(data: object) -> Orchestration:
    """Read orchrm's own JSON form (`Orchestration.to_dict`), checking every field."""
    obj = _require(data, dict, "orchestration")
    if obj.get("format") != ORCHRM_JSON_FORMAT:
        raise ParseError(
            "bad_json",
            f"format is {obj.get('format')!r}, expected {ORCHRM_JSON_FORMAT!r}",
            None,
            "orchrm-json",
        )
    try:
        dom = DoM(obj.get("dom"))
    except ValueError:
        raise ParseError(
            "bad_json", f"dom is {obj.get('dom')!r}, expected 'low' or 'high'", None, "orchrm-json"
        ) from None
    agents = []
    for n, item in enumerate(_require(obj.get("agents", []), list, "agents")):
        a = _require(item, dict, f"agents[{n}]")
        roles = a.get("debate_roles")
        if roles is not None:
            roles = tuple(_strings(roles, f"agents[{n}].debate_roles"))
        output_id = a.get("output_id")
        agents.append(
            Agent(
                id=_require(a.get("id"), str, f"agents[{n}].id"),
                type=_require(a.get("type"), str, f"agents[{n}].type"),
                description=_require(a.get("description", ""), str, f"agents[{n}].description"),
                input=_require(a.get("input", ""), str, f"agents[{n}].input"),
                debate_roles=roles,
                output_id=None
                if output_id is None
                else _require(output_id, str, f"agents[{n}].output_id"),
            )
        )
    edges = [
        Edge(*_strings(e, f"edges[{n}]", length=2))
        for n, e in enumerate(_require(obj.get("edges", []), list, "edges"))
    ]
    answer = obj.get("answer")
    return Orchestration(
        agents=tuple(agents),
        edges=tuple(edges),
        dom=dom,
        thinking=_require(obj.get("thinking", ""), str, "thinking"),
        answer=None if answer is None else _require(answer, str, "answer"),
    )


def parse_json_graph(data: object) -> Orchestration:
    """Read the JSON graph form: agents with id/type/description/input/depends_on,
    optional explicit `edges` (`{"from", "to"}` objects or pairs), `answer_agent`."""
    obj = _require(data, dict, "graph")
    agents: list[Agent] = []
    edges: list[Edge] = []
    for n, item in enumerate(_require(obj.get("agents"), list, "agents")):
        a = _require(item, dict, f"agents[{n}]")
        agent_id = _require(a.get("id"), str, f"agents[{n}].id").strip()
        roles = a.get("debate_roles")
        if isinstance(roles, str):
            roles = parse_roles(roles)
        elif roles is not None:
            roles = tuple(r.strip() for r in _strings(roles, f"agents[{n}].debate_roles"))
        agents.append(
            Agent(
                id=agent_id,
                type=_require(a.get("type", a.get("agent_name")), str, f"agents[{n}].type").strip(),
                description=_require(a.get("description", ""), str, f"agents[{n}].description"),
                input=_require(a.get("input", ""), str, f"agents[{n}].input"),
                debate_roles=roles,
            )
        )
        for dep in _strings(a.get("depends_on", []), f"agents[{n}].depends_on"):
            edges.append(Edge(dep.strip(), agent_id))
    for n, e in enumerate(_require(obj.get("edges", []), list, "edges")):
        if isinstance(e, dict):
            pair = [
                _require(e.get("from"), str, f"edges[{n}].from"),
                _require(e.get("to"), str, f"edges[{n}].to"),
            ]
        else:
            pair = _strings(e, f"edges[{n}]", length=2)
        edge = Edge(pair[0].strip(), pair[1].strip())
        if edge not in edges:
            edges.append(edge)
    answer = obj.get("answer_agent")
    return Orchestration(
        agents=tuple(agents),
        edges=tuple(edges),
        dom=DoM.HIGH,
        thinking=_require(obj.get("thinking", ""), str, "thinking"),
        answer=None if answer is None else _require(answer, str, "answer_agent").strip(),
    )


def _require(value, kind: type, where: str):
    if not isinstance(value, kind):
        raise ParseError(
            "bad_json", f"{where} is {type(value).__name__}, expected {kind.__name__}", None, "json"
        )
    return value


def _strings(value, where: str, length: int | None = None) -> list[str]:
    items = _require(value, list, where)
    if not all(isinstance(x, str) for x in items) or (length and len(items) != length):
        shape = f"{length} strings" if length else "strings"
        raise ParseError("bad_json", f"{where} must be a list of {shape}", None, "json")
    return items


# --------------------------------------------------------------------------- log records

TEXT_FIELDS = ("full_response", "response", "output", "completion", "text", "raw")
"""Record fields that may hold an orchestrator's raw harmony output, in lookup order."""


def parse_record(record: object) -> Orchestration:
    """An orchestration from one log record, whatever its form.

    orchrm JSON (`format` field), a JSON graph (`agents`), a MAS-Orchestra
    diagram-browser record (`thinking` and `mas_code`), or any record whose
    `orchestration` or one of `TEXT_FIELDS` holds harmony text. A bare string is read as
    harmony text. A null `orchestration` (a log that could not parse the output) is read
    from the raw text beside it, so the error says what is wrong with that text.
    """
    if isinstance(record, str):
        return parse_harmony(record)
    if not isinstance(record, dict):
        raise ParseError(
            "not_a_record",
            f"a record must be an object, got {type(record).__name__}",
            None,
            "record",
        )
    if record.get("format") == ORCHRM_JSON_FORMAT:
        return from_dict(record)
    raw = next((n for n in TEXT_FIELDS if isinstance(record.get(n), str)), None)
    if "orchestration" in record and not (record["orchestration"] is None and raw):
        return _in_field(record, "orchestration", parse_record)
    if "agents" in record:
        return parse_json_graph(record)
    if "mas_code" in record or "thinking" in record:
        return parse_diagram_record(record)
    if raw is not None:  # a log whose parsed orchestration is null: read what was written
        return _in_field(record, raw, parse_harmony)
    expected = ", ".join(("orchestration", "agents", "mas_code/thinking", *TEXT_FIELDS))
    raise ParseError(
        "unknown_record",
        f"no field holds an orchestration (expected one of {expected})",
        None,
        "record",
    )


def parse_diagram_record(record: dict) -> Orchestration:
    """A MAS-Orchestra diagram-browser record: the harmony XML in `thinking` when it is
    complete, else the agents of `mas_code` with the thinking channel of `thinking`.

    On the published pages `thinking` is often cut after the `<thinking>` channel, so
    `mas_code` is where the agents survive; when both fail the error names both.
    """
    thinking_text = record.get("thinking") if isinstance(record.get("thinking"), str) else ""
    code = record.get("mas_code") or ""
    try:
        return _in_field(record, "thinking", parse_harmony)
    except ParseError as thinking_error:
        if not (isinstance(code, str) and code.strip()):
            raise ParseError(
                thinking_error.reason,
                thinking_error.message + "; mas_code is empty",
                thinking_error.offset,
                "thinking",
            ) from None
        parsed = _in_field(record, "mas_code", parse_mas_code)
        return replace(parsed, thinking=extract_thinking(thinking_text))


def _in_field(record: dict, name: str, parser) -> Orchestration:
    """Run `parser` on `record[name]`, naming the field in any ParseError."""
    try:
        return parser(record.get(name))
    except ParseError as err:
        raise ParseError(err.reason, err.message, err.offset, name) from None


# --------------------------------------------------------------------------- files


def read_records(path: str | Path) -> Iterator[tuple[int, object]]:
    """(line number, record) for each record of a file; a record that cannot be read is
    yielded as a `ParseError` in its place (reason one of `orchrm.jsonl.LINE_REASONS`),
    so callers count it instead of losing it. Raises OSError only when the file cannot
    be read at all.

    `.jsonl`: one JSON value per non-blank line. `.json`: a list of records or one record
    (line 1). Anything else: the whole file is one harmony text (line 1).
    """
    for line_no, _, item in _read_items(Path(path)):
        if item is not BLANK:
            yield line_no, item


def _read_items(path: Path) -> Iterator[tuple[int, int | None, object]]:
    """`read_records` with each record's index in a `.json` list (None elsewhere: a
    list's records all start on line 1 of a compact file, so the index is what tells
    them apart), and `BLANK` for each blank line of a `.jsonl` file."""
    if path.suffix == ".jsonl":
        for line_no, value in read_values(path):
            yield line_no, None, _as_error(value, "line") if isinstance(value, BadLine) else value
    elif path.suffix == ".json":
        data = read_document(path)
        if isinstance(data, BadLine):
            yield 1, None, _as_error(data, "file")
            return
        listed = isinstance(data, list)
        for index, item in enumerate(data if listed else [data]):
            problem = lone_surrogate(item)  # the file-level check stops at the first
            error = ParseError("bad_field", problem, None, "file") if problem else None
            yield 1, index if listed else None, error or item
    else:
        content = read_text(path)
        yield 1, None, _as_error(content, "file") if isinstance(content, BadLine) else content


def location(path: str, line: int, index: int | None = None) -> str:
    """Where a record is, as problems name it: `FILE:LINE`, or `FILE[INDEX]` for a record
    of a `.json` list."""
    return f"{path}[{index}]" if index is not None else f"{path}:{line}"


def _as_error(bad: BadLine, source: str) -> ParseError:
    return ParseError(bad.reason, bad.message, bad.position, source)


@dataclass(kw_only=True)
class ParseSummary(FileSummary):
    """What `summarize_file` found in one file: every record is counted exactly once,
    as valid, parsed but invalid, or unparseable; `problems` says where and why."""

    valid: int = 0
    invalid: int = 0
    unparseable: int = 0
    invalid_by_rule: Counter = field(default_factory=Counter)
    unparseable_by_reason: Counter = field(default_factory=Counter)

    @classmethod
    def total(cls, summaries: list[ParseSummary]) -> ParseSummary:
        """Every count of several files added up, under the path `total` (problems stay
        with their files)."""
        total = cls(path="total")
        for f in fields(cls):
            if f.name not in ("path", "problems"):
                start = getattr(total, f.name)
                setattr(total, f.name, sum((getattr(s, f.name) for s in summaries), start))
        return total


def summarize_file(path: str | Path) -> ParseSummary:
    """Parse and validate every record of a file (see `read_records`) and count the
    outcomes. A record that breaks several rules counts once as invalid and once under
    each rule it breaks. Raises OSError only when the file cannot be read."""
    summary = ParseSummary(path=printable(path))
    for line_no, index, record in _read_items(Path(path)):
        at = {"line": line_no} if index is None else {"line": line_no, "index": index}
        if record is BLANK:
            summary.blank_lines += 1
            continue
        summary.records += 1
        try:
            if isinstance(record, ParseError):
                raise record
            violations = validate(parse_record(record))
        except ParseError as err:
            summary.unparseable += 1
            summary.unparseable_by_reason[err.reason] += 1
            summary.problems.append(
                {**at, "kind": "unparseable", "code": err.reason, "message": err.detail}
            )
            continue
        if not violations:
            summary.valid += 1
            continue
        summary.invalid += 1
        for rule in dict.fromkeys(v.rule.value for v in violations):
            summary.invalid_by_rule[rule] += 1
        summary.problems.append(
            {
                **at,
                "kind": "invalid",
                "code": ",".join(dict.fromkeys(v.rule.value for v in violations)),
                "message": "; ".join(v.message for v in violations),
            }
        )
    return summary


# --------------------------------------------------------------------------- scoring


@dataclass(frozen=True)
class ScoreInput:
    """One record of a file as `orchrm score` reads it: the question and orchestration
    to score, or the reason (a `ParseError` code) it cannot be scored."""

    line: int
    task_id: str | int | None
    question: str | None = None
    orchestration: Orchestration | None = None
    reason: str | None = None
    message: str = ""
    """Why it cannot be scored, without the reason code."""
    index: int | None = None
    """The record's index in a `.json` list (None for other files)."""


def score_inputs(path: str | Path, question: str | None = None) -> Iterator[ScoreInput]:
    """A `ScoreInput` for every record of a file (see `read_records`): a record needs an
    orchestration `parse_record` reads and a text `question`, its own or, for a record
    that has none (a harmony text file, a record without the field), `question` (in
    that order: the first missing one is the reason). Raises OSError only when the file
    cannot be read."""
    for line, index, record in _read_items(Path(path)):
        if record is BLANK:
            continue
        task_id = record.get("task_id") if isinstance(record, dict) else None
        if isinstance(task_id, bool) or not isinstance(task_id, str | int):
            task_id = None
        try:
            if isinstance(record, ParseError):
                raise record
            orchestration = parse_record(record)
            own = record.get("question") if isinstance(record, dict) else None
            if own is not None and not isinstance(own, str):
                kind = type(own).__name__
                raise ParseError("bad_field", f"question: expected text, found {kind}")
            if own is None and question is None:
                raise _no_question(record)
            text = own if own is not None else question
            yield ScoreInput(line, task_id, text, orchestration, index=index)
        except ParseError as err:
            yield ScoreInput(line, task_id, reason=err.reason, message=err.detail, index=index)


def _no_question(record: object) -> ParseError:
    """`no_question`, saying what lacks one: a record's field or a harmony text."""
    if isinstance(record, dict):
        return ParseError("no_question", 'the record has no "question" field to score with')
    return ParseError("no_question", "a harmony text holds no question to score with")

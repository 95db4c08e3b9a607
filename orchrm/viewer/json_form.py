"""`view.json`: an evaluation's tasks as `orchrm view` shows them (candidates with their
orchestrations, answers, correctness, true success probabilities, reward-model scores,
each selector's pick, and the plans a selector made in their place with the edits that
made them), written beside the report so the page can be rebuilt from the
report folder alone. Reading checks every field and names the one that is wrong."""

from __future__ import annotations

import json
from pathlib import Path

from orchrm.errors import InputError, MissingInput
from orchrm.parse import ParseError, from_dict
from orchrm.selection.selectors import Candidate, CandidateSet
from orchrm.viewer.task import VIEW_FORMAT, VIEW_JSON, EditedPick, ViewTask


def view_json(views: list[ViewTask]) -> dict:
    """The JSON document of `views` (`read_view_json` reads it back)."""
    return {
        "format": VIEW_FORMAT,
        "tasks": [
            {
                "task_id": v.task.task_id,
                "question": v.task.question,
                "domain": v.task.domain,
                "ground_truth": v.ground_truth,
                "picks": v.picks,
                "candidates": [_candidate(v, i, c) for i, c in enumerate(v.task.candidates)],
                "edited": {name: _edited(e) for name, e in v.edited.items()},
            }
            for v in views
        ],
    }


def _candidate(v: ViewTask, i: int, c: Candidate) -> dict:
    return {
        "label": v.label(i),
        "orchestration": c.orchestration.to_dict() if c.orchestration else None,
        "problem": v.problem(i),
        "answer": c.answer,
        "correct": c.correct,
        "p_success": c.p_success,
        "logprob": c.logprob,
        "execution_tokens": c.execution_tokens,
        "score": v.score(i),
    }


def _edited(e: EditedPick) -> dict:
    c = e.plan
    return {
        "from": e.source,
        "edits": list(e.edits),
        "score": e.score,
        "orchestration": c.orchestration.to_dict() if c.orchestration else None,
        "answer": c.answer,
        "correct": c.correct,
        "p_success": c.p_success,
        "execution_tokens": c.execution_tokens,
    }


def view_json_of(path: str | Path) -> Path:
    """The view document of a report folder (its view.json) or a .json file itself."""
    path = Path(path)
    if path.is_dir():
        if (path / VIEW_JSON).is_file():
            return path / VIEW_JSON
        what = "an evaluation report" if (path / "report.json").is_file() else "a folder"
        raise InputError(
            f"{path}: {what} without {VIEW_JSON} (per-task picks); view the logs or the "
            "store it was evaluated on instead"
        )
    if not path.is_file():
        raise MissingInput(f"{path}: no such file")
    return path


def _document(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"{path}: not JSON ({err})") from None
    if isinstance(data, dict) and data.get("format") == VIEW_FORMAT:
        return data
    if isinstance(data, dict) and "evaluations" in data:
        if isinstance(data.get("view"), dict):
            return _document_in(data["view"], path)
        if (path.parent / VIEW_JSON).is_file() and path.name != VIEW_JSON:
            return _document(path.parent / VIEW_JSON)
        raise InputError(
            f"{path}: an evaluation report without per-task picks (no {VIEW_JSON} beside "
            "it); view the logs or the store it was evaluated on instead"
        )
    raise InputError(f"{path}: neither a {VIEW_FORMAT} document nor an evaluation report")


def _document_in(data: dict, path: Path) -> dict:
    if data.get("format") != VIEW_FORMAT:
        raise InputError(f"{path}: view: format is {data.get('format')!r}, expected {VIEW_FORMAT}")
    return data


def _field(obj: dict, key: str, kind, where: str, default=None):
    """`obj[key]` when it is None or of `kind` (a bool is no number); else InputError."""
    value = obj.get(key, default)
    if value is None:
        return None
    if kind is bool:
        ok = isinstance(value, bool)
    else:
        ok = isinstance(value, kind) and not isinstance(value, bool)
    if not ok:
        raise InputError(f"{where}.{key} is {type(value).__name__}, expected {_NAMES[kind]}")
    return value


_NUMBER = (int, float)
_NAMES = {
    str: "a string",
    bool: "true or false",
    _NUMBER: "a number",
    list: "a list",
    dict: "an object",
}


def _read_candidate(c: object, where: str) -> tuple[Candidate, str, str | None, float | None]:
    if not isinstance(c, dict):
        raise InputError(f"{where} is {type(c).__name__}, expected an object")
    orchestration = None
    if c.get("orchestration") is not None:
        try:
            orchestration = from_dict(c["orchestration"])
        except ParseError as err:
            raise InputError(f"{where}.orchestration: {err}") from None
    candidate = Candidate(
        orchestration=orchestration,
        answer=_field(c, "answer", str, where),
        correct=bool(_field(c, "correct", bool, where, False)),
        execution_tokens=int(_field(c, "execution_tokens", _NUMBER, where, 0) or 0),
        logprob=_field(c, "logprob", _NUMBER, where),
        p_success=_field(c, "p_success", _NUMBER, where),
    )
    label = _field(c, "label", str, where) or ""
    return candidate, label, _field(c, "problem", str, where), _field(c, "score", _NUMBER, where)


def _read_task(t: object, where: str, n: int | None) -> ViewTask:
    if not isinstance(t, dict):
        raise InputError(f"{where} is {type(t).__name__}, expected an object")
    items = _field(t, "candidates", list, where, [])
    made = [_read_candidate(c, f"{where}.candidates[{i}]") for i, c in enumerate(items)][:n]
    picks = _field(t, "picks", dict, where, {})
    kept = {}
    for name, index in picks.items():
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(items):
            raise InputError(f"{where}.picks.{name} is {index!r}, not a candidate's index")
        if n is None or index < n:  # a pick among candidates cut by n is no pick
            kept[name] = index
    edited = {}
    for name, e in _field(t, "edited", dict, where, {}).items():
        at = f"{where}.edited.{name}"
        candidate, _, _, score = _read_candidate(e, at)
        source = e.get("from")
        if not isinstance(source, int) or isinstance(source, bool) or not 0 <= source < len(items):
            raise InputError(f"{at}.from is {source!r}, not a candidate's index")
        if candidate.orchestration is None:
            raise InputError(f"{at}.orchestration is missing: an edited plan has one")
        steps = _field(e, "edits", list, at, [])
        if not all(isinstance(x, str) for x in steps):
            raise InputError(f"{at}.edits holds something other than strings")
        if n is None or source < n:  # the plan of a candidate cut by n is left out too
            edited[name] = EditedPick(candidate, source, tuple(steps), score)
    task = CandidateSet(
        str(_field(t, "task_id", str, where, "?")),
        str(_field(t, "question", str, where, "")),
        tuple(c for c, _, _, _ in made),
        str(_field(t, "domain", str, where, "") or ""),
    )
    scores = tuple(s for _, _, _, s in made)
    return ViewTask(
        task,
        ground_truth=_field(t, "ground_truth", str, where),
        labels=tuple(label for _, label, _, _ in made),
        problems=tuple(p for _, _, p, _ in made),
        scores=scores if any(s is not None for s in scores) else (),
        picks=kept,
        edited=edited,
    )


def read_view_json(path: str | Path, n: int | None = None) -> list[ViewTask]:
    """The tasks of a view.json (or of a report.json that holds or sits beside one),
    each with its first `n` candidates; raises InputError naming a bad field."""
    path = Path(path)
    data = _document(path)
    tasks = data.get("tasks")
    if not isinstance(tasks, list):
        raise InputError(f"{path}: tasks is {type(tasks).__name__}, expected a list")
    return [_read_task(t, f"{path}: tasks[{i}]", n) for i, t in enumerate(tasks)]

"""`orchrm view`: one self-contained HTML page to look at orchestrations task by task.

Sources: `orchrm.run/1` logs (`.jsonl`; world logs carry the true success probability),
a store (`.duckdb`, opened read-only), or an evaluation's report folder or its
`view.json` (`write_evaluation_view` writes it beside the report, with every selector's
pick per task). For logs and stores the page runs the selectors that need nothing but
the logs (majority, random, logp, oracle, and bayes on world logs) and, given a reward
model, orchrm and orchrm-weighted; their picks and the model's scores are on the page.

- `read_sources`: the tasks of the given files, with what could not be read;
- `selections`: every selector's choice on every task (the report keeps only means); a
  plan a selector made in their place (`orchrm-search`'s edit) is drawn beside the
  candidate it came from;
- `build_view` / `write_view`: the page; `write_evaluation_view`: the page and its
  `view.json` from an evaluation's tasks and line-up.

The page itself (HTML, CSS, JS) is `view_html`; the graphs are `view_graph`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from orchrm.errors import InputError, MissingInput
from orchrm.parse import ParseError, parse_record, read_records
from orchrm.selection.selectors import Candidate, CandidateSet, Selection, Selector, first_max
from orchrm.viewer.task import VIEW_HTML, VIEW_JSON, EditedPick, ViewTask


@dataclass
class Sources:
    """What `read_sources` found: tasks, and each thing it could not read."""

    tasks: list[ViewTask] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    """The files read, as given."""


def _run_candidate(r: dict, where: str) -> tuple[Candidate, str | None]:
    """A log record's candidate and, when it has no orchestration, why."""
    problem = None
    orchestration = None
    if isinstance(r.get("orchestration"), dict):
        try:
            orchestration = parse_record(r["orchestration"])
        except ParseError as err:
            problem = f"{where}: {err}"
    else:
        problem = str(r.get("parse_error") or "no orchestration in the record")
    execution = r.get("execution") if isinstance(r.get("execution"), dict) else {}
    calls = execution.get("calls") if isinstance(execution.get("calls"), list) else []
    trajectory = "\n".join(
        f"[{c.get('agent_id')}/{c.get('step')}] {c.get('completion')}"
        for c in calls
        if isinstance(c, dict)
    )
    world = r.get("world") if isinstance(r.get("world"), dict) else {}
    return (
        Candidate(
            orchestration=orchestration,
            answer=None if r.get("answer") is None else str(r.get("answer")),
            correct=r.get("correct") is True,
            execution_tokens=_int(execution.get("total_tokens")),
            logprob=_number(r.get("orchestrator_logprob")),
            p_success=_number(world.get("p_success")),
            trajectory=trajectory,
        ),
        problem,
    )


def _number(value: object) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else None


def _int(value: object) -> int:
    number = _number(value)
    return int(number) if number is not None else 0


def read_logs(
    paths: list[str | Path], orchestrator: str | None = None, n: int | None = None
) -> Sources:
    """The tasks of `orchrm.run/1` logs, grouped by task id across files, candidates in
    sample order (one orchestrator's when given; the first `n` of each task). A line that
    is not a run record is counted in `problems` and skipped."""
    found = Sources(names=[str(p) for p in paths])
    groups: dict[str, list[tuple[int, dict, str]]] = {}
    for path in paths:
        for line_no, r in read_records(path):
            where = f"{path}:{line_no}"
            if isinstance(r, ParseError):
                found.problems.append(f"{where}: {r}")
                continue
            if not (
                isinstance(r, dict)
                and isinstance(r.get("task_id"), str)
                and isinstance(r.get("question"), str)
            ):
                found.problems.append(f"{where}: not an orchrm.run/1 record (task_id, question)")
                continue
            if orchestrator and r.get("orchestrator") != orchestrator:
                continue
            index = _int(r.get("sample_index"))
            groups.setdefault(r["task_id"], []).append((index, r, where))
    for task_id, members in groups.items():
        members.sort(key=lambda m: m[0])
        members = members[:n] if n else members
        made = [_run_candidate(r, where) for _, r, where in members]
        first = members[0][1]
        domain = first.get("domain") if isinstance(first.get("domain"), str) else ""
        truth = first.get("ground_truth")
        found.tasks.append(
            ViewTask(
                CandidateSet(task_id, first["question"], tuple(c for c, _ in made), domain),
                ground_truth=None if truth is None else str(truth),
                labels=tuple(f"{r.get('orchestrator') or '?'} #{i}" for i, r, _ in members),
                problems=tuple(p for _, p in made),
            )
        )
    return found


def read_store(path: str | Path, orchestrator: str | None = None, n: int | None = None) -> Sources:
    """The tasks of a store, opened read-only, with each candidate's orchestrator and
    sample, parse error and the task's reference answer."""
    from orchrm.evaluation.loading import tasks_from_store
    from orchrm.store.db import Store

    with Store(path, read_only=True) as db:
        tasks = tasks_from_store(db, orchestrator, n)
        truth = dict(db.db.execute("SELECT task_id, answer FROM tasks").fetchall())
        rows = db.db.execute(
            "SELECT orch_id, orchestrator, sample_index, parse_reason, parse_message "
            "FROM orchestrations"
        ).fetchall()
    about = {r[0]: r[1:] for r in rows}
    found = Sources(names=[str(path)])
    for t in tasks:
        info = [about.get(c.orch_id, ("?", None, None, None)) for c in t.candidates]
        found.tasks.append(
            ViewTask(
                t,
                ground_truth=truth.get(t.task_id),
                labels=tuple(f"{who} #{'?' if i is None else i}" for who, i, _, _ in info),
                problems=tuple(
                    None if c.orchestration else f"{reason or 'unparseable'}: {message or ''}"
                    for c, (_, _, reason, message) in zip(t.candidates, info, strict=True)
                ),
            )
        )
    return found


def selections(
    tasks: list[CandidateSet], selectors: dict[str, Selector]
) -> list[dict[str, Selection]]:
    """What every selector chose on every task among all its candidates, in task order
    (a model scores every plan at once first, where it can)."""
    for select in selectors.values():
        if hasattr(select, "warm"):
            select.warm(tasks)
    return [{name: select(t) for name, select in selectors.items()} for t in tasks]


def _with_selections(view: ViewTask, chosen: dict[str, Selection]) -> ViewTask:
    orchrm = chosen.get("orchrm")
    scores = tuple(orchrm.scores) if orchrm and orchrm.scores else view.scores
    picks = {**view.picks, **{name: s.index for name, s in chosen.items()}}
    edited = {
        **view.edited,
        **{
            name: EditedPick(s.plan, s.index, s.edits, s.plan_score)
            for name, s in chosen.items()
            if s.plan is not None
        },
    }
    return replace(view, scores=scores, picks=picks, edited=edited)


def pick_all(tasks: list[ViewTask], rm=None) -> list[ViewTask]:
    """`tasks` with the picks of the selectors that run on logs alone (and, with `rm`,
    a `Scorer`, orchrm's and orchrm-weighted's, with the model's scores). Tasks that
    carry picks (from a view.json) keep them; with `rm` they are scored again and get
    the model's orchrm pick."""
    from orchrm.selection.registry import LineupInputs, line_up

    todo = [v for v in tasks if not v.picks]
    world = any(c.p_success is not None for v in todo for c in v.task.candidates)
    chosen = selections([v.task for v in todo], line_up(LineupInputs(rm=rm, world=world)))
    done = dict(zip(map(id, todo), chosen, strict=True))
    out = []
    for view in tasks:
        if id(view) in done:
            view = _with_selections(view, done[id(view)])
        elif rm is not None:
            view = _rescored(view, rm)
        out.append(view)
    return out


def _rescored(view: ViewTask, rm) -> ViewTask:
    where = [i for i, c in enumerate(view.task.candidates) if c.orchestration is not None]
    items = [(view.task.question, view.task.candidates[i].orchestration) for i in where]
    scores: list[float | None] = [None] * len(view.task.candidates)
    for i, result in zip(where, rm.score(items) if items else [], strict=True):
        scores[i] = result.score
    return replace(view, scores=tuple(scores), picks={**view.picks, "orchrm": first_max(scores)})


def read_sources(
    paths: list[str | Path], orchestrator: str | None = None, n: int | None = None
) -> Sources:
    """Every task of the given logs (`.jsonl`), stores (`.duckdb`), report folders and
    `view.json` / `report.json` files; raises InputError for a file of another kind or
    one that does not exist."""
    from orchrm.viewer.json_form import read_view_json, view_json_of

    found = Sources(names=[str(p) for p in paths])
    logs = []
    for path in map(Path, paths):
        if path.is_dir() or path.suffix == ".json":
            found.tasks += read_view_json(view_json_of(path), n)
        elif path.suffix == ".duckdb":
            found.tasks += read_store(path, orchestrator, n).tasks
        elif path.suffix == ".jsonl":
            if not path.is_file():
                raise MissingInput(f"{path}: no such log file")
            logs.append(path)
        else:
            raise InputError(
                f"{path}: not a log (.jsonl), a store (.duckdb), a report folder or a .json"
            )
    if logs:
        from_logs = read_logs(logs, orchestrator, n)
        found.tasks += from_logs.tasks
        found.problems += from_logs.problems
    return found


def build_view(
    sources: list[str | Path],
    rm=None,
    *,
    orchestrator: str | None = None,
    n: int | None = None,
    max_tasks: int | None = None,
    title: str | None = None,
) -> str:
    """The page for `sources` (see `read_sources`): `rm` is a reward model directory or
    a `Scorer` whose scores and picks join the page; `n` keeps each task's first `n`
    candidates, `max_tasks` the first tasks. Raises InputError when no task is found."""
    from orchrm.viewer.html import render_page

    if isinstance(rm, str | Path):
        from orchrm.scoring.load import load_scorer

        rm = load_scorer(rm)
    found = read_sources(list(sources), orchestrator, n)
    if not found.tasks:
        whose = f" from {orchestrator}" if orchestrator else ""
        raise InputError(f"no task{whose} in {', '.join(found.names)}")
    total = len(found.tasks)
    tasks = pick_all(found.tasks[:max_tasks] if max_tasks else found.tasks, rm)
    return render_page(
        tasks,
        title=title or "orchrm view: " + ", ".join(Path(s).name for s in sources),
        problems=found.problems,
        left_out=total - len(tasks),
    )


def write_view(out: str | Path, sources: list[str | Path], rm=None, **options) -> Path:
    """`build_view` written to `out` (its folder made); returns `out`."""
    page = build_view(sources, rm, **options)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out


def write_evaluation_view(
    out: str | Path,
    tasks: list[CandidateSet],
    chosen: list[dict[str, Selection]] | None = None,
    *,
    selectors: dict[str, Selector] | None = None,
    title: str = "orchrm evaluation",
) -> Path:
    """OUT/view.html and OUT/view.json for an evaluation: its tasks (`LineUp.tasks`) and
    what each selector chose on each (`chosen`, from `selections`; or give the line-up's
    `selectors` and they choose here). `orchrm view OUT` reads view.json back."""
    from orchrm.viewer.html import render_page
    from orchrm.viewer.json_form import view_json

    if chosen is None:
        chosen = selections(tasks, selectors or {})
    views = [_with_selections(ViewTask(t), c) for t, c in zip(tasks, chosen, strict=True)]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / VIEW_JSON).write_text(json.dumps(view_json(views)), encoding="utf-8")
    (out / VIEW_HTML).write_text(render_page(views, title=title), encoding="utf-8")
    return out / VIEW_HTML

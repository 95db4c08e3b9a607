"""Whether a reward model reads the fit of a plan to its task or only the plan's
structure: per task kind and plan structure, the model's mean score beside the measured
success, and within each kind the rank correlation of the two.

The records are executed plans of held-out tasks (`orchrm.run/1` logs). A plan's
success is the world's true probability where the log has it (`world.p_success`), else
the share of its executions that were correct (the same task and plan in several logs,
e.g. the real-execution benchmark's draws, are one plan executed several times). Its
kind is the record's `kind`, else the `best_type` of its world task (the sub-agent type
that fits the task best: the world's kind), else its domain; its structure is the
record's `structure`, else its agents' types in order. Each distinct (task, plan) is
scored once. Per kind: Spearman's rho between score and success over its plans (`plan
rho`: does the model rank a kind's plans as they succeed?) and over its structures'
means (`structure rho`: does it order the structures as they succeed for this kind?).
A model that reads only structure orders the structures alike in every kind, so its
rho is high in the kinds whose best structure matches its favourite and low or negative
in the others.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from orchrm.errors import InputError
from orchrm.jsonl import read_jsonl
from orchrm.parse import ParseError
from orchrm.parse.records import parse_record


@dataclass
class PlanRow:
    """One distinct plan of one held-out task, with what it scored and how it did."""

    task_id: str
    question: str
    domain: str
    kind: str
    structure: str
    orchestration: object
    successes: list[float] = field(default_factory=list)
    score: float | None = None

    @property
    def success(self) -> float:
        return sum(self.successes) / len(self.successes)


@dataclass
class FitTable:
    """The cells (kind, structure) and, per kind, the rank correlations."""

    cells: list[dict]
    """kind, structure, plans, score (mean), success (mean)."""
    kinds: dict[str, dict]
    """kind -> plans, plan_rho, structure_rho (None where undefined)."""


def _kind(record: dict, tasks: dict) -> str:
    if isinstance(record.get("kind"), str):
        return record["kind"]
    task = tasks.get(record.get("task_id"), {})
    return str(task.get("best_type") or record.get("domain") or "all")


def _structure(record: dict, orchestration) -> str:
    if isinstance(record.get("structure"), str):
        return record["structure"]
    return ">".join(a.type for a in orchestration.agents) or "answer only"


def _success(record: dict) -> float | None:
    world = record.get("world")
    if isinstance(world, dict) and isinstance(world.get("p_success"), int | float):
        return float(world["p_success"])
    correct = record.get("correct")
    return float(correct) if isinstance(correct, bool) else None


def plan_rows(records: Iterable[dict], tasks: dict | None = None) -> list[PlanRow]:
    """The distinct (task, plan) of executed `records` with every execution's success;
    records without a parseable plan, a question or an outcome are left out."""
    tasks = tasks or {}
    rows: dict[tuple[str, str], PlanRow] = {}
    for r in records:
        success = _success(r)
        if not isinstance(r, dict) or success is None or not isinstance(r.get("question"), str):
            continue
        try:
            plan = parse_record(r)
        except ParseError:
            continue
        key = (str(r.get("task_id")), repr(plan))
        if key not in rows:
            rows[key] = PlanRow(
                key[0], r["question"], str(r.get("domain") or ""), _kind(r, tasks),
                _structure(r, plan), plan,
            )  # fmt: skip
        rows[key].successes.append(success)
    return list(rows.values())


def read_logs(logs: list[str | Path], tasks_files: list[str | Path] = ()) -> list[PlanRow]:
    """`plan_rows` of the records in `logs`, with the world tasks of `tasks_files`."""
    tasks = {t["id"]: t for f in tasks_files for _, t in read_jsonl(f) if isinstance(t, dict)}
    records = (r for log in logs for _, r in read_jsonl(log))
    rows = plan_rows(records, tasks)
    if not rows:
        names = ", ".join(str(p) for p in logs)
        raise InputError(f"{names}: no executed plan with a question and an outcome to measure")
    return rows


def _rho(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rho (None: fewer than 3 points, or one side constant)."""
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    from scipy.stats import spearmanr

    value = float(spearmanr(xs, ys).statistic)
    return value if math.isfinite(value) else None


def fit_table(scorer, rows: list[PlanRow]) -> FitTable:
    """Score every row (normalized by the model's training-time statistics) and tabulate
    the fit of plan to task (module docstring)."""
    scored = scorer.score([(r.question, r.orchestration, r.domain) for r in rows])
    normalized = scorer.info.normalize([s.score for s in scored])
    for row, value in zip(rows, normalized, strict=True):
        row.score = value
    rows = [r for r in rows if r.score is not None]
    by_cell: dict[tuple[str, str], list[PlanRow]] = defaultdict(list)
    for r in rows:
        by_cell[(r.kind, r.structure)].append(r)
    cells = [
        {"kind": k, "structure": s, "plans": len(rs),
         "score": sum(r.score for r in rs) / len(rs),
         "success": sum(r.success for r in rs) / len(rs)}
        for (k, s), rs in sorted(by_cell.items())
    ]  # fmt: skip
    kinds = {}
    for kind in sorted({r.kind for r in rows}):
        mine = [r for r in rows if r.kind == kind]
        of_kind = [c for c in cells if c["kind"] == kind]
        kinds[kind] = {
            "plans": len(mine),
            "plan_rho": _rho([r.score for r in mine], [r.success for r in mine]),
            "structure_rho": _rho([c["score"] for c in of_kind], [c["success"] for c in of_kind]),
        }
    return FitTable(cells, kinds)


def fit_text(table: FitTable) -> str:
    """The table as text: one block per kind, its structures by success, then its rhos."""

    def rho(x: float | None) -> str:
        return "  n/a" if x is None else f"{x:+.2f}"

    lines = [f"{'kind / structure':<34}{'plans':>6}{'RM score':>10}{'success %':>11}"]
    for kind, k in table.kinds.items():
        lines.append(
            f"{kind:<34}{k['plans']:>6}   plan rho {rho(k['plan_rho'])}, "
            f"structure rho {rho(k['structure_rho'])}"
        )
        of_kind = sorted((c for c in table.cells if c["kind"] == kind), key=lambda c: -c["success"])
        for c in of_kind:
            lines.append(
                f"  {c['structure'][:32]:<32}{c['plans']:>6}{c['score']:>10.2f}"
                f"{100 * c['success']:>11.1f}"
            )
    return "\n".join(lines)


def fit_plot(table: FitTable, path: Path, title: str = "") -> Path:
    """One panel per kind: each structure's mean RM score against its mean success."""
    from matplotlib.figure import Figure

    kinds = list(table.kinds)
    cols = min(3, len(kinds))
    rows = math.ceil(len(kinds) / cols)
    fig = Figure(figsize=(3.4 * cols, 2.9 * rows))
    for i, kind in enumerate(kinds):
        ax = fig.add_subplot(rows, cols, i + 1)
        of_kind = [c for c in table.cells if c["kind"] == kind]
        ax.scatter([100 * c["success"] for c in of_kind], [c["score"] for c in of_kind], s=14)
        for c in of_kind:
            ax.annotate(c["structure"][:18], (100 * c["success"], c["score"]), fontsize=6)
        rho = table.kinds[kind]["structure_rho"]
        ax.set_title(
            f"{kind} (structure rho {'n/a' if rho is None else f'{rho:+.2f}'})", fontsize=8
        )
        ax.set_xlabel("success (%)", fontsize=7)
        ax.set_ylabel("mean RM score", fontsize=7)
        ax.tick_params(labelsize=6)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path

"""Scoring the orchestrations of record files with a reward model: one row per record,
the score or the reason it has none, in the order the records were read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from orchrm.jsonl import printable
from orchrm.parse.records import score_inputs
from orchrm.scoring.base import Scorer


@dataclass
class ScoredRecords:
    """What `score_files` read and scored."""

    rows: list[dict] = field(default_factory=list)
    """Per record: `file`, `line`, `task_id`, `score` (None, with `reason`, for a record
    that holds no scorable orchestration); from an ensemble also `score_mean` and
    `score_spread` (`orchrm.scoring.base.Scored`)."""
    problems: list[tuple[str, int, str, str]] = field(default_factory=list)
    """(file, line, reason, message) of every record left unscored."""
    unreadable: list[tuple[Path, OSError]] = field(default_factory=list)
    """Files that could not be read at all; they add no row."""
    scored: int = 0
    """Rows with a score."""


def score_files(model: Scorer, files: Sequence[Path]) -> ScoredRecords:
    """Score every orchestration in `files` (any form `orchrm.parse.records.score_inputs`
    reads) in one batched pass; a file that cannot be read is listed, not raised."""
    out, items = ScoredRecords(), []
    for path in files:
        try:
            inputs = list(score_inputs(path))
        except OSError as err:
            out.unreadable.append((path, err))
            continue
        name = printable(path)
        for item in inputs:
            row = {"file": name, "line": item.line, "task_id": item.task_id, "score": None}
            if item.reason:
                row["reason"] = item.reason
                out.problems.append((name, item.line, item.reason, item.message))
            else:
                items.append((len(out.rows), item.question, item.orchestration))
            out.rows.append(row)
    scored = model.score([(q, o) for _, q, o in items])
    for (n, _, _), result in zip(items, scored, strict=True):
        out.rows[n]["score"] = result.score
        if result.spread is not None:
            out.rows[n] |= {"score_mean": result.mean, "score_spread": result.spread}
    out.scored = len(items)
    return out

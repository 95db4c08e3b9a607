"""Scoring the orchestrations of record files with a reward model: one row per record,
the score or the reason it has none, in the order the records were read. The files are
read first (`read_for_scoring`), so a caller can say that nothing can be scored before a
model loads, then scored in one batched pass (`ScoredRecords.score_with`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from orchrm.jsonl import printable
from orchrm.orchestration import Orchestration
from orchrm.parse.records import location, score_inputs
from orchrm.scoring.base import Scorer


@dataclass
class ScoredRecords:
    """What `read_for_scoring` read and `score_with` scored."""

    rows: list[dict] = field(default_factory=list)
    """Per record: `file`, `line` (`index` for a record of a `.json` list), `task_id`,
    `score` (None, with `reason`, for a record that holds no scorable orchestration); from
    an ensemble also `score_mean` and `score_spread` (`orchrm.scoring.base.Scored`)."""
    problems: list[tuple[str, str, str]] = field(default_factory=list)
    """(where: `file:line` or `file[index]`, reason, message) of every record left
    unscored."""
    unreadable: list[tuple[Path, OSError]] = field(default_factory=list)
    """Files that could not be read at all; they add no row."""
    pending: list[tuple[int, str, Orchestration]] = field(default_factory=list)
    """The records to score: (row, question, orchestration)."""
    scored: int = 0
    """Rows with a score."""

    def score_with(self, model: Scorer) -> ScoredRecords:
        """Score the pending records in one batched pass."""
        results = model.score([(q, o) for _, q, o in self.pending])
        for (n, _, _), result in zip(self.pending, results, strict=True):
            self.rows[n]["score"] = result.score
            if result.spread is not None:
                self.rows[n] |= {"score_mean": result.mean, "score_spread": result.spread}
        self.scored += len(self.pending)
        self.pending = []
        return self


def read_for_scoring(files: Sequence[Path], question: str | None = None) -> ScoredRecords:
    """Every record of `files` (any form `orchrm.parse.records.score_inputs` reads, with
    `question` for records that carry none), as rows to score or problems; a file that
    cannot be read is listed, not raised."""
    out = ScoredRecords()
    for path in files:
        try:
            inputs = list(score_inputs(path, question))
        except OSError as err:
            out.unreadable.append((path, err))
            continue
        name = printable(path)
        for item in inputs:
            at = {"line": item.line} if item.index is None else {"index": item.index}
            row = {"file": name, **at, "task_id": item.task_id, "score": None}
            if item.reason:
                row["reason"] = item.reason
                where = location(name, item.line, item.index)
                out.problems.append((where, item.reason, item.message))
            else:
                out.pending.append((len(out.rows), item.question, item.orchestration))
            out.rows.append(row)
    return out


def score_files(model: Scorer, files: Sequence[Path], question: str | None = None) -> ScoredRecords:
    """Score every orchestration in `files` (`read_for_scoring`, then `score_with`)."""
    return read_for_scoring(files, question).score_with(model)

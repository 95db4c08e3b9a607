"""`ViewTask`, one task as the viewer shows it, and the names of the viewer's files."""

from __future__ import annotations

from dataclasses import dataclass, field

from orchrm.selection.selectors import Candidate, CandidateSet

VIEW_FORMAT = "orchrm.view/1"
"""`format` of a `view.json`: an evaluation's tasks, candidates, scores and picks."""
VIEW_JSON = "view.json"
VIEW_HTML = "view.html"


@dataclass(frozen=True)
class EditedPick:
    """A plan a selector made in place of the candidates (`orchrm-search`'s edit): the
    page draws it beside the candidate it came from."""

    plan: Candidate
    """The edited plan and, where it was run (the world's, in an evaluation), its
    outcome."""
    source: int
    """The candidate it was edited from."""
    edits: tuple[str, ...] = ()
    """The edits that made it, in order."""
    score: float | None = None
    """What the selector ranked it by."""


@dataclass
class ViewTask:
    """One task as the page shows it: its candidates and who picked which."""

    task: CandidateSet
    ground_truth: str | None = None
    labels: tuple[str, ...] = ()
    """Per candidate: who wrote it ("specialized #3"); empty: its position."""
    problems: tuple[str | None, ...] = ()
    """Per candidate: why it has no orchestration (its parse error), or None."""
    scores: tuple[float | None, ...] = ()
    """Per candidate: the reward model's score; empty when no model scored them."""
    picks: dict[str, int] = field(default_factory=dict)
    """Selector name -> index of the candidate it chose (for a selector in `edited`, the
    candidate its plan was edited from)."""
    edited: dict[str, EditedPick] = field(default_factory=dict)
    """Selector name -> the plan it made and executed in place of the candidates."""

    def chosen(self, name: str) -> Candidate | None:
        """What selector `name` executed: its edited plan, or the candidate it picked."""
        if name in self.edited:
            return self.edited[name].plan
        index = self.picks.get(name)
        return None if index is None else self.task.candidates[index]

    def label(self, i: int) -> str:
        return self.labels[i] if i < len(self.labels) and self.labels[i] else f"#{i}"

    def problem(self, i: int) -> str | None:
        return self.problems[i] if i < len(self.problems) else None

    def score(self, i: int) -> float | None:
        return self.scores[i] if i < len(self.scores) else None

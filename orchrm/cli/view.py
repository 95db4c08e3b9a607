"""`orchrm view`: one self-contained HTML page to look at orchestrations task by task."""

from __future__ import annotations

from pathlib import Path

import typer

from orchrm.cli.console import console, warn
from orchrm.cli.options import config_options
from orchrm.viewer.config import ViewConfig


@config_options(
    ViewConfig,
    into="scoring",
    leave_out=["protocol", "tokenizer", "max_length", "batch_size", "question"],
    settings={"out": {"metavar": "<path>"}},
)
def view_command(
    scoring: ViewConfig,
    files: list[Path] = typer.Argument(
        ...,
        help="orchrm.run/1 logs (.jsonl), stores (.duckdb), report folders or their view.json.",
    ),
) -> None:
    """Write one HTML page (it loads nothing from the network): per task, its candidate
    orchestrations drawn as graphs, each with its reward-model score, answer and whether
    it was right (and its true success probability on world logs), and what each
    selector picked; sortable and filterable by domain, "orchrm picked a wrong one" and
    disagreement with majority."""
    from orchrm.viewer.page import build_view

    scorer = None
    if scoring.rm or scoring.rm_url:
        from orchrm.scoring.load import load_scorer

        scorer = load_scorer(
            scoring.rm, scoring.rm_url, dtype=scoring.dtype, aggregate=scoring.aggregate,
            spread_weight=scoring.spread_weight,
        )  # fmt: skip
    page = build_view(
        files, scorer, orchestrator=scoring.orchestrator, n=scoring.samples,
        max_tasks=scoring.max_tasks, title=scoring.title,
    )  # fmt: skip
    out = Path(scoring.out)
    if not scorer and any(f.suffix in (".jsonl", ".duckdb") for f in files):
        warn("no --rm or --rm-url: the logs and stores get no reward-model scores or orchrm picks")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    console.print(f"page -> {out}", highlight=False, markup=False)

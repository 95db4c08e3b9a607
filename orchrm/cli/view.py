"""`orchrm view`: one self-contained HTML page to look at orchestrations task by task."""

from __future__ import annotations

from pathlib import Path

import typer

from orchrm.cli.console import console, warn
from orchrm.cli.options import config_options
from orchrm.scoring.config import ScoreConfig


@config_options(
    ScoreConfig,
    into="scoring",
    leave_out=["protocol", "tokenizer", "max_length", "batch_size", "out", "question"],
)
def view_command(
    scoring: ScoreConfig,
    files: list[Path] = typer.Argument(
        ...,
        help="orchrm.run/1 logs (.jsonl), stores (.duckdb), report folders or their view.json.",
    ),
    out: Path = typer.Option(Path("view.html"), "--out", help="The HTML page to write."),
    orchestrator: str = typer.Option(
        None, "--orchestrator", help="Whose samples are the candidates (default: everyone's)."
    ),
    samples: int = typer.Option(
        None, "--samples", min=1, help="N: the first N candidates of each task (default: all)."
    ),
    max_tasks: int = typer.Option(
        None, "--max-tasks", min=1, help="Show only the first tasks (default: all)."
    ),
    title: str = typer.Option(None, "--title", help="The page's title (default: the files)."),
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
        files, scorer, orchestrator=orchestrator, n=samples, max_tasks=max_tasks, title=title
    )
    if not scorer and any(f.suffix in (".jsonl", ".duckdb") for f in files):
        warn("no --rm or --rm-url: the logs and stores get no reward-model scores or orchrm picks")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    console.print(f"page -> {out}", highlight=False, markup=False)

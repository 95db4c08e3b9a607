"""`ViewConfig`: what `orchrm view` can set (kept apart from the page's code so the
command line reads it without loading the viewer)."""

from __future__ import annotations

from orchrm.configs import config, setting
from orchrm.scoring.config import ScoreConfig


@config
class ViewConfig(ScoreConfig):
    """The reward model that scores the candidates (`ScoreConfig`), which candidates the
    page shows, and where it is written."""

    out: str = "view.html"
    """The HTML page to write."""
    orchestrator: str | None = None
    """Whose samples are the candidates (default: everyone's)."""
    samples: int | None = setting(None, min=1)
    """N: the first N candidates of each task (default: all)."""
    max_tasks: int | None = setting(None, min=1)
    """Show only the first tasks (default: all)."""
    title: str | None = None
    """The page's title (default: the files)."""

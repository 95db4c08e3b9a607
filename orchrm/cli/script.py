"""A benchmark script's command line, built the way `orchrm`'s commands are: one option
per field of a config (`orchrm.configs.config`), with its type, default, bounds and help
written once, in the config (`config_options`), and `--config FILE.yaml`.

    @config
    class Settings:
        calls: int = setting(2000, min=1)
        \"\"\"Calls in all.\"\"\"

    def main(settings: Settings) -> None: ...

    if __name__ == "__main__":
        run_script(Settings, main, doc=__doc__)

A user's error (`OrchrmError`) is one line on stderr and the exit status of its kind, as
in `orchrm`; anything else is a bug and keeps its traceback."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import typer

from orchrm.cli.console import user_errors
from orchrm.cli.help import HelpCommand
from orchrm.cli.options import config_options


class ScriptCommand(HelpCommand):
    """A script's one command: a user's error is one line and its exit status, as in
    `orchrm` (`user_errors`)."""

    def invoke(self, ctx: typer.Context):
        with user_errors():
            return super().invoke(ctx)


def run_script(
    config: Any,
    main: Callable[[Any], Any],
    *,
    doc: str | None = None,
    argv: Sequence[str] | None = None,
    **options: Any,
) -> None:
    """Read `config`'s options from `argv` (the command line when None), build the
    config and call `main` with it; `--help` shows `doc`'s first paragraph and every
    option. `options` go to `config_options` (`flags`, `settings`, `required`...)."""
    app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)
    about = (doc or main.__doc__ or "").strip().split("\n\n")[0]

    def command(config: Any) -> None:
        main(config)

    app.command(cls=ScriptCommand, help=about)(config_options(config, **options)(command))
    app(args=list(argv) if argv is not None else None, prog_name=Path(sys.argv[0]).name)

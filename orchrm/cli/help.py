"""The help of every `orchrm` command: click's plain layout (at most 80 columns, option
names never cut, help wrapped at words), the options grouped in the panels their config
fields declare, the command's own options first."""

from __future__ import annotations

from typer.core import TyperCommand


class HelpCommand(TyperCommand):
    """A command whose help lists its options by panel (`setting(panel=...)`)."""

    def format_options(self, ctx, formatter) -> None:
        """One section per panel, in the order the options come."""
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            own = "Arguments" if param.param_type_name == "argument" else "Options"
            sections.setdefault(getattr(param, "rich_help_panel", None) or own, []).append(record)
        for name, rows in sections.items():
            with formatter.section(name):
                formatter.write_dl(rows)

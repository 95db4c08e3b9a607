"""The help of every `orchrm` command: click's plain layout (at most 80 columns, option
names never cut, help wrapped at words), the options grouped in the panels their config
fields declare, the command's own options first, each number's range as its check
enforces it; a mistyped option suggests only options the help lists."""

from __future__ import annotations

from typer.core import TyperCommand


class HelpCommand(TyperCommand):
    """A command whose help lists its options by panel (`setting(panel=...)`)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            info = getattr(getattr(param, "type_descriptor", None), "parameter_info", None)
            text = getattr(getattr(info, "parser", None), "range_text", None)
            if text:  # a strict bound (`options.Bounded`), which typer cannot write
                param._get_number_range_help_str = lambda text=text: text

    def parse_args(self, ctx, args):
        """click's, but a mistyped option is never told a hidden spelling (an alias kept
        only to answer "did you mean")."""
        try:
            return super().parse_args(ctx, args)
        except Exception as err:
            if getattr(err, "possibilities", None):
                hidden = {o for p in self.params if getattr(p, "hidden", False) for o in p.opts}
                err.possibilities = [o for o in err.possibilities if o not in hidden]
            raise

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

"""The help every `orchrm` command prints: plain text laid out for the terminal's width
(80 columns and more): option names are never cut (a long one puts its help on the next
line), help is wrapped at words, a flag shows no value, and options are grouped in the
panels their config fields declare (`orchrm.configs.setting(panel=...)`), the command's
own options first."""

from __future__ import annotations

import inspect
import shutil
import textwrap
import types
import typing
from pathlib import Path
from typing import Any

from typer.core import TyperCommand, TyperGroup

WIDEST = 100
"""Help lines are at most this wide, however wide the terminal."""
NAME_COLUMN = 26
"""Widest option column; a longer name puts its help on the next line."""
NO_BREAK = "\xa0"
"""Joins the words of a note that wrapping must not split (written as a space)."""
OPTIONS = "Options"
ARGUMENTS = "Arguments"
TYPE_NAMES = {int: "INT", float: "FLOAT", str: "TEXT", Path: "PATH", bool: "BOOL"}
"""How an option's value type is shown."""


def width() -> int:
    """Columns the help is laid out in: the terminal's (COLUMNS when set), at most
    `WIDEST`, at least 40."""
    return max(40, min(shutil.get_terminal_size((80, 24)).columns, WIDEST))


def _paragraphs(text: str) -> list[str]:
    """The paragraphs of a docstring, each on one line."""
    text = inspect.cleandoc(text or "").partition("\f")[0]
    return [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]


def first_sentence(text: str) -> str:
    """The first sentence of a docstring's first paragraph (the whole paragraph when it
    has one sentence), on one line."""
    paragraphs = _paragraphs(text)
    if not paragraphs:
        return ""
    first = paragraphs[0]
    for i in range(len(first) - 1):
        if first[i] == "." and first[i + 1] == " " and not first[: i + 1].endswith("e.g."):
            return first[: i + 1]
    return first


def _is_flag(param: Any) -> bool:
    return bool(getattr(param, "is_flag", False) or getattr(param, "count", False))


def _annotation(param: Any) -> Any:
    """The type a parameter's values have (`int` for `int | None` and `list[int]`)."""
    descriptor = getattr(param, "type_descriptor", None)
    hint = getattr(descriptor, "annotation", None)
    while True:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        origin = typing.get_origin(hint)
        if origin in (typing.Union, types.UnionType, list, tuple) and len(args) >= 1:
            hint = args[0]
        else:
            return hint


def _choices(param: Any) -> tuple:
    hint = _annotation(param)
    return typing.get_args(hint) if typing.get_origin(hint) is typing.Literal else ()


def _value_name(param: Any) -> str:
    """What an option's value looks like: its metavar, its choices when short, else its
    type in capitals (nothing for a flag)."""
    if _is_flag(param):
        return ""
    if getattr(param, "metavar", None):
        return param.metavar
    choices = _choices(param)
    if choices:
        spelled = "|".join(map(str, choices))
        return f"[{spelled}]" if len(spelled) <= 24 else "CHOICE"
    return TYPE_NAMES.get(_annotation(param), "VALUE")


def _extras(param: Any) -> list[str]:
    """The bracketed notes after an option's help: choices too long for its value name,
    bounds, environment variable, default, required."""
    notes = []
    choices = _choices(param)
    if choices and _value_name(param) == "CHOICE":
        notes.append("one of: " + ", ".join(map(str, choices)))
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    if low is not None and high is not None:
        notes.append(f"{low} to {high}")
    elif low is not None:
        notes.append(f"at least {low}")
    elif high is not None:
        notes.append(f"at most {high}")
    envvar = getattr(param, "envvar", None)
    if envvar:
        notes.append(f"env: {envvar if isinstance(envvar, str) else ', '.join(envvar)}")
    default = _default(param)
    if default:
        notes.append(f"default: {default}")
    if param.required:
        notes.append("required")
    # No-break spaces keep each note on one line when the help is wrapped (`_rows`).
    return [f"[{n}]".replace(" ", NO_BREAK) for n in notes]


def _default(param: Any) -> str:
    """The default an option shows ('' for none worth showing)."""
    shown = getattr(param, "show_default", None)
    if isinstance(shown, str):
        return shown
    if shown is False or param.default is None or param.required:
        return ""
    value = param.default
    if callable(value):
        return ""
    if _is_flag(param):
        if not param.secondary_opts:
            return ""
        return param.opts[0] if value else param.secondary_opts[0]
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value))
    return str(value)


def _names(param: Any) -> str:
    """An option's names as typed (`-v, --verbose`, `--lora / --no-lora`) with its value,
    or an argument's name."""
    if param.param_type_name == "argument":
        name = (param.metavar or param.name or "").upper()
        return name + ("..." if param.nargs != 1 else "")
    short = sorted(param.opts, key=lambda o: o.startswith("--"))
    names = ", ".join(short)
    if param.secondary_opts:
        names += " / " + ", ".join(param.secondary_opts)
    value = _value_name(param)
    return f"{names} {value}" if value else names


def _rows(rows: list[tuple[str, str]], columns: int) -> list[str]:
    """Two-column lines: the names (never cut) and their help wrapped at words; a name
    wider than the column puts its help on the next line."""
    if not rows:
        return []
    name_width = min(max(len(n) for n, _ in rows), NAME_COLUMN)
    indent = 2 + name_width + 2
    help_width = max(columns - indent, 20)
    lines = []
    for name, text in rows:
        # Only a word wider than the whole column (a long link) is cut.
        wrapped = textwrap.wrap(text, help_width, break_on_hyphens=False)
        wrapped = [w.replace(NO_BREAK, " ") for w in wrapped]
        if wrapped and len(name) <= name_width:
            lines.append(f"  {name.ljust(name_width)}  {wrapped.pop(0)}")
        else:
            lines.append(f"  {name}")
        lines += [" " * indent + w for w in wrapped]
    return lines


def _wrap(text: str, columns: int, indent: str = "  ") -> list[str]:
    return textwrap.wrap(
        text, columns, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False
    )


def render_help(command: Any, ctx: Any) -> str:
    """The whole help of `command`: usage, description, arguments and options by panel,
    and, for a group, its commands with the first sentence of each one's help."""
    columns = width()
    usage = " ".join(["Usage:", ctx.command_path, *command.collect_usage_pieces(ctx)])
    lines = _wrap(usage, columns, "") or [usage]
    for paragraph in _paragraphs(command.help or ""):
        lines += ["", *_wrap(paragraph, columns)]
    panels: dict[str, list[tuple[str, str]]] = {ARGUMENTS: [], OPTIONS: []}
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        argument = param.param_type_name == "argument"
        panel = getattr(param, "rich_help_panel", None) or (ARGUMENTS if argument else OPTIONS)
        text = " ".join([" ".join((param.help or "").split()), *_extras(param)])
        panels.setdefault(panel, []).append((_names(param), text.strip()))
    for panel, rows in panels.items():
        if rows:
            lines += ["", f"{panel}:", *_rows(rows, columns)]
    if isinstance(command, TyperGroup):
        rows = []
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                rows.append((name, sub.short_help or first_sentence(sub.help or "")))
        if rows:
            lines += ["", "Commands:", *_rows(rows, columns)]
    return "\n".join(line.rstrip() for line in lines) + "\n"


class HelpCommand(TyperCommand):
    """A command whose `--help` is `render_help`'s."""

    def format_help(self, ctx, formatter) -> None:
        """Write the help (`render_help`)."""
        formatter.write(render_help(self, ctx))


class HelpGroup(TyperGroup):
    """A group whose `--help` is `render_help`'s, and whose commands' are too."""

    def format_help(self, ctx, formatter) -> None:
        """Write the help (`render_help`)."""
        formatter.write(render_help(self, ctx))

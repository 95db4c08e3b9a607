"""What a config dataclass tells a command line about each of its fields: the help text
(the field's `help` metadata, else the docstring written under it), the type an option
parses, and the default. `orchrm.cli` makes typer options from it and
`python -m orchrm.training.train` an argparse parser, so neither writes a default or a help."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import itertools
import textwrap
import types
import typing
from typing import Any

SCALARS = (bool, int, float, str)
"""Field types a command-line option can carry as they are."""


def field_help(cls: type) -> dict[str, str]:
    """Every documented field of the dataclass `cls`: `field(metadata={"help": ...})`,
    else the string literal right under the field in the class body, on one line."""
    helps = {}
    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body
    for node, after in itertools.pairwise(body):
        doc = after.value if isinstance(after, ast.Expr) else None
        is_field = isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
        if is_field and isinstance(doc, ast.Constant) and isinstance(doc.value, str):
            helps[node.target.id] = " ".join(inspect.cleandoc(doc.value).split())
    for f in dataclasses.fields(cls):
        if "help" in f.metadata:
            helps[f.name] = f.metadata["help"]
    return helps


def scalar_type(hint: Any) -> type | None:
    """The scalar a field of type `hint` holds (`int` for `int | None`), or None when it
    holds a collection or anything else a single option cannot spell."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        kinds = [a for a in typing.get_args(hint) if a is not type(None)]
        hint = kinds[0] if len(kinds) == 1 else None
    return hint if hint in SCALARS else None


def argument_parser(cls: type, description: str) -> argparse.ArgumentParser:
    """An argparse parser with a `--field-name` flag per scalar field of `cls`, each
    defaulting to None (so the config's own default applies when left out); booleans
    are `--flag/--no-flag`."""
    parser = argparse.ArgumentParser(description=description)
    hints, helps = typing.get_type_hints(cls), field_help(cls)
    for f in dataclasses.fields(cls):
        kind = scalar_type(hints[f.name])
        if kind is None:
            continue
        flag = "--" + f.name.replace("_", "-")
        # argparse formats help with %: a literal one is doubled.
        text = helps.get(f.name, "").replace("%", "%%")
        if kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, help=text)
        else:
            parser.add_argument(flag, type=kind, help=text)
    return parser


def given(args: argparse.Namespace) -> dict[str, Any]:
    """The options a command line set (argparse leaves the others None)."""
    return {k: v for k, v in vars(args).items() if v is not None}


def setting(default: Any = dataclasses.MISSING, *, choices=None, min=None, max=None, **kw):
    """A dataclass field whose allowed values live with it: `choices` (a tuple), `min` and
    `max` (inclusive bounds, None allowed as a value when the type admits it). `check`
    enforces them and the command line shows them (`orchrm.cli.options`)."""
    meta = dict(kw.pop("metadata", {}))
    meta.update(
        {k: v for k, v in (("choices", choices), ("min", min), ("max", max)) if v is not None}
    )
    return dataclasses.field(default=default, metadata=meta, **kw)


def check(config: Any) -> None:
    """Raise `ConfigError` naming the first field of the dataclass instance `config` whose
    value is outside the `choices`, `min` or `max` its `setting` declares."""
    from orchrm.errors import ConfigError

    for f in dataclasses.fields(config):
        value, meta = getattr(config, f.name), f.metadata
        if value is None:
            continue
        if "choices" in meta and value not in meta["choices"]:
            allowed = ", ".join(map(str, meta["choices"]))
            raise ConfigError(f"{f.name} must be one of {allowed}, got {value!r}")
        if "min" in meta and value < meta["min"]:
            raise ConfigError(f"{f.name} must be at least {meta['min']}, got {value!r}")
        if "max" in meta and value > meta["max"]:
            raise ConfigError(f"{f.name} must be at most {meta['max']}, got {value!r}")

"""What a config dataclass tells a command line and a config file about each of its
fields: the help text (the field's `help` metadata, else the docstring written under it),
the type an option parses, the default, the bounds (`setting`), the help panel, and
whether the code sets it (`setting(internal=True)`). `orchrm.cli` makes typer options from
it and `python -m orchrm.training.train` an argparse parser, so neither writes a default
or a help. A config file is YAML whose keys are field names (nested configs as nested
mappings): `load_config` reads one, checking every key and value, and `dump_config`
writes the config a run resolved, which `load_config` reads back to the same config."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import itertools
import textwrap
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
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


def argument_parser(
    cls: type,
    description: str,
    *,
    prog: str | None = None,
    flags: Mapping[str, str] | None = None,
    leave_out: Iterable[str] = (),
) -> argparse.ArgumentParser:
    """An argparse parser with `--config FILE.yaml` and a `--field-name` flag (or the
    one `flags` names) per scalar field of `cls` that the code does not set and
    `leave_out` does not name, each defaulting to None (so the file's value, else the
    config's default, applies when left out); booleans are `--flag/--no-flag`.
    `config_from_args` builds the config from what it parses."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "--config",
        metavar="FILE.yaml",
        help="Read the settings from this YAML file (a run's config.yaml, or a recipe "
        "under configs/); the options given here override it.",
    )
    hints, helps = typing.get_type_hints(cls), field_help(cls)
    for f in dataclasses.fields(cls):
        kind = scalar_type(hints[f.name])
        if kind is None or is_internal(f) or f.name in leave_out:
            continue
        flag = (flags or {}).get(f.name, "--" + f.name.replace("_", "-"))
        # argparse formats help with %: a literal one is doubled.
        text = helps.get(f.name, "").replace("%", "%%")
        if kind is bool:
            parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, help=text)
        else:
            choices = f.metadata.get("choices")
            parser.add_argument(flag, dest=f.name, type=kind, choices=choices, help=text)
    return parser


def given(args: argparse.Namespace) -> dict[str, Any]:
    """The options a command line set (argparse leaves the others None)."""
    return {k: v for k, v in vars(args).items() if v is not None}


def config_from_args(config: Any, args: argparse.Namespace) -> Any:
    """The config an `argument_parser` command line describes: `config` (a dataclass or
    an instance), then its `--config` file, then the options given, each over the last."""
    base = config() if isinstance(config, type) else config
    values = given(args)
    path = values.pop("config", None)
    if path is not None:
        base = load_config(base, path)
    names = {f.name for f in dataclasses.fields(base)}
    return with_values(base, {k: v for k, v in values.items() if k in names})


def setting(
    default: Any = dataclasses.MISSING,
    *,
    choices=None,
    min=None,
    max=None,
    panel: str | None = None,
    internal: bool | tuple[str, ...] = False,
    **kw,
):
    """A dataclass field whose allowed values live with it: `choices` (a tuple), `min` and
    `max` (inclusive bounds, None allowed as a value when the type admits it). `check`
    enforces them and the command line shows them (`orchrm.cli.options`).

    `panel` names the group of options its command-line option is listed in (data, model,
    optimization, scale, output, ...). `internal=True` marks a field the code sets (no
    option, not read from or written to a config file); on a field holding another
    config, a tuple of that config's fields the code sets there."""
    meta = dict(kw.pop("metadata", {}))
    given = (("choices", choices), ("min", min), ("max", max), ("panel", panel))
    meta.update({k: v for k, v in given if v is not None})
    if internal:
        meta["internal"] = internal
    return dataclasses.field(default=default, metadata=meta, **kw)


def _bounds_problem(name: str, value: Any, meta: Mapping[str, Any]) -> str | None:
    """What is wrong with `value` against the `choices`, `min` and `max` of `meta` (None:
    nothing)."""
    if value is None:
        return None
    if "choices" in meta and value not in meta["choices"]:
        allowed = ", ".join(map(str, meta["choices"]))
        return f"{name} must be one of {allowed}, got {value!r}"
    if "min" in meta and value < meta["min"]:
        return f"{name} must be at least {meta['min']}, got {value!r}"
    if "max" in meta and value > meta["max"]:
        return f"{name} must be at most {meta['max']}, got {value!r}"
    return None


def check(config: Any) -> None:
    """Raise `ConfigError` naming the first field of the dataclass instance `config` whose
    value is outside the `choices`, `min` or `max` its `setting` declares."""
    from orchrm.errors import ConfigError

    for f in dataclasses.fields(config):
        problem = _bounds_problem(f.name, getattr(config, f.name), f.metadata)
        if problem:
            raise ConfigError(problem)


def is_internal(f: dataclasses.Field) -> bool:
    """Whether the code sets the field `f` (`setting(internal=True)`)."""
    return f.metadata.get("internal") is True


def internal_inside(f: dataclasses.Field) -> tuple[str, ...]:
    """The fields of the config that `f` holds which the code sets (`setting(internal=
    ("pairs", "out"))`)."""
    inside = f.metadata.get("internal")
    return tuple(inside) if isinstance(inside, tuple | list) else ()


def nested_config(hint: Any) -> type | None:
    """The dataclass a field of type `hint` holds (None: it holds no config)."""
    return hint if isinstance(hint, type) and dataclasses.is_dataclass(hint) else None


def config_dict(config: Any, *, leave_out: Iterable[str] = ()) -> dict[str, Any]:
    """The dataclass instance `config` as plain data for a config file: nested configs as
    mappings, tuples as lists; the fields the code sets (and `leave_out`) are left out."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        if is_internal(f) or f.name in leave_out:
            continue
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            out[f.name] = config_dict(value, leave_out=internal_inside(f))
        else:
            out[f.name] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def dump_config(config: Any, path: str | Path) -> Path:
    """Write `config` as YAML to `path` (atomically: a reader sees the old file or the
    whole new one), such that `load_config(type(config), path)` gives it back."""
    import yaml

    from orchrm.jsonl import atomic_file

    path = Path(path)
    text = yaml.safe_dump(config_dict(config), sort_keys=False, default_flow_style=False)
    with atomic_file(path) as f:
        f.write(text)
    return path


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The mapping a YAML config file holds (an empty file: none); ConfigError naming the
    file when it cannot be read or holds something else."""
    import yaml

    from orchrm.errors import ConfigError, UnreadableConfig

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise UnreadableConfig(
            f"{path}: cannot read the config file: {err.strerror or err}"
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: the config file is not UTF-8 text") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"{path}: not YAML{where}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config file holds a mapping of keys, not a {kind(data)}")
    return data


def kind(value: Any) -> str:
    """A YAML reader's name for the type of `value`."""
    names = {bool: "boolean", int: "integer", float: "number", str: "string", list: "list"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _describe(hint: Any) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(hint))
    if hint is type(None):
        return "null"
    origin = typing.get_origin(hint) or hint
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    if origin in (tuple, list):
        return "a list"
    if origin is dict:
        return "a mapping"
    return names.get(origin, getattr(origin, "__name__", str(origin)))


class _WrongType(Exception):
    """A value that does not have its field's type (`_coerce`)."""


def _coerce(value: Any, hint: Any) -> Any:
    """`value`, read from a file, as a field of type `hint` holds it; `_WrongType` when
    it has another type. A number written as text (`1e-5`, which YAML reads as a
    string) is read as a number where the field holds one."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arg in (a for a in args if a is not type(None)):
            try:
                return _coerce(value, arg)
            except _WrongType:
                continue
        raise _WrongType
    if hint is Any or hint is object:
        return value
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise _WrongType
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _WrongType
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                raise _WrongType from None
        raise _WrongType
    if hint is str:
        if isinstance(value, str):
            return value
        raise _WrongType
    if origin is tuple or hint is tuple:
        if not isinstance(value, list | tuple):
            raise _WrongType
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(v, args[0]) for v in value)
        if args and len(args) != len(value):
            raise _WrongType
        return (
            tuple(_coerce(v, a) for v, a in zip(value, args, strict=True)) if args else tuple(value)
        )
    if origin is list or hint is list:
        if not isinstance(value, list | tuple):
            raise _WrongType
        return [_coerce(v, args[0]) for v in value] if args else list(value)
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise _WrongType
        if not args:
            return dict(value)
        return {_coerce(k, args[0]): _coerce(v, args[1]) for k, v in value.items()}
    raise _WrongType


def apply_mapping(
    base: Any,
    values: Mapping[str, Any],
    *,
    source: str,
    prefix: str = "",
    leave_out: Iterable[str] = (),
) -> Any:
    """`base` (a dataclass instance) with `values` (read from `source`, a file) applied,
    nested mappings to nested configs. ConfigError naming `source` and the key for an
    unknown key, a key the code sets, a value of the wrong type or out of bounds."""
    from orchrm.errors import ConfigError

    cls = type(base)
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    leave_out = set(leave_out)
    changes: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        f = fields.get(key) if isinstance(key, str) else None
        if f is None:
            known = ", ".join(n for n, g in fields.items() if not is_internal(g))
            raise ConfigError(f"{source}: unknown key {name!r} (known: {known})")
        if is_internal(f) or key in leave_out:
            raise ConfigError(f"{source}: {name} is set by the command, not by a config file")
        inner = nested_config(hints[key])
        if inner is not None:
            if not isinstance(value, dict):
                raise ConfigError(f"{source}: {name} must be a mapping, got {kind(value)}")
            changes[key] = apply_mapping(
                getattr(base, key),
                value,
                source=source,
                prefix=f"{name}.",
                leave_out=internal_inside(f),
            )
            continue
        try:
            value = _coerce(value, hints[key])
        except _WrongType:
            message = f"{name} must be {_describe(hints[key])}, got {kind(value)} {value!r}"
            raise ConfigError(f"{source}: {message}") from None
        problem = _bounds_problem(name, value, f.metadata)
        if problem:
            raise ConfigError(f"{source}: {problem}")
        changes[key] = value
    try:
        return dataclasses.replace(base, **changes)
    except ConfigError as err:
        raise ConfigError(f"{source}: {err}") from None


def load_config(config: Any, path: str | Path) -> Any:
    """The config the YAML file `path` describes: `config` (a dataclass, whose defaults
    apply, or an instance whose values do) with the file's keys applied."""
    base = config() if isinstance(config, type) else config
    return apply_mapping(base, read_config_file(path), source=str(path))


def with_values(base: Any, values: Mapping[str, Any]) -> Any:
    """`base` with `values` applied, each key a field name or a dotted path into nested
    configs (`train.epochs`); the values are already of their fields' types."""
    own = {k: v for k, v in values.items() if "." not in k}
    inner: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        if "." in key:
            head, rest = key.split(".", 1)
            inner.setdefault(head, {})[rest] = value
    for head, rest in inner.items():
        own[head] = with_values(own.get(head, getattr(base, head)), rest)
    return dataclasses.replace(base, **own) if own else base

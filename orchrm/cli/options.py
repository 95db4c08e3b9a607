"""Typer options made from a config (`orchrm.configs`): every field the code does not set
is an option, nested configs' fields too, each with its field's type, default, bounds,
help and panel, so a default or a help is written once, in the config. Such a command
also reads `--config FILE.yaml`; the options given override the file."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import operator
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import typer

from orchrm.configs import (
    config,
    field_help,
    internal_inside,
    is_internal,
    load_config,
    with_values,
)
from orchrm.errors import ConfigError

PANELS = ("Data", "Model", "Optimization", "Ensemble", "Scale", "Selectors", "Output")
"""The order of the help panels fields declare; any other panel follows them."""
CONFIG_HELP = (
    "Read the settings from this YAML file (a run's config.yaml, or a recipe under "
    "configs/); the options given here override it."
)


@config
class JsonOutput:
    """What a command prints: its tables, or JSON for a program to read."""

    json: bool = False
    """Print machine-readable JSON."""


def assignments(option: str, form: str) -> Callable[[list[str]], dict[str, str]]:
    """The `collect` of an option given once per `KEY=VALUE` item (`form` names them, e.g.
    `FIELD=COLUMN`): the mapping of the items; a `ConfigError` for an item without `=`."""

    def read(texts: list[str]) -> dict[str, str]:
        pairs = [text.split("=", 1) for text in texts]
        if any(len(p) != 2 for p in pairs):
            raise ConfigError(f"{option} takes {form}")
        return dict(pairs)

    return read


class ConfigOptions(NamedTuple):
    """What a command's config exposes: the defaults, the dotted path of every field that
    is an option, and the fields the command sets from its own arguments."""

    config: Any
    options: tuple[str, ...]
    left_out: frozenset[str]


class Entry(NamedTuple):
    """A field that is an option: its dotted path, field, type, default, help, panel."""

    key: str
    field: dataclasses.Field
    hint: Any
    default: Any
    help: str
    panel: str | None


def _kind(hint: Any) -> tuple[Any, bool]:
    """The option type of a field of type `hint` (None: no option spells it) and
    whether it is given once per item (a `tuple[X, ...]`)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return args[0], True
    if origin in (typing.Union, type(int | None)):  # X | None
        args = [a for a in args if a is not type(None)]
        hint = args[0] if len(args) == 1 else None
    scalar = hint in (bool, int, float, str) or typing.get_origin(hint) is typing.Literal
    return (hint if scalar else None), False


def _entries(base, skip, parsed, path=(), panel=None, fixed=()) -> Iterable[Entry]:
    """Every field of `base` that is an option, nested configs' fields in their place."""
    hints, helps = typing.get_type_hints(type(base)), field_help(type(base))
    for f in dataclasses.fields(base):
        key = ".".join((*path, f.name))
        if is_internal(f) or f.name in fixed or key in skip:
            continue
        if dataclasses.is_dataclass(hints[f.name]):
            inner, own = getattr(base, f.name), f.metadata.get("panel", panel)
            yield from _entries(inner, skip, parsed, (*path, f.name), own, internal_inside(f))
        elif _kind(hints[f.name])[0] is not None or key in parsed:
            if f.name not in helps:
                raise TypeError(f"{type(base).__name__}.{f.name} has no help text")
            own = panel or f.metadata.get("panel")
            yield Entry(key, f, hints[f.name], getattr(base, f.name), helps[f.name], own)


def _flags(keys: list[str], renames: Mapping[str, Any]) -> dict[str, Any]:
    """`--name`, prefixed by its configs' names where two fields share a name (a
    top-level field keeps its plain name), unless `renames` says otherwise."""
    last = [k.split(".")[-1] for k in keys]
    words = {k: k if last.count(n) > 1 and "." in k else n for k, n in zip(keys, last)}  # noqa: B905
    return {
        k: renames.get(k, "--" + w.replace(".", "-").replace("_", "-")) for k, w in words.items()
    }


def _param(name: str, default: Any, annotation: Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=annotation)  # fmt: skip


class Bounded:
    """The parser of a number option whose field has a strict bound (`setting(above=,
    below=)`), which typer's ranges cannot state: it refuses a value outside the field's
    bounds, and `range_text` is the range the help shows (`HelpCommand`), as typer writes one."""

    def __init__(self, kind: type, bounds: Mapping[str, Any]) -> None:
        self.kind, self.bounds = kind, dict(bounds)
        low = [f"{v}{'<' if k == 'gt' else '<='}" for k, v in bounds.items() if k in LOW]
        high = [f"{'<' if k == 'lt' else '<='}{v}" for k, v in bounds.items() if k in HIGH]
        if low and not high:
            key, value = next((k, v) for k, v in bounds.items() if k in LOW)
            self.range_text = f"x{'>' if key == 'gt' else '>='}{value}"
        else:
            self.range_text = "".join([*low, "x", *high])

    def __call__(self, text: str) -> Any:
        try:
            value = self.kind(text)
        except ValueError:
            raise typer.BadParameter(f"{text!r} is not a valid {self.kind.__name__}") from None
        if not all(getattr(operator, k)(value, v) for k, v in self.bounds.items()):
            raise typer.BadParameter(f"{value} is not in the range {self.range_text}")
        return value


LOW, HIGH = ("ge", "gt"), ("le", "lt")
"""A field's lower and upper bounds, as `setting` stores them (pydantic's names)."""


def _option(e: Entry, flag: str | tuple[str, ...], extra: Mapping[str, Any]) -> inspect.Parameter:
    """The typer parameter that sets the field of `e`."""
    (kind, repeated), extra, default = _kind(e.hint), dict(extra), e.default
    bounds = {k: v for k, v in e.field.metadata.items() if k in (*LOW, *HIGH)}
    strict = kind in (int, float) and {"gt", "lt"} & set(bounds)
    if kind in (int, float) and not strict:
        extra.update({k: bounds[b] for k, b in (("min", "ge"), ("max", "le")) if b in bounds})
    extra.update({"rich_help_panel": e.panel} if e.panel else {})
    if extra.pop("collect", None):  # given once per item, the texts read together (`run`)
        extra.setdefault("show_default", False)
        kind, default = list[str], None
    elif "parser" in extra:  # a collection given as one text that its parser reads
        extra.setdefault("show_default", extra.pop("spell", str)(default) or False)
        kind, default = str, None
    elif repeated:  # given once per item; left out, the config's value stays
        extra.setdefault("show_default", ", ".join(map(str, default)) or False)
        kind, default = list[kind], None
    names = (flag,) if isinstance(flag, str) else tuple(flag)  # the first, then aliases
    if kind is bool and default is not False:  # a flag off by default is only switched on
        names = (f"{names[0]}/--no-{names[0][2:]}",)
    if strict:  # typer's ranges are closed: the field's own bounds check it
        extra["parser"] = Bounded(kind, bounds)
    option = typer.Option(default, *names, help=e.help, **extra)
    return _param(e.key.replace(".", "__"), option, kind | None)


def _with_parameters(command: Callable, run: Callable, extra: list, drop: str = "") -> Callable:
    """`run`, wrapping `command`, shown to typer with `command`'s parameters (but `drop`)
    and the `extra` ones."""
    own, hints = inspect.signature(command), typing.get_type_hints(command)
    kept = [p.replace(annotation=hints.get(p.name, p.annotation))
            for p in own.parameters.values() if p.name != drop]  # fmt: skip
    parameters = sorted([*kept, *extra], key=lambda p: p.kind)
    run = functools.wraps(command)(run)
    run.__signature__ = own.replace(parameters=parameters)
    run.__annotations__ = {p.name: p.annotation for p in parameters}
    return run


def config_options(
    config: Any,
    *,
    into: str = "config",
    flags: Mapping[str, str | tuple[str, ...]] | None = None,
    required: Iterable[str] = (),
    settings: Mapping[str, Mapping[str, Any]] | None = None,
    leave_out: Iterable[str] = (),
) -> Callable[[Callable], Callable]:
    """Give a command one option per field of `config` (a class, or an instance whose
    values are the defaults) and of the configs it nests, and call it with the config
    built from them as its argument `into`: the defaults, then `--config FILE.yaml`,
    then the options given on the command line, each over the last.

    Per field (name or dotted path): `flags` renames its option (a tuple: the name, then
    aliases), `required` fields must end up set, `leave_out` fields are set by the command
    itself, `settings` adds typer.Option arguments, among them a `parser` (and `spell`, its
    inverse for the help) that reads the field from one text, or a `collect` that makes
    the field's value of the texts of an option given once per item (`KEY=VALUE` pairs
    into a mapping, say; a `ConfigError` for a text it cannot read)."""
    base = config() if isinstance(config, type) else config
    settings = dict(settings or {})
    collect = {k: s["collect"] for k, s in settings.items() if "collect" in s}
    parsed = {k for k, s in settings.items() if "parser" in s} | set(collect)
    rank = {p: i for i, p in enumerate(PANELS)}
    entries = sorted(_entries(base, set(leave_out), parsed), key=lambda e: rank.get(e.panel, 9))
    flag_of = _flags([e.key for e in entries], flags or {})
    made = [_option(e, flag_of[e.key], settings.get(e.key, {})) for e in entries]
    file_option = typer.Option(None, "--config", metavar="FILE.yaml", help=CONFIG_HELP)
    made = [_param("config_file__", file_option, Path | None), *made]
    made.append(_param("context__", inspect.Parameter.empty, typer.Context))

    def wrap(command: Callable) -> Callable:
        def run(**values: Any) -> Any:
            ctx, path, given = values.pop("context__"), values.pop("config_file__"), {}
            for key in (e.key for e in entries):
                value = values.pop(name := key.replace(".", "__"))
                source = getattr(ctx.get_parameter_source(name), "name", None)
                if source not in ("DEFAULT", "DEFAULT_MAP") and value is not None:
                    listed = isinstance(value, list) and key not in parsed
                    given[key] = tuple(value) if listed else value
                    if key in collect:
                        given[key] = collect[key](value)
            built = with_values(load_config(base, path) if path else base, given)
            for key in sorted(required):
                if not functools.reduce(getattr, key.split("."), built):
                    flag = flag_of[key] if isinstance(flag_of[key], str) else flag_of[key][0]
                    raise ConfigError(f"give {flag} (or {key}: in the --config file)")
            return command(**{into: built}, **values)

        run = _with_parameters(command, run, made, drop=into)
        # What the command exposes, for the test that holds every field to an option.
        run.config_options = ConfigOptions(base, tuple(flag_of), frozenset(leave_out))
        return run

    return wrap


def spelled_as(renames: Mapping[str, str]) -> Callable[[Callable], Callable]:
    """Answer another command's spelling of an option (`{"--n": "--samples"}`) with "did
    you mean": each old spelling is a hidden option that stops the command with one line."""
    hidden = {f"spelled_{old.lstrip('-').replace('-', '_')}": (old, new)
              for old, new in renames.items()}  # fmt: skip

    def wrap(command: Callable) -> Callable:
        def run(**values: Any) -> Any:
            for name, (old, new) in hidden.items():
                if values.pop(name) is not None:
                    raise typer.BadParameter(f"no option {old} here: did you mean {new}?")
            return command(**values)

        options = [_param(n, typer.Option(None, old, hidden=True), str | None)
                   for n, (old, _) in hidden.items()]  # fmt: skip
        return _with_parameters(command, run, options)

    return wrap

"""Command-line options made from a config dataclass: every field the code does not set
(`orchrm.configs.setting(internal=True)`) is an option, nested configs' fields too, each
taking its type, default, bounds, help and help panel from the field it sets
(`orchrm.configs`), so a default or a help text is written once, in the config. Every such
command also reads `--config FILE.yaml` (`orchrm.configs.load_config`), and the options
given on the command line override the file."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import typer

from orchrm.configs import (
    field_help,
    internal_inside,
    is_internal,
    load_config,
    nested_config,
    scalar_type,
    with_values,
)
from orchrm.errors import ConfigError

PANELS = ("Data", "Model", "Optimization", "Scale", "Selectors", "Output")
"""The order of the help panels that fields declare (`setting(panel=...)`); a panel not
named here follows them, in the order of the fields."""
_LEFT_OUT = ("DEFAULT", "DEFAULT_MAP")
"""Where an option's value comes from when the command line does not give it (the names
of click's `ParameterSource`s)."""
CONFIG_HELP = (
    "Read the settings from this YAML file (a run's config.yaml, or a recipe under "
    "configs/); the options given here override it."
)


def _option_type(hint: Any) -> Any:
    """`X | None` as `Optional[X]`, the spelling typer reads."""
    if isinstance(hint, types.UnionType):
        return typing.Union[hint.__args__]  # noqa: UP007
    return hint


def _bounds(meta: Mapping[str, Any]) -> dict[str, Any]:
    """typer.Option arguments for the bounds a field's `orchrm.configs.setting` declares."""
    return {k: meta[k] for k in ("min", "max") if k in meta}


def _with_choices(hint: Any, meta: Mapping[str, Any]) -> Any:
    """The field's type as a `Literal` of its declared choices, which typer shows and
    checks (`X | None` stays optional)."""
    if "choices" not in meta:
        return hint
    literal = typing.Literal[tuple(meta["choices"])]
    return literal | None if type(None) in typing.get_args(hint) else literal


def _repeated(hint: Any) -> bool:
    """Whether a field of type `hint` is a `tuple[X, ...]` of scalars."""
    args = typing.get_args(hint)
    return typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis


def _field_option(
    name: str, default: Any, hint: Any, *, help: str, flag: str, settings: Mapping[str, Any]
) -> inspect.Parameter:
    """The keyword parameter typer turns into the option `flag` for one field."""
    if "parser" in settings:
        # A field typed as a collection is given as one text that its parser reads
        # (click reports a text it refuses); left out, the field keeps the config's
        # value, which `spell` writes as such a text for the help.
        settings = dict(settings)
        spell = settings.pop("spell", str)
        if default is not ...:
            settings.setdefault("show_default", spell(default) or False)
            default = None
        hint = str | None
    elif _repeated(hint):
        # A `tuple[X, ...]` field is an option given once per item; left out, the field
        # keeps the config's value.
        if default is not ...:
            settings = {"show_default": ", ".join(map(str, default)) or False, **settings}
            default = None
        hint = list[typing.get_args(hint)[0]] | None
    if hint in (bool, bool | None):
        # A flag that is off by default is only switched on; one with a default of
        # None or True can be set either way.
        flag = flag if default is False else f"{flag}/--no-{flag[2:]}"
    option = typer.Option(default, flag, help=help, **settings)
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=_option_type(hint)
    )


@dataclasses.dataclass(frozen=True)
class ConfigOptions:
    """What `config_options` made of a config for one command."""

    config: Any
    """The defaults (an instance of the config class)."""
    options: tuple[str, ...]
    """The dotted path of every field that is an option."""
    left_out: frozenset[str]
    """Fields the command sets from its own arguments."""


@dataclasses.dataclass(frozen=True)
class _Entry:
    """One option a config gives: the field at `path` (names from the top config down)."""

    path: tuple[str, ...]
    field: dataclasses.Field
    hint: Any
    default: Any
    help: str
    panel: str | None

    @property
    def key(self) -> str:
        """The dotted path (`train.epochs`)."""
        return ".".join(self.path)

    @property
    def param(self) -> str:
        """The parameter's Python name (`train__epochs`)."""
        return "__".join(self.path)


def _entries(
    base: Any,
    leave_out: set[str],
    parsed: set[str],
    path: tuple[str, ...] = (),
    panel: str | None = None,
    inside_internal: tuple[str, ...] = (),
) -> list[_Entry]:
    """Every field of `base` that is an option, nested configs' fields in their place; a
    field whose type no option spells (a mapping) is read from a config file only, unless
    a `parser` is given for it."""
    cls = type(base)
    hints, helps = typing.get_type_hints(cls), field_help(cls)
    out = []
    for f in dataclasses.fields(cls):
        key = ".".join((*path, f.name))
        if is_internal(f) or f.name in inside_internal or key in leave_out:
            continue
        inner = nested_config(hints[f.name])
        if inner is not None:
            out += _entries(
                getattr(base, f.name),
                leave_out,
                parsed,
                (*path, f.name),
                f.metadata.get("panel", panel),
                internal_inside(f),
            )
            continue
        hint = hints[f.name]
        spellable = scalar_type(hint) is not None or _repeated(hint) or key in parsed
        if not spellable:
            continue
        if f.name not in helps:
            raise TypeError(f"{cls.__name__}.{f.name} has no help text")
        own_panel = panel or f.metadata.get("panel")
        out.append(
            _Entry((*path, f.name), f, hint, getattr(base, f.name), helps[f.name], own_panel)
        )
    return out


def _flags(entries: list[_Entry], renames: Mapping[str, str]) -> dict[str, str]:
    """Each entry's flag: `--name`, prefixed by the config it is in (`--train-seed`)
    where two entries share a name (a top-level field keeps its plain name)."""
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.path[-1]] = counts.get(e.path[-1], 0) + 1
    top = {e.path[-1] for e in entries if len(e.path) == 1}
    flags = {}
    for e in entries:
        name = e.path[-1]
        shared = counts[name] > 1 and not (len(e.path) == 1 and name in top)
        words = e.path if shared else (name,)
        flags[e.key] = renames.get(e.key, "--" + "-".join(words).replace("_", "-"))
    return flags


def _panel_rank(entries: list[_Entry]) -> dict[str | None, int]:
    seen = [e.panel for e in entries]
    order = [p for p in PANELS if p in seen]
    order += [p for p in dict.fromkeys(seen) if p not in order]
    return {p: i for i, p in enumerate(order)}


FILE_PARAM, CONTEXT_PARAM = "config_file__", "context__"


def _parameters(
    entries: list[_Entry],
    flag_of: Mapping[str, str],
    required: set[str],
    settings: Mapping[str, Mapping[str, Any]],
) -> list[inspect.Parameter]:
    """The `--config` parameter, one typer option per entry, and the command's context,
    which tells an option given on the command line from one left at its default."""
    made = [
        _field_option(
            e.param,
            None if e.key in required and not e.default else e.default,
            _with_choices(e.hint, e.field.metadata),
            help=e.help,
            flag=flag_of[e.key],
            settings={
                **_bounds(e.field.metadata),
                **({"rich_help_panel": e.panel} if e.panel else {}),
                **settings.get(e.key, {}),
            },
        )
        for e in entries
    ]
    config_file = inspect.Parameter(
        FILE_PARAM,
        inspect.Parameter.KEYWORD_ONLY,
        default=typer.Option(
            None, "--config", metavar="FILE.yaml", help=CONFIG_HELP, dir_okay=False
        ),
        annotation=typing.Optional[Path],  # noqa: UP045
    )
    context = inspect.Parameter(
        CONTEXT_PARAM, inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context
    )
    return [config_file, *made, context]


def _given(entries: list[_Entry], values: dict[str, Any], ctx, parsed: set[str]) -> dict:
    """The options the command line (or an environment variable) gave, by dotted path;
    `values` loses every entry's parameter."""
    given = {}
    for e in entries:
        value = values.pop(e.param)
        source = ctx.get_parameter_source(e.param)
        if getattr(source, "name", None) in _LEFT_OUT:
            continue  # left out: the file's value, else the config's
        if value is None and (e.key in parsed or _repeated(e.hint)):
            continue
        given[e.key] = tuple(value) if _repeated(e.hint) and e.key not in parsed else value
    return given


def config_options(
    config: Any,
    *,
    into: str = "config",
    flags: Mapping[str, str] | None = None,
    required: Iterable[str] = (),
    settings: Mapping[str, Mapping[str, Any]] | None = None,
    leave_out: Iterable[str] = (),
) -> Callable[[Callable], Callable]:
    """Give a command one option per field of the dataclass `config` (a class, or an
    instance whose values are the defaults) that the code does not set, and one per field
    of each config it nests; call it with the built config as its argument `into`: the
    defaults, then the `--config FILE.yaml` file's values, then the options given on the
    command line (or through their environment variable), each over the last.

    Declared exceptions, each keyed by field name or dotted path (`train.epochs`):
    `flags` renames options (default `--field-name`; `--config-name` for a nested field
    whose name another field shares), `required` fields must end up set (by an option or
    the file), `leave_out` fields are no options (the command sets them from its own
    arguments) and `settings` adds typer.Option arguments (`envvar`, ...), among them a
    `parser` (and `spell`, its inverse for the help): the field is then given as one text
    that the parser reads. Every option's field must have a help text."""
    base = config() if isinstance(config, type) else config
    settings = dict(settings or {})
    parsed = {k for k, s in settings.items() if "parser" in s}
    entries = _entries(base, set(leave_out), parsed)
    flag_of = _flags(entries, flags or {})
    rank = _panel_rank(entries)
    entries.sort(key=lambda e: rank[e.panel])
    required = set(required)
    made = _parameters(entries, flag_of, required, settings)
    exposed = ConfigOptions(base, tuple(e.key for e in entries), frozenset(leave_out))

    def wrap(command: Callable) -> Callable:
        own = inspect.signature(command)
        own_hints = typing.get_type_hints(command)
        kept = [
            p.replace(annotation=own_hints.get(p.name, p.annotation))
            for p in own.parameters.values()
            if p.name != into
        ]

        @functools.wraps(command)
        def run(**values: Any) -> Any:
            ctx, path = values.pop(CONTEXT_PARAM), values.pop(FILE_PARAM, None)
            given = _given(entries, values, ctx, parsed)
            built = load_config(base, path) if path is not None else base
            built = with_values(built, given)
            for key in sorted(required):
                if not _get(built, key):
                    raise ConfigError(f"give {flag_of[key]} (or {key}: in the --config file)")
            return command(**{into: built}, **values)

        parameters = sorted([*kept, *made], key=lambda p: p.kind)
        run.__signature__ = own.replace(parameters=parameters)  # type: ignore[attr-defined]
        # What the command exposes, for the test that holds every field to an option.
        run.config_options = exposed
        run.__annotations__ = {p.name: p.annotation for p in parameters}
        return run

    return wrap


def _get(config: Any, key: str) -> Any:
    for name in key.split("."):
        config = getattr(config, name)
    return config


def spelled_as(renames: Mapping[str, str]) -> Callable[[Callable], Callable]:
    """Answer another command's spelling of a notion (`{"--n": "--samples"}`) with "did
    you mean": each old spelling is a hidden option that, when given, stops the command
    with one line naming the option this command uses."""

    def wrap(command: Callable) -> Callable:
        own = inspect.signature(command)
        hidden = {
            f"_spelled_{old.lstrip('-').replace('-', '_')}": (old, new)
            for old, new in renames.items()
        }

        @functools.wraps(command)
        def run(**values: Any) -> Any:
            for name, (old, new) in hidden.items():
                if values.pop(name) is not None:
                    raise typer.BadParameter(f"no option {old} here: did you mean {new}?")
            return command(**values)

        extra = [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=typer.Option(None, old, hidden=True),
                annotation=typing.Optional[str],  # noqa: UP045
            )
            for name, (old, _) in hidden.items()
        ]
        parameters = sorted([*own.parameters.values(), *extra], key=lambda p: p.kind)
        run.__signature__ = own.replace(parameters=parameters)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in parameters}
        return run

    return wrap

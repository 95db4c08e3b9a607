"""Command-line options made from a config dataclass: each option takes its type, default
and help from the field it sets (`orchrm.configs.field_help`), so a default or a help
text is written once, in the config."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import typer

from orchrm.configs import field_help


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


def config_options(
    config: Any,
    names: Iterable[str],
    *,
    into: str = "config",
    flags: Mapping[str, str] | None = None,
    required: Iterable[str] = (),
    settings: Mapping[str, Mapping[str, Any]] | None = None,
) -> Callable[[Callable], Callable]:
    """Give a command one option per field in `names` of the dataclass `config` (a class,
    or an instance whose values are the defaults), and call it with the built config as
    its argument `into` (the defaults with the options given applied, `dataclasses.replace`).

    `flags` renames options (field -> `--flag`; default `--field-name`), `required` fields
    have no default, and `settings` adds typer.Option arguments per field (`min`,
    `envvar`, ...), among them a `parser` (and `spell`, its inverse for the help): the
    field is then given as one text that the parser reads (a comma-separated list), and
    keeps the config's value when left out. Every field named must have a help text."""
    base = config() if isinstance(config, type) else config
    cls = type(base)
    hints, helps = typing.get_type_hints(cls), field_help(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    names, required = list(names), set(required)
    parsed = [n for n, s in (settings or {}).items() if "parser" in s]
    repeated = [n for n in names if n not in parsed and _repeated(hints[n])]
    missing = [n for n in names if n not in helps]
    if missing:
        raise TypeError(f"{cls.__name__} fields without a help text: {', '.join(missing)}")
    made = [
        _field_option(
            name,
            ... if name in required else getattr(base, name),
            _with_choices(hints[name], fields[name].metadata),
            help=helps[name],
            flag=(flags or {}).get(name, "--" + name.replace("_", "-")),
            settings={**_bounds(fields[name].metadata), **(settings or {}).get(name, {})},
        )
        for name in names
    ]

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
            given = {n: values.pop(n) for n in names}
            for name in parsed + repeated:
                if given[name] is None:
                    del given[name]
                elif name in repeated:
                    given[name] = tuple(given[name])
            return command(**{into: dataclasses.replace(base, **given)}, **values)

        parameters = sorted([*kept, *made], key=lambda p: p.kind)
        run.__signature__ = own.replace(parameters=parameters)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in parameters}
        return run

    return wrap


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

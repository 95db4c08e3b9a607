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
    names, required = list(names), set(required)
    parsed = [n for n, s in (settings or {}).items() if "parser" in s]
    missing = [n for n in names if n not in helps]
    if missing:
        raise TypeError(f"{cls.__name__} fields without a help text: {', '.join(missing)}")
    made = [
        _field_option(
            name,
            ... if name in required else getattr(base, name),
            hints[name],
            help=helps[name],
            flag=(flags or {}).get(name, "--" + name.replace("_", "-")),
            settings=(settings or {}).get(name, {}),
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
            for name in parsed:
                if given[name] is None:
                    del given[name]
            return command(**{into: dataclasses.replace(base, **given)}, **values)

        parameters = sorted([*kept, *made], key=lambda p: p.kind)
        run.__signature__ = own.replace(parameters=parameters)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in parameters}
        return run

    return wrap

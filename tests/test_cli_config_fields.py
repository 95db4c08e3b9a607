"""Every field of a command's config reaches the user: an option, a key of the `--config`
file only (a mapping no option spells), set by the command from its own arguments
(declared per command), or marked internal by the config itself."""

from __future__ import annotations

import dataclasses
import typing

from orchrm.cli import app
from orchrm.configs import internal_inside, is_internal


def _commands(typer_app, prefix=()):
    for info in typer_app.registered_commands:
        name = info.name or info.callback.__name__.removesuffix("_command").replace("_", "-")
        yield (*prefix, name), info.callback
    for group in typer_app.registered_groups:
        yield from _commands(group.typer_instance, (*prefix, group.name))


def _fields(config, path=()):
    """(dotted path, field, type hint) of every field, nested configs' fields in their
    place; an internal field (and what it holds) is left out."""
    hints = typing.get_type_hints(type(config))
    for f in dataclasses.fields(config):
        if is_internal(f):
            continue
        key = ".".join((*path, f.name))
        inner = dataclasses.is_dataclass(hints[f.name])
        if inner:
            inside = internal_inside(f)
            for sub in _fields(getattr(config, f.name), (*path, f.name)):
                if sub[0].split(".")[len(path) + 1] not in inside:
                    yield sub
        else:
            yield key, f, hints[f.name]


def _file_only(hint) -> bool:
    """A mapping: no option spells one, a config file does."""
    return hint is dict or typing.get_origin(hint) is dict


def test_every_config_field_of_every_command_is_reachable():
    seen, unreachable = [], []
    for path, callback in _commands(app):
        exposed = getattr(callback, "config_options", None)
        if exposed is None:
            continue
        seen.append(" ".join(path))
        for key, _field, hint in _fields(exposed.config):
            if key in exposed.options or key in exposed.left_out or _file_only(hint):
                continue
            unreachable.append(f"orchrm {' '.join(path)}: {key} ({hint})")
    assert not unreachable, "config fields no option, file or argument sets:\n" + "\n".join(
        unreachable
    )
    # The commands built on a config (a new one is added here on purpose).
    assert sorted(seen) == sorted(
        [
            "train",
            "plan-memory",
            "evaluate-rm",
            "score",
            "view",
            "calibrate",
            "eval",
            "cross-validate",
            "demo",
            "serve",
            "rl",
            "run",
            "pairs mine",
        ]
    ), seen

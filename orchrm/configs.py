"""Config dataclasses on pydantic: `@config` makes a class a pydantic dataclass, which
validates every field's type and bounds whenever one is built (from code, a command line
or a file) and reads each field's help from the docstring written under it. A failed
check is a `ConfigError` naming the field. `setting` declares a field's default, bounds,
help panel and whether the code sets it. A config file is YAML whose keys are field
names (nested configs as nested mappings): `load_config` reads one, `dump_config` writes
the config a run resolved, which `load_config` reads back to the same config."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pydantic
import pydantic.dataclasses

from orchrm.errors import ConfigError, UnreadableConfig

PYDANTIC = pydantic.ConfigDict(
    use_attribute_docstrings=True,
    extra="forbid",
    arbitrary_types_allowed=True,
    allow_inf_nan=False,
)


def _message(err: pydantic.ValidationError, source: str) -> str:
    """The first problem of `err` on one line: where (`source`, the field's dotted
    path), what, and the value given."""
    first = err.errors(include_url=False)[0]
    if first["type"] == "value_error" and "error" in first.get("ctx", {}):
        what = str(first["ctx"]["error"])  # a check of the config's own
    else:
        where = ".".join(map(str, first["loc"]))
        said = first["msg"].replace("Input should", "should")
        what = f"{where} {said}, got {first['input']!r}"
    return f"{source}: {what}" if source else what


def config(cls: type | None = None, **kwargs: Any) -> Any:
    """Make `cls` a pydantic dataclass (`frozen=True` and the like pass through) whose
    construction raises `ConfigError` on a bad value."""

    def wrap(cls: type) -> type:
        made = pydantic.dataclasses.dataclass(cls, config=PYDANTIC, **kwargs)
        init = made.__init__

        def __init__(self, *args: Any, **values: Any) -> None:
            try:
                init(self, *args, **values)
            except pydantic.ValidationError as err:
                raise ConfigError(_message(err, "")) from None

        made.__init__ = __init__
        return made

    return wrap if cls is None else wrap(cls)


def setting(
    default: Any = dataclasses.MISSING,
    *,
    min: float | None = None,
    max: float | None = None,
    above: float | None = None,
    below: float | None = None,
    panel: str | None = None,
    internal: bool | tuple[str, ...] = False,
    **kw: Any,
) -> Any:
    """A config field: `min` and `max` are inclusive bounds (pydantic's `ge`, `le`),
    `above` and `below` strict ones (`gt`, `lt`); the option's help shows the same;
    `panel` names the group its command-line option is listed in; `internal=True` marks a
    field the code sets (no option, not read from or written to a file), and on a field
    holding another config, a tuple names that config's fields the code sets."""
    meta = {"ge": min, "le": max, "gt": above, "lt": below}
    meta |= {"panel": panel, "internal": internal or None}
    meta = {k: v for k, v in meta.items() if v is not None}
    return dataclasses.field(default=default, metadata=meta, **kw)


def field_help(cls: type) -> dict[str, str]:
    """Every documented field of the config class `cls` and its help, on one line; a field
    a config class inherits keeps its base's help."""
    helps: dict[str, str] = {}
    for klass in cls.__mro__:
        fields = getattr(klass, "__pydantic_fields__", {})
        for k, f in fields.items():
            if f.description and k not in helps:
                helps[k] = " ".join(f.description.split())
    return helps


def is_internal(f: dataclasses.Field) -> bool:
    """Whether the code sets the field `f` (`setting(internal=True)`)."""
    return f.metadata.get("internal") is True


def internal_inside(f: dataclasses.Field) -> tuple[str, ...]:
    """The fields of the config that `f` holds which the code sets."""
    return (
        tuple(f.metadata["internal"]) if not is_internal(f) and f.metadata.get("internal") else ()
    )


def config_dict(config: Any, *, leave_out: tuple[str, ...] = ()) -> dict[str, Any]:
    """`config` as plain data for a file: nested configs as mappings, tuples as lists,
    the fields the code sets (and `leave_out`) left out."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        if is_internal(f) or f.name in leave_out:
            continue
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            out[f.name] = config_dict(value, leave_out=internal_inside(f))
        else:
            out[f.name] = pydantic.TypeAdapter(Any).dump_python(value, mode="json")
    return out


def narrowed(config: Any, cls: type) -> Any:
    """`config`, of a class that adds fields to `cls` (a command's options beside the
    settings), as a `cls`: what a run writes to its config.yaml and the library reads."""
    return cls(**{f.name: getattr(config, f.name) for f in dataclasses.fields(cls) if f.init})


def _merged(base: Any, values: Mapping, source: str, prefix: str, fixed=()) -> dict[str, Any]:
    """The fields of `base` with `values` (a nested mapping) over them, nested configs as
    mappings; ConfigError for an unknown key, or one the code sets."""
    fields = {f.name: f for f in dataclasses.fields(base)}
    data = {name: getattr(base, name) for name, f in fields.items() if f.init}
    for key, value in values.items():
        f, name = fields.get(key), f"{prefix}{key}"
        if f is None:
            known = [n for n, g in fields.items() if not is_internal(g) and n not in fixed]
            near = difflib.get_close_matches(key, known, n=1)
            guess = f": did you mean {prefix}{near[0]}?" if near else ""
            raise ConfigError(f"{source}: unknown key {name!r}{guess} (known: {', '.join(known)})")
        if is_internal(f) or key in fixed:
            raise ConfigError(f"{source}: {name} is set by the command, not by a config file")
        inner = data[key]
        if dataclasses.is_dataclass(inner) and isinstance(value, Mapping):
            value = _merged(inner, value, source, f"{name}.", internal_inside(f))
        data[key] = value
    return data


def with_values(base: Any, values: Mapping[str, Any], source: str = "") -> Any:
    """`base` (a config) with `values` applied, each key a field name or a dotted path
    into nested configs (`train.epochs`), or a nested mapping; validated as a whole."""
    nested: dict[str, Any] = {}
    for key, value in values.items():
        *heads, last = key.split(".")
        inner = nested
        for head in heads:
            inner = inner.setdefault(head, {})
        inner[last] = value
    if not nested:
        return base
    data = _merged(base, nested, source, "")
    try:
        return type(base).__pydantic_validator__.validate_python(data)
    except pydantic.ValidationError as err:
        raise ConfigError(_message(err, source)) from None


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The mapping a YAML config file holds (an empty file: none); ConfigError naming the
    file when it cannot be read or holds something else."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise UnreadableConfig(f"{path}: cannot read the config file: {err.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: the config file is not UTF-8 text") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: not YAML{where}: {getattr(err, 'problem', err)}") from None
    if not isinstance(data, dict | None):
        raise ConfigError(
            f"{path}: a config file holds a mapping of keys, not a {type(data).__name__}"
        )
    return data or {}


def load_config(config: Any, path: str | Path) -> Any:
    """The config the YAML file `path` describes: `config` (a class, whose defaults
    apply, or an instance whose values do) with the file's keys applied."""
    base = config() if isinstance(config, type) else config
    return with_values(base, read_config_file(path), source=str(path))


def dump_config(config: Any, path: str | Path) -> Path:
    """Write `config` as YAML to `path` (atomically), such that `load_config` reads it
    back to the same config."""
    import yaml

    from orchrm.jsonl import atomic_file

    path = Path(path)
    with atomic_file(path) as f:
        f.write(yaml.safe_dump(config_dict(config), sort_keys=False, default_flow_style=False))
    return path

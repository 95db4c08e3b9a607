"""Every field of a command's config reaches the user: an option, a key of the `--config`
file only (a mapping no option spells), set by the command from its own arguments
(declared per command), or marked internal by the config itself."""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path

import yaml
from typer.testing import CliRunner

from orchrm.cli import app
from orchrm.configs import internal_inside, is_internal
from orchrm.jsonl import write_jsonl
from tests.samples import HIGH_DOM

CLI = Path(__file__).resolve().parents[1] / "orchrm" / "cli"


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
            "serve-llm",
            "rl",
            "run",
            "pairs mine",
            "parse",
            "ingest",
            "store stats",
            "pairs export",
            "world generate",
            "world stats",
        ]
    ), seen


def test_no_command_declares_an_option_of_its_own():
    """Every option is a config field (`config_options`): its default and help are written
    once, and `--config FILE.yaml` sets it too. Only the builder and the top-level app
    (--version, --verbose) spell typer options."""
    spelled = [
        path.name
        for path in sorted(CLI.glob("*.py"))
        if path.name not in ("__init__.py", "options.py") and "typer.Option(" in path.read_text()
    ]
    assert spelled == [], f"typer.Option( in {spelled}: give the command a config field instead"


def _ingest(tmp_path: Path, name: str, args: list[str]) -> tuple[int, list]:
    result = CliRunner().invoke(app, ["ingest", "--store", str(tmp_path / name), "--json", *args])
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else None


def test_a_config_file_sets_the_options_of_ingest_as_the_command_line_does(tmp_path):
    log = tmp_path / "custom.jsonl"
    good = {"q": "Half of one?", "plan": HIGH_DOM, "pred": "0.5", "gold": "0.5"}
    write_jsonl([good, {"plan": HIGH_DOM}], log)
    mapping = {"question": "q", "orchestration": "plan", "answer": "pred", "truth": "gold"}
    settings = {"adapter": "generic", "map": mapping, "domain": "math"}
    given = tmp_path / "ingest.yaml"
    given.write_text(yaml.safe_dump(settings))
    flags = ["--adapter", "generic", "--domain", "math"]
    flags += [arg for k, v in mapping.items() for arg in ("--map", f"{k}={v}")]
    from_file = _ingest(tmp_path, "a.duckdb", ["--config", str(given), str(log)])
    from_flags = _ingest(tmp_path, "b.duckdb", [*flags, str(log)])
    assert from_file == from_flags
    assert from_file[0] == 0
    assert [(s["adapter"], s["added"], s["malformed"]) for s in from_file[1]] == [("generic", 1, 1)]
    # --strict from the file: the malformed record keeps the file out (exit status 3).
    given.write_text(yaml.safe_dump({**settings, "strict": True}))
    strict_file = _ingest(tmp_path, "c.duckdb", ["--config", str(given), str(log)])
    strict_flags = _ingest(tmp_path, "d.duckdb", [*flags, "--strict", str(log)])
    assert strict_file == strict_flags
    assert strict_file[0] == 3 and strict_file[1][0]["error"]
    # An option given on the command line overrides the file.
    given.write_text(yaml.safe_dump({**settings, "adapter": "orchrm"}))
    overridden = _ingest(
        tmp_path, "e.duckdb", ["--config", str(given), "--adapter", "generic", str(log)]
    )
    assert overridden == from_file

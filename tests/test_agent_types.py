"""The sub-agent type registry (`orchrm.orchestration.agent_types`) is the one home of the
types: every per-type table covers exactly the registered types, the behaviour kept
elsewhere (the executor, the world) refuses to import without an entry for each, and
no other module of the package spells a type's name."""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import orchrm
from orchrm.orchestration import AGENT_REGISTRY, AGENT_TYPES, Agent, DoM, Orchestration
from orchrm.orchestration import agent_types as registry
from orchrm.orchestration.agent_types import RECONCILER, require_every_type
from orchrm.runtime import prompts
from orchrm.runtime.agents import SUB_AGENTS
from orchrm.runtime.config import RunConfig
from orchrm.runtime.executor import execute
from orchrm.world.model import PRIORS, SUCCESS
from tests.scripted_backend import ScriptedBackend

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "orchrm"
NAMES = set(AGENT_TYPES)

TABLE_PACKAGES = ("orchestration", "parse", "runtime", "world", "selection", "viewer")
"""The packages whose module-level per-type tables are found and checked."""
PARTIAL_TABLES = {
    "orchrm.selection.cost.DEFAULT_MEAN_CALLS": "the steps that stop early, of the types "
    "that have one",
    "orchrm.world.templates.DESCRIPTIONS": "the template plans' wording: no template plan "
    "uses a type that searches",
    "orchrm.world.templates.SINGLE": "the one-agent template plans, of the same types",
}
"""Tables keyed by some types on purpose, with the reason."""
KNOWN_TABLES = {
    "orchrm.runtime.agents.SUB_AGENTS",
    "orchrm.world.model.SUCCESS",
    "orchrm.world.model.PRIORS",
    "orchrm.world.tasks.TYPE_CUES",
    "orchrm.world.orchestrators.DESCRIPTIONS",
    "orchrm.orchestration.rm_text.TYPE_NAMES",
    "orchrm.viewer.graph.TYPE_COLOURS",
    "orchrm.selection.cost.FINAL_STEP",
    "orchrm.selection.cost.DEFAULT_CALL_TOKENS",
}
"""Tables the search must find (so the search itself is held to working)."""

# Where a type's name may be spelled in the package, and why.
ANYWHERE = {
    "orchrm/orchestration/agent_types.py": "the registry",
    "orchrm/runtime/agents.py": "the executor",
    "orchrm/world/model.py": "the world's behaviour: success and orchestrator priors",
}
DOCSTRINGS_ONLY = {
    "orchrm/runtime/config.py": "the help of a setting that one type reads",
    "orchrm/tasks/config.py": "the help of a setting that one type reads",
}
EXAMPLE_ONLY = {"orchrm/runtime/prompts.py": "_EXAMPLE_PLANS"}
"""File -> the one assignment there that may name types: a worked example's plans."""


def _per_type_tables() -> dict[str, set[str]]:
    """Every module-level dict of the `TABLE_PACKAGES` keyed by a registered type name (or
    by tuples starting with one): its dotted name -> the type names it covers."""
    found: dict[str, set[str]] = {}
    for package in TABLE_PACKAGES:
        base = importlib.import_module(f"orchrm.{package}")
        for info in pkgutil.walk_packages(base.__path__, f"orchrm.{package}."):
            module = importlib.import_module(info.name)
            for attr, value in vars(module).items():
                if isinstance(value, dict):
                    keys = {k[0] if isinstance(k, tuple) and k else k for k in value}
                    if any(isinstance(k, str) and k in NAMES for k in keys):
                        found[f"{info.name}.{attr}"] = keys
    return found


def test_the_registry_is_the_type_list():
    assert AGENT_TYPES == tuple(AGENT_REGISTRY) == tuple(k.name for k in AGENT_REGISTRY.values())
    assert RECONCILER in AGENT_REGISTRY


def test_every_per_type_table_covers_exactly_the_registered_types():
    tables = _per_type_tables()
    assert set(tables) >= KNOWN_TABLES, KNOWN_TABLES - set(tables)
    wrong = {
        name: sorted(keys ^ NAMES, key=str)
        for name, keys in tables.items()
        if keys != NAMES and name not in PARTIAL_TABLES
    }
    assert not wrong, f"tables that do not cover exactly {sorted(NAMES)}: {wrong}"
    for name in PARTIAL_TABLES.keys() & tables.keys():
        assert tables[name] <= NAMES, name


def test_behaviour_tables_are_keyed_by_the_registry():
    for table in (SUB_AGENTS, SUCCESS, PRIORS):
        assert set(table) == NAMES


@pytest.mark.parametrize(
    ("table", "first"),
    [
        ("orchrm.runtime.agents.SUB_AGENTS", ""),
        ("orchrm.world.model.SUCCESS", "orchrm.world.tasks"),
    ],
)
def test_a_type_registered_without_its_behaviour_stops_the_import(table, first):
    """A type added to the registry alone: the module of each behaviour table refuses to
    import, naming the table and the type (`first` is imported before the type is)."""
    module = table.rsplit(".", 1)[0]
    code = (
        "import dataclasses\n"
        f"{f'import {first}' if first else ''}\n"
        "from orchrm.orchestration import agent_types as r\n"
        "r.AGENT_REGISTRY['PlanAgent'] = dataclasses.replace(r.AGENT_REGISTRY['CoTAgent'],"
        " name='PlanAgent')\n"
        "r.AGENT_TYPES = tuple(r.AGENT_REGISTRY)\n"
        f"import {module}\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: " + table) and "no entry for PlanAgent" in last


def test_require_every_type_names_what_is_missing_and_what_is_unknown(monkeypatch):
    monkeypatch.setattr(registry, "AGENT_TYPES", (*AGENT_TYPES, "PlanAgent"))
    with pytest.raises(RuntimeError, match=r"SUB_AGENTS .*no entry for PlanAgent"):
        require_every_type(SUB_AGENTS, "SUB_AGENTS")
    with pytest.raises(RuntimeError, match="GhostAgent is not registered"):
        require_every_type([*registry.AGENT_TYPES, "GhostAgent"], "t")


def test_entries_are_consistent_with_runconfig_and_each_other():
    settings = {f.name for f in dataclasses.fields(RunConfig)}
    labels, colours = set(), set()
    for name, kind in AGENT_REGISTRY.items():
        steps = [s.name for s in kind.steps]
        assert kind.final_step in steps and len(set(steps)) == len(steps), name
        assert set(kind.parameters) <= settings, name
        assert {s.count for s in kind.steps if s.count} <= set(kind.parameters), name
        for s in kind.steps:
            assert len(s.tokens) == 2 and min(s.tokens) > 0, (name, s.name)
            assert s.mean_calls is None or s.count, (name, s.name)  # early stop needs a most
            assert not s.per_role or kind.min_roles >= 1, (name, s.name)
        assert bool(kind.roles) == bool(kind.min_roles) and len(kind.roles) >= kind.min_roles
        assert kind.descriptions and all(kind.descriptions) and kind.words and kind.prompt
        assert kind.template_descriptions and all(kind.template_descriptions), name
        assert kind.cues and all(kind.cues), name
        assert re.fullmatch(r"#[0-9a-f]{6}", kind.colour), name
        labels.add(kind.label)
        colours.add(kind.colour)
    assert len(labels) == len(colours) == len(AGENT_REGISTRY)


def test_each_executor_makes_the_steps_its_entry_names():
    """Run on a scripted backend, each type's calls are of its registered steps, the last
    one its `final_step` (the critic never accepts: every Reflexion step runs)."""
    for name, kind in AGENT_REGISTRY.items():
        agent = Agent("A", name, debate_roles=kind.roles or None)
        o = Orchestration(agents=(agent,), dom=DoM.HIGH)
        result = asyncio.run(execute(o, "Q?", ScriptedBackend(), RunConfig()))
        assert result.error is None, (name, result.error)
        made = [c.step for c in result.calls]
        assert set(made) <= {s.name for s in kind.steps}, (name, made)
        assert made[-1] == kind.final_step, (name, made)


@pytest.mark.parametrize("dom", ["low", "high"])
def test_the_orchestrator_prompt_lists_every_type(dom):
    text = prompts.orchestrator("What is 2 + 2?", dom)[0]["content"]
    for name, kind in AGENT_REGISTRY.items():
        assert f"- {name}: {kind.prompt}" in text
    assert f"<agent_name>{'|'.join(AGENT_TYPES)}</agent_name>" in text


def test_the_formats_doc_has_a_row_per_type():
    doc = (ROOT / "docs" / "formats.md").read_text()
    section = doc.split("### Sub-agent types", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE)
    assert rows == list(AGENT_TYPES)


def _allowed_lines(path: Path, rel: str) -> set[int] | None:
    """The lines of `path` where a type's name may appear (None: anywhere)."""
    if any(rel == k or (k.endswith("/") and rel.startswith(k)) for k in ANYWHERE):
        return None
    if rel not in DOCSTRINGS_ONLY and rel not in EXAMPLE_ONLY:
        return set()
    lines: set[int] = set()
    for node in ast.walk(ast.parse(path.read_text(), rel)):
        docstring = (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        )
        example = isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == EXAMPLE_ONLY.get(rel) for t in node.targets
        )
        if docstring or example:
            lines.update(range(node.lineno, node.end_lineno + 1))
    return lines


def test_only_the_registry_and_the_behaviour_spell_a_type_name():
    """A name spelled anywhere else would be one more place to edit for a new type."""
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, AGENT_TYPES)) + r")\b")
    stray = []
    for path in sorted(Path(orchrm.__file__).parent.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        allowed = _allowed_lines(path, rel)
        if allowed is None:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line) and n not in allowed:
                stray.append(f"{rel}:{n}: {line.strip()}")
    assert not stray, "type names outside the registry and the behaviour:\n" + "\n".join(stray)

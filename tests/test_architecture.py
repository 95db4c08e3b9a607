"""The package layout of docs/architecture.md: imports flow one way, from the
orchestration model to the command line, and the docs' links resolve."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from orchrm.orchestration import AGENT_TYPES

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "orchrm"

# The data flow, left to right: a module may import its own package, a shared module, or
# a package ranked at or before its own.
RANK = {
    "orchestration": 0,
    "parse": 1,
    "runtime": 2,
    "tasks": 3,
    "world": 4,
    "store": 5,
    "rmodel": 6,
    "scoring": 7,
    "calibration": 8,
    "training": 9,
    "memplan": 10,
    "selection": 11,
    "rl": 12,
    "serve": 13,
    "evaluation": 14,
    "viewer": 15,
    "experiments": 16,
    "cli": 17,
    "__main__": 18,
}
SHARED = {"__init__", "errors", "jsonl", "progress", "configs", "terminal"}


def _stage(dotted: str) -> str:
    """`orchrm.store.pairs` -> `store`; the package itself (`orchrm`) -> `__init__`."""
    return dotted.split(".")[1] if dotted.count(".") else "__init__"


def _is_module(name: str) -> bool:
    return (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").exists()


def _imports(path: Path) -> set[str]:
    """Every orchrm package a module imports, at its top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = (
                [node.module]
                if node.module != "orchrm"
                else [f"orchrm.{a.name}" if _is_module(a.name) else "orchrm" for a in node.names]
            )
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found |= {_stage(n) for n in names if n == "orchrm" or n.startswith("orchrm.")}
    return found


def test_imports_flow_one_way_through_the_stages():
    backwards = []
    for path in sorted(PACKAGE.rglob("*.py")):
        stage = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        if stage in SHARED:
            continue
        assert stage in RANK, f"{path}: a stage docs/architecture.md does not place"
        for imported in _imports(path) - SHARED - {stage}:
            if RANK[imported] > RANK[stage]:
                backwards.append(f"{path.relative_to(ROOT)} imports orchrm.{imported}")
    assert not backwards, "imports against the data flow:\n" + "\n".join(backwards)


def test_every_package_has_a_rank_of_its_own():
    assert len(set(RANK.values())) == len(RANK)


def _module_of(dotted: str) -> Path | None:
    """The file `orchrm.a.b` names: a module, a package's `__init__.py`, or None (a name
    inside a module)."""
    path = ROOT.joinpath(*dotted.split("."))
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return None


def _file_imports(path: Path) -> set[Path]:
    """Every orchrm file `path` imports, at its top, inside a function or for type
    checking: `from orchrm.a import b` counts `orchrm/a/b.py` when b is a module, else
    `orchrm/a/__init__.py`."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if not node.module.startswith("orchrm"):
                continue
            for alias in node.names:
                target = _module_of(f"{node.module}.{alias.name}") or _module_of(node.module)
                found.add(target)
        elif isinstance(node, ast.Import):
            found |= {_module_of(a.name) for a in node.names if a.name.startswith("orchrm")}
    return found - {None, path}


def test_no_file_imports_itself_through_others():
    """No import cycle between files (Tarjan's strongly connected components)."""
    graph = {p: _file_imports(p) for p in sorted(PACKAGE.rglob("*.py"))}
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node: Path) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(str(p.relative_to(ROOT)) for p in component))

    for node in graph:
        if node not in index:
            visit(node)
    assert not cycles, "files that import each other: " + "; ".join(map(" <-> ".join, cycles))


def test_the_shared_modules_import_no_stage():
    for name in sorted(SHARED - {"__init__"}):
        assert not (_imports(PACKAGE / f"{name}.py") - SHARED), name


TYPE_NAME_HOMES = {
    "orchrm/orchestration/agent_types.py": "the registry",
    "orchrm/runtime/agents.py": "the executor",
    "orchrm/world/model.py": "the world's success model",
}
"""The only files of the package that may write a sub-agent type's name as a string
literal; everywhere else a type is found through the registry's entries."""


def test_type_names_are_written_only_in_the_registry_the_executor_and_the_success_model():
    """A type's name in any other module would be one more place to edit for a new type."""
    names = set(AGENT_TYPES)
    stray = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in TYPE_NAME_HOMES:
            continue
        literals = sorted(
            (node.lineno, node.value)
            for node in ast.walk(ast.parse(path.read_text(), rel))
            if isinstance(node, ast.Constant) and node.value in names
        )
        stray += [f"{rel}:{line}: {name!r}" for line, name in literals]
    where = ", ".join(TYPE_NAME_HOMES)
    assert not stray, f"sub-agent type names outside {where}:\n" + "\n".join(stray)


def test_every_link_in_the_docs_resolves():
    done = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "check_links.py")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr

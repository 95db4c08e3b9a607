"""The package layout of docs/architecture.md: imports flow one way, from the
orchestration model to the command line, and the docs' links resolve."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

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
    "rm": 6,
    "bestofn": 7,
    "rl": 7,
    "serve": 7,
    "demo": 8,
    "demo_config": 8,
    "cli": 9,
    "__main__": 10,
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


def test_the_shared_modules_import_no_stage():
    for name in sorted(SHARED - {"__init__"}):
        assert not (_imports(PACKAGE / f"{name}.py") - SHARED), name


def test_every_link_in_the_docs_resolves():
    done = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "check_links.py")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr

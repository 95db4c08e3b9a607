"""Docs that cannot drift from the code.

- **The tree.** `docs/architecture.md`'s tree names every package and module of `orchrm/`,
  and nothing that is not there. A tree entry is a line of the tree's code block whose
  first word ends in `/` (a package) or `.py` (a module) and starts within the first
  `ENTRY_INDENT` columns; two more columns of indent nest an entry in the package above
  it; deeper lines continue the entry above them. A module `orchrm/P/M.py` is named when
  `M.py` appears (not right after a `/`) in the text of package `P`'s entry, or has an
  entry of its own; `__init__.py` files are their package's entry.
- **The tables.** The one-line-per-package table has a row for each stage ranked in
  `tests/test_architecture.py` (`__main__` aside), and the import order is those ranks, in
  order.
- **Dotted names.** No docstring (under `orchrm/` and `benchmarks/`) and no doc
  (`README.md`, `docs/*.md`) names an `orchrm.` path that does not import. A name is the
  longest run `orchrm.a.b.c` of identifiers joined by dots; it resolves as the longest
  prefix that is a module, then attributes of it (a dataclass field counts). Not module
  paths, and skipped: a name followed by `/` or `-` (the format names `orchrm.run/1`,
  `orchrm.rm-text/4`) and a name whose last part is a file suffix in `FILE_SUFFIXES`
  (`orchrm.json`, `orchrm.duckdb`).
- **File paths.** No docstring and no doc names an `orchrm/...` path (a run of
  identifiers joined by `/`, optionally ending in `.py`) that does not exist; a path with
  a capital letter is a placeholder (`orchrm/tasks/benchmarks/NAME.py`) or prose, and
  skipped.
- **Benchmarks stand alone.** No file under `benchmarks/` imports from `tests/`; nothing
  imports a script under `benchmarks/`: not the package, not the tests, not another
  script (as `benchmarks.NAME`, as a sibling `NAME`, relatively, or by name through
  `importlib` or `runpy`); and `docs/architecture.md`'s table of scripts has a row for
  each of them.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

from tests.test_architecture import RANK

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "orchrm"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
ENTRY_INDENT = 8
FILE_SUFFIXES = {"json", "jsonl", "duckdb", "yaml", "yml", "toml", "csv", "html", "md", "txt"}
_DOTTED = re.compile(r"(?<![\w./-])orchrm(?:\.[A-Za-z_]\w*)+")
_PATH = re.compile(r"(?<![\w./-])orchrm/[\w/]*\w(?:\.py)?")
_MODULE_WORD = re.compile(r"(?<![\w/.])(\w+)\.py\b")


def _section(text: str, heading: str) -> str:
    """The text of `## heading` up to the next `## `."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def _tree_entries() -> dict[str, str]:
    """Path under orchrm/ (`tasks/`, `tasks/run.py`, `demo.py`) -> the text of its entry."""
    tree = _section(ARCHITECTURE.read_text(encoding="utf-8"), "The tree")
    block = tree.split("```")[1]
    lines = block.splitlines()
    assert lines[1].strip() == "orchrm/", "the tree's code block opens with `orchrm/`"
    entries: dict[str, str] = {}
    stack: list[tuple[int, str]] = []  # (indent, package path) of the open packages
    current = None
    for line in lines[2:]:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        word, _, rest = line.strip().partition(" ")
        if indent <= ENTRY_INDENT and (word.endswith("/") or word.endswith(".py")):
            while stack and stack[-1][0] >= indent:
                stack.pop()
            current = (stack[-1][1] if stack else "") + word
            assert current not in entries, f"the tree names {current} twice"
            entries[current] = rest
            if word.endswith("/"):
                stack.append((indent, current))
        else:
            assert current is not None, f"a tree line before any entry: {line!r}"
            entries[current] += " " + line.strip()
    return entries


def _package_files() -> set[str]:
    """Every package (`tasks/`) and module (`tasks/run.py`) under orchrm/, as the tree
    writes them."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if path.name == "__init__.py":
            if rel.parent != Path("."):
                found.add(f"{rel.parent.as_posix()}/")
        else:
            found.add(rel.as_posix())
    return found


def _fix(path: str) -> str:
    """How to name `path` in the tree: in its package's entry, or as an entry."""
    parent, _, name = path.rstrip("/").rpartition("/")
    if path.endswith("/") or not parent:
        return f"give `{name}{'/' if path.endswith('/') else ''}` an entry"
    return f"add `{name}` to the text of the `{parent}/` entry"


def test_the_tree_names_every_package_and_module_and_nothing_else():
    entries = _tree_entries()
    named = set(entries)
    for path, text in entries.items():
        if path.endswith("/"):
            named |= {f"{path}{m}.py" for m in _MODULE_WORD.findall(text)}
    present = _package_files()
    missing = sorted(present - named)
    extra = sorted(named - present)
    where = "docs/architecture.md, ## The tree"
    problems = [f"orchrm/{p}: not named in {where} ({_fix(p)})" for p in missing]
    problems += [f"orchrm/{p}: named in {where}, but there is no such file" for p in extra]
    assert not problems, "\n".join(problems)


def test_the_package_table_and_the_import_order_follow_the_ranks():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `(\w+)` \|", _section(text, "The tree"), re.M))
    stages = set(RANK) - {"__main__"}
    assert rows == stages, (
        f"the package table of docs/architecture.md lacks {sorted(stages - rows)} "
        f"and names {sorted(rows - stages)}, which are not ranked packages"
    )
    order = _section(text, "Imports flow one way").split("```")[1]
    chain = [w for w in re.split(r"\s*->\s*|\s+", order) if w]
    ranks = sorted((r, n) for n, r in RANK.items() if n != "__main__")
    assert chain == [n for _, n in ranks], (
        f"docs/architecture.md's import order {' -> '.join(chain)} is not the ranks of "
        f"tests/test_architecture.py: {' -> '.join(n for _, n in ranks)}"
    )


def _docstrings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string that stands as a statement: docstrings of modules,
    classes and functions, and the docstrings of attributes."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [
        (node.lineno, node.value.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ]


def _names(text: str) -> list[tuple[int, str]]:
    """(line offset in `text`, dotted name) of every `orchrm.` module path in `text`."""
    found = []
    for match in _DOTTED.finditer(text):
        following = text[match.end() : match.end() + 1]
        name = match.group(0)
        if following in ("/", "-") or name.rsplit(".", 1)[-1] in FILE_SUFFIXES:
            continue
        found.append((text.count("\n", 0, match.start()), name))
    return found


def _unresolved(name: str) -> str | None:
    """Why `name` does not import, or None when it does."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        module = ".".join(parts[:n])
        try:
            spec = importlib.util.find_spec(module)
        except ModuleNotFoundError:
            spec = None
        if spec is not None:
            break
    obj = importlib.import_module(module)
    for k, attr in enumerate(parts[n:], n):
        fields = getattr(obj, "__dataclass_fields__", {})
        if hasattr(obj, attr):
            obj = getattr(obj, attr)
        elif attr in fields and k == len(parts) - 1:
            return None
        else:
            return f"{'.'.join(parts[:k])} has no {attr}"
    return None


def _paths(text: str) -> list[tuple[int, str]]:
    """(line offset in `text`, path) of every `orchrm/` file path in `text`."""
    return [
        (text.count("\n", 0, m.start()), m.group(0))
        for m in _PATH.finditer(text)
        if m.group(0) == m.group(0).lower()
    ]


def _every_name(find=_names) -> list[tuple[Path, int, str]]:
    """(file, line, name) of every name `find` sees in the docs and the docstrings."""
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        found += [(page, 1 + line, name) for line, name in find(text)]
    for source in sorted([*PACKAGE.rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")]):
        for start, text in _docstrings(source):
            found += [(source, start + line, name) for line, name in find(text)]
    return found


def test_every_orchrm_path_in_the_docs_and_docstrings_exists():
    paths = _every_name(_paths)
    assert len(paths) > 20, "the scan finds the paths the docs are known to hold"
    broken = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path, line, name in paths
        if not (ROOT / name).exists()
    ]
    assert not broken, "paths that do not exist:\n" + "\n".join(broken)


def test_every_dotted_name_in_the_docs_and_docstrings_imports():
    names = _every_name()
    assert len(names) > 50, "the scan finds the names the docs are known to hold"
    checked: dict[str, str | None] = {}
    broken = []
    for path, line, name in names:
        if name not in checked:
            checked[name] = _unresolved(name)
        if checked[name]:
            broken.append(f"{path.relative_to(ROOT)}:{line}: {name} ({checked[name]})")
    assert not broken, "names that do not import:\n" + "\n".join(broken)


def test_the_name_rule_skips_format_names_and_files():
    text = (
        "orchrm.run/1, orchrm.rm-text/4, orchrm.json, `orchrm.tasks.grading.grade` and x.orchrm.y"
    )
    assert [n for _, n in _names(text)] == ["orchrm.tasks.grading.grade"]
    assert _unresolved("orchrm.tasks.grading.grade") is None
    assert _unresolved("orchrm.tasks.config.SampleRunConfig.benchmark") is None
    assert _unresolved("orchrm.grading.answer_key") == "orchrm has no grading"
    assert _unresolved("orchrm.tasks.grading.nothing") == "orchrm.tasks.grading has no nothing"
    paths = "`orchrm/tasks/run.py`, orchrm/serve/, orchrm/tasks/benchmarks/NAME.py, x/orchrm/y"
    assert [p for _, p in _paths(paths)] == ["orchrm/tasks/run.py", "orchrm/serve"]


SCRIPTS = ROOT / "benchmarks"
_LOADERS = {"import_module", "__import__", "run_module", "run_path", "spec_from_file_location"}


def _imported(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of everything `path` imports, at its top, inside a function or
    for type checking: an import statement's modules (`from a import b` gives `a` and
    `a.b`; a relative one gives `.`), and a string constant handed to `importlib`'s or
    `runpy`'s loaders (a file path with its `/` as dots and without `.py`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                found.append((node.lineno, "."))
            elif node.module:
                found.append((node.lineno, node.module))
                found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.Call) and node.args:
            called = node.func.attr if isinstance(node.func, ast.Attribute) else None
            called = node.func.id if isinstance(node.func, ast.Name) else called
            first = node.args[-1] if called == "spec_from_file_location" else node.args[0]
            if called in _LOADERS and isinstance(first, ast.Constant):
                name = str(first.value).removeprefix("./").removesuffix(".py")
                found.append((node.lineno, name.replace("/", ".")))
    return found


def _imports_tests(path: Path) -> list[int]:
    """Lines where `path` imports the tests package."""
    return sorted({line for line, m in _imported(path) if m == "tests" or m.startswith("tests.")})


def _imports_scripts(path: Path, scripts: set[str]) -> list[int]:
    """Lines where `path` imports a script of `benchmarks/` (`scripts`: their names
    without `.py`): as the `benchmarks` package, as a sibling module (a script run from
    `benchmarks/` finds its siblings), or relatively."""
    lines = set()
    for line, name in _imported(path):
        top = name.split(".")[0]
        if name == "." or top == "benchmarks" or top in scripts:
            lines.add(line)
    return sorted(lines)


def test_no_benchmark_imports_from_tests():
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted(SCRIPTS.rglob("*.py"))
        for line in _imports_tests(path)
    ]
    assert not found, "benchmarks import from tests/: " + ", ".join(found)


def test_nothing_imports_a_benchmark_script():
    scripts = {p.stem for p in SCRIPTS.rglob("*.py")}
    sources = [*PACKAGE.rglob("*.py"), *(ROOT / "tests").rglob("*.py"), *SCRIPTS.rglob("*.py")]
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted(sources)
        for line in _imports_scripts(path, scripts)
    ]
    assert not found, (
        "these import a script of benchmarks/ (what a script shares belongs in the "
        "package): " + ", ".join(found)
    )


def test_every_benchmark_script_has_a_row():
    section = _section(ARCHITECTURE.read_text(encoding="utf-8"), "Benchmarks and tests")
    rows = set(re.findall(r"^\| `(\w+\.py)` \|", section, re.M))
    scripts = {p.name for p in (ROOT / "benchmarks").glob("*.py")}
    assert rows == scripts, (
        f"docs/architecture.md, ## Benchmarks and tests: no row for {sorted(scripts - rows)}; "
        f"rows for {sorted(rows - scripts)}, which benchmarks/ does not hold"
    )


def test_the_import_check_sees_every_form(tmp_path):
    path = tmp_path / "b.py"
    path.write_text("import tests.samples\nfrom tests import x\nimport testsuite\n")
    assert _imports_tests(path) == [1, 2]
    path.write_text(
        "import benchmarks.serve_load\n"
        "from benchmarks import gpu_check\n"
        "from world_pairs import SAMPLES\n"
        "from . import x\n"
        "import importlib, runpy\n"
        "importlib.import_module('benchmarks.rm_score')\n"
        "runpy.run_path('benchmarks/real_exec.py')\n"
        "__import__('long_render')\n"
        "import orchrm.experiments.serve_load.loadgen\n"
        "from orchrm.world import generate\n"
        "importlib.import_module('orchrm.serve')\n"
    )
    scripts = {"serve_load", "gpu_check", "world_pairs", "rm_score", "real_exec", "long_render"}
    assert _imports_scripts(path, scripts) == [1, 2, 3, 4, 6, 7, 8]

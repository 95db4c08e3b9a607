"""Check that the documentation's links resolve.

    .venv/bin/python docs/check_links.py

Every relative Markdown link in README.md and docs/*.md must name an existing file and,
with `#anchor`, a heading of that file (GitHub's anchor rules). Every `docs/NAME.md#anchor`
pointer in a docstring or comment under orchrm/ and benchmarks/ must resolve the same
way. Prints each broken link with its file and exits 1 if there is any.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_POINTER = re.compile(r"docs/(\w[\w\-]*\.md)(?:#([\w\-]+))?")
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    kept = "".join(c for c in heading.strip().lower() if c.isalnum() or c in "-_ ")
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of every heading of a Markdown page, code blocks left out."""
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def broken_in_markdown(page: Path) -> list[str]:
    """`page: target` for each relative link of a Markdown page that does not resolve."""
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    broken = []
    for match in _LINK.finditer(text):
        target = match.group(1)
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, fragment = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() or (
            fragment and file.suffix == ".md" and fragment not in anchors(file)
        ):
            broken.append(f"{page.relative_to(ROOT)}: {target}")
    return broken


def broken_in_code(source: Path) -> list[str]:
    """`source: pointer` for each `docs/NAME.md#anchor` in a source file that does not resolve."""
    broken = []
    for match in _POINTER.finditer(source.read_text(encoding="utf-8")):
        page = ROOT / "docs" / match.group(1)
        fragment = match.group(2)
        if not page.exists() or (fragment and fragment not in anchors(page)):
            broken.append(f"{source.relative_to(ROOT)}: {match.group(0)}")
    return broken


def main() -> int:
    """Print every broken link; 1 if there is any, else 0."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    sources = sorted([*ROOT.glob("orchrm/**/*.py"), *ROOT.glob("benchmarks/*.py")])
    broken = [b for p in pages for b in broken_in_markdown(p)]
    broken += [b for s in sources for b in broken_in_code(s)]
    for line in broken:
        print(f"broken link: {line}")
    print(f"{len(pages)} pages and {len(sources)} source files checked, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())

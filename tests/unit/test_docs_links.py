"""Every link between the README and the documents under docs/ leads somewhere: a
relative link names a file that exists, and its ``#anchor`` a heading of that file (as
GitHub makes anchors of headings). The README stays short enough to read in five minutes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.MULTILINE)


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {anchor(h) for h in HEADING.findall(FENCE.sub("", path.read_text()))}


def broken(path: Path) -> list[str]:
    found = []
    for target in LINK.findall(FENCE.sub("", path.read_text())):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, fragment = target.partition("#")
        goal = (path.parent / file).resolve() if file else path
        if not goal.exists():
            found.append(f"{target}: no such file")
        elif fragment and goal.suffix == ".md" and fragment not in anchors(goal):
            found.append(f"{target}: no such heading in {goal.name}")
    return found


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_every_link_leads_somewhere(path: Path) -> None:
    assert broken(path) == []


def test_the_anchor_of_a_heading_is_githubs() -> None:
    assert anchor("A registry for development: `eos dev-registry`") == (
        "a-registry-for-development-eos-dev-registry"
    )
    assert anchor("Health: `GET /health`") == "health-get-health"


def test_every_document_is_reachable_from_the_readme() -> None:
    readme = (REPO / "README.md").read_text()
    reached = {Path(t.partition("#")[0]).name for t in LINK.findall(readme)}
    assert [p.name for p in DOCUMENTS[1:] if p.name not in reached] == []


def test_the_readme_is_read_in_five_minutes() -> None:
    assert len((REPO / "README.md").read_bytes()) <= 8 * 1024

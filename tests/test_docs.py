"""The documentation a person finds their way in: a short README, and no relative link that leads nowhere."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lowercase, punctuation dropped, spaces as hyphens."""
    found: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text())):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        candidate, count = slug, 0
        while candidate in found:
            count += 1
            candidate = f"{slug}-{count}"
        found.add(candidate)
    return found


def relative_links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text())
    return [link for link in LINK.findall(text) if not re.match(r"^[a-z]+:", link)]


def test_the_readme_is_a_page_not_a_manual() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


def test_the_anchor_rule_matches_githubs() -> None:
    page = ROOT / "docs" / "configuration.md"
    assert "gpu-tenancyhost-required" in anchors(page)
    assert "stack-outputs" in anchors(page)


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for link in relative_links(page):
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{link}: no heading with that anchor in {target.name}")
    assert broken == []

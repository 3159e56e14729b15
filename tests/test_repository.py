"""The repository itself: no stray binaries, no fact kept that nothing uses, one figure for the suite's time."""

import ast
import re
import subprocess

import pytest

from harness import ROOT

MAX_TRACKED_BYTES = 1_000_000
"""Source, docs and small fixtures only: a wheel, an archive or a chart belongs to a registry, not to git."""


def _tracked() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=False)
    if listed.returncode != 0:
        pytest.fail(f"`git ls-files` failed ({listed.stderr.strip()}): run the tests from a git checkout")
    return [name for name in listed.stdout.split("\0") if name]


def test_no_tracked_file_is_over_one_megabyte() -> None:
    sizes = {name: (ROOT / name).stat().st_size for name in _tracked() if (ROOT / name).is_file()}
    assert sizes, "the checkout tracks files"
    assert {name: size for name, size in sizes.items() if size > MAX_TRACKED_BYTES} == {}


def _upstream_facts() -> list[str]:
    tree = ast.parse((ROOT / "config" / "upstream.py").read_text())
    names = []
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        names += [t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper()]
    return names


def test_every_upstream_fact_is_used() -> None:
    """A fact kept with its citation but read by nothing (program, stand-ins or tests) is dead weight that looks like
    a guarantee."""
    sources = (
        "\n".join(
            path.read_text()
            for root in ("components", "config", "fairshare", "harness", "tests", "benchmarks")
            for path in (ROOT / root).rglob("*.py")
        )
        + (ROOT / "__main__.py").read_text()
    )
    facts = _upstream_facts()
    assert len(facts) > 50
    assert [name for name in facts if len(re.findall(rf"\b{name}\b", sources)) < 2] == []


SUITE_TIME = re.compile(
    r"(?:suite|pytest|\.ci/run)[^.\n]*?\b(?:\d+(?:\.\d+)?|half a|a) (?:minutes?|seconds?)", re.IGNORECASE
)


def test_the_suites_time_is_stated_in_one_place() -> None:
    pages = [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / ".ci" / "run", *(ROOT / "docs").glob("*.md")]
    stated = {page.name: SUITE_TIME.findall(page.read_text()) for page in pages}
    assert {name: found for name, found in stated.items() if found and name != "development.md"} == {}
    assert len(stated["development.md"]) == 1, stated["development.md"]

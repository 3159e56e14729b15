"""The documentation a person finds their way in: a short README, and no relative link that leads nowhere."""

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from config.issues import ConfigError
from config.sources import load_settings
from config.versions import VersionsConfig
from fairshare.cli import main as fairshare_main
from harness import dev_settings, run_main
from harness.check import check

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
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


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


def _readme_section(heading: str) -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(f"## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _readme_sessions() -> dict[str, list[str]]:
    """The README's first-results block: each `$ command` and the lines shown under it."""
    shown = re.search(r"```\n(\$ .*?)```", _readme_section("First results, offline"), re.DOTALL)
    assert shown is not None
    sessions: dict[str, list[str]] = {}
    for line in shown.group(1).splitlines():
        if line.startswith("$ "):
            command = line.removeprefix("$ ")
            sessions[command] = []
        else:
            sessions[command].append(line)
    return sessions


def test_the_readme_plan_is_what_the_planner_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """All of it, as a newcomer sees it: the table and the lines under it."""
    assert fairshare_main(["--stack", "dev"]) == 0
    printed = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    assert printed == _readme_sessions()["venv/bin/python -m fairshare --stack dev"]


def test_the_readme_check_shows_the_reference_stacks_warnings_and_count(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    assert check("dev") == 0
    out, err = capsys.readouterr()
    shown = _readme_sessions()["venv/bin/python -m harness.check dev"]
    assert shown == [*err.splitlines(), out.splitlines()[0]], "every warning, then the count"


def test_the_readme_onboarding_example_is_valid_and_changes_what_it_says() -> None:
    block = re.search(r"```yaml\n(.*?)```", _readme_section("Onboarding a team"), re.DOTALL)
    assert block is not None
    example = yaml.safe_load(block.group(1))
    before = dev_settings()
    after = dev_settings()
    after["queues"] = example["gpu-tenancy:queues"]
    after["tenants"].append(example["gpu-tenancy:tenants"][-1])
    load_settings(after)
    old = {r.urn: r for r in run_main(before, {}).registrations}
    new = {r.urn: r for r in run_main(after, {}).registrations}
    assert old.keys() <= new.keys(), "adding a team removes nothing"
    assert all("team-speech" in new[urn].name for urn in new.keys() - old.keys())
    updated = sorted(new[urn].name for urn in old.keys() & new.keys() if old[urn].inputs != new[urn].inputs)
    assert updated == [
        "node-ports-write",
        "observability-dashboards",
        "observability-team-views-config",
        "observability-team-views-grafana",
        "observability-team-views-secret",
        "queues-team-nlp",
        "queues-team-recommender",
        "queues-team-vision",
    ]


def _table_keys(page: str, heading: str) -> set[str]:
    """The first column of the table under `## heading` in docs/<page>."""
    text = (ROOT / "docs" / page).read_text()
    start = text.index(f"## {heading}")
    section = text[start : text.find("\n## ", start + 1)]
    return set(re.findall(r"^\| `([^`]+)` \|", section, re.MULTILINE))


def test_the_versions_table_lists_every_version_key() -> None:
    keys = {field.alias or name for name, field in VersionsConfig.model_fields.items()}
    assert keys <= _table_keys("configuration.md", "`gpu-tenancy:versions` (required)")


def _problems(config: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        load_settings(config)
    return raised.value.problems


def test_the_error_examples_in_the_configuration_page_are_what_the_program_says() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    shown = re.search(r"```\nInvalid stack config:\n(.*?)```", text, re.DOTALL)
    assert shown is not None
    queues = dev_settings()
    queues["queues"][1]["resources"]["gpu"]["limit"] = 0.2
    queues["queues"][2]["resources"]["gpu"]["overQuotaWieght"] = 1
    queues["host"]["workers"] = "two"
    host = {**dev_settings(), "host": {"mode": "kubeconfig", "address": "203.0.113.10", "cloud": "nebius"}}
    said = {f"  - {problem}" for config in (queues, host) for problem in _problems(config)}
    assert set(shown.group(1).splitlines()) <= said

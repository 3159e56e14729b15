"""The manifests of docs/teams.md, as a team copies them from the page: every test of a team's first day reads
them from here, so the page and the tests cannot drift apart."""

import re
from typing import Any

import yaml

from harness import ROOT

Json = dict[str, Any]
TEAMS_PAGE = ROOT / "docs" / "teams.md"


def page_manifests() -> dict[str, Json]:
    """`Kind/name` -> the manifest, for every YAML block on the page."""
    blocks = re.findall(r"```yaml\n(.*?)```", TEAMS_PAGE.read_text(), flags=re.S)
    documents = [doc for block in blocks for doc in yaml.safe_load_all(block) if doc]
    return {f"{m['kind']}/{m['metadata']['name']}": m for m in documents}

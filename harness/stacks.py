"""The reference stack's settings, as the program reads them from `Pulumi.dev.yaml`."""

import copy
from typing import Any

from config.sources import read_stack_document
from harness.program import ROOT


def dev_settings() -> dict[str, Any]:
    """`gpu-tenancy:*` settings of Pulumi.dev.yaml, keyed without the project prefix; a fresh copy each call."""
    return copy.deepcopy(read_stack_document(ROOT / "Pulumi.dev.yaml").settings)


def stack_with_teams(teams: int) -> dict[str, Any]:
    """The reference stack with `teams` teams, each on a leaf queue with one GPU of quota."""
    config = dev_settings()
    names = [f"team-{index:04d}" for index in range(teams)]
    config["queues"] = [{"name": "ml-org", "resources": {"gpu": {"quota": max(teams, 1)}}}] + [
        {"name": name, "parentQueue": "ml-org", "resources": {"gpu": {"quota": 1}}} for name in names
    ]
    config["tenants"] = [{"name": name, "queue": name} for name in names]
    return config

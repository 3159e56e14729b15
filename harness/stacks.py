"""The reference stack's settings, as the program reads them from `Pulumi.dev.yaml`."""

import copy
from typing import Any

import yaml

from config.sources import split_project_keys
from harness.program import ROOT


def dev_settings() -> dict[str, Any]:
    """`gpu-tenancy:*` settings of Pulumi.dev.yaml, keyed without the project prefix; a fresh copy each call."""
    document = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    return copy.deepcopy(split_project_keys(document["config"]))

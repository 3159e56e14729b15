"""The reference stack's settings, as the program reads them from `Pulumi.dev.yaml`."""

import copy
from typing import Any

from config.sources import read_stack_document
from harness.program import ROOT


def dev_settings() -> dict[str, Any]:
    """`gpu-tenancy:*` settings of Pulumi.dev.yaml, keyed without the project prefix; a fresh copy each call."""
    return copy.deepcopy(read_stack_document(ROOT / "Pulumi.dev.yaml").settings)

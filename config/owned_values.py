"""Helm values the platform sets itself, which a stack's `values` may add to but never change.

Each chart this program installs has a few values that another part of the
platform relies on (queue pinning, GPU sharing, the readiness gates). A user
value at one of those paths would break that part silently, so it is refused
with the reason.
"""

from collections.abc import Mapping
from typing import Any

from config.issues import ConfigIssue

OwnedValues = Mapping[tuple[str, ...], str]
"""Value paths, each with why the platform owns it."""

_ABSENT = object()


def owned_value_issues(values: Mapping[str, Any], owned: OwnedValues) -> list[ConfigIssue]:
    """One issue per owned path the user's `values` sets, at `values.<path>`."""
    issues = []
    for path, reason in owned.items():
        node: Any = values
        for key in path:
            node = node.get(key, _ABSENT) if isinstance(node, Mapping) else _ABSENT
        if node is not _ABSENT:
            issues.append(ConfigIssue(("values", *path), node, f"is set by gpu-tenancy: {reason}"))
    return issues

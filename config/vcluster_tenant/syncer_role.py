"""The syncer's host ClusterRole: the chart's, without its read of every team's pods.

With node sync (which the platform turns on, so teams see the GPU nodes) the vCluster chart lets each tenant's
syncer get, list and watch pods in every namespace, for a cache only the virtual scheduler uses
(config/upstream.py VCLUSTER_CHART_CLUSTER_RULES). A team that took over its own control plane's ServiceAccount
would read every other team's pods, their env and the ServiceAccount tokens the syncer writes into their
annotations. The platform sets `rbac.clusterRole.overwriteRules` to the chart's rules without that read: sound for
a chart version whose rules were read, and for a tenant whose values leave the ClusterRole as the platform's values
make it. Otherwise the tenant keeps the chart's ClusterRole, with a preview warning.
"""

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from config.upstream import CLUSTER_WIDE_POD_READ, VCLUSTER_CHART_CLUSTER_RULES, VCLUSTER_CLUSTER_ROLE_INPUTS

Path = tuple[str, ...]


def _leaves(values: Mapping[str, Any], at: Path = ()) -> Iterator[Path]:
    for key, value in values.items():
        if isinstance(value, Mapping) and value:
            yield from _leaves(value, (*at, key))
        else:
            yield (*at, key)


def _related(a: Path, b: Path) -> bool:
    """One path is the other or lies under it."""
    return a[: len(b)] == b or b[: len(a)] == a


def syncer_role_blocker(values: Mapping[str, Any], version: str) -> str | None:
    """Why a tenant with these vCluster values at this chart version keeps the chart's host ClusterRole (and gets no
    queue view); None if the platform's narrowed one applies."""
    if version not in VCLUSTER_CHART_CLUSTER_RULES:
        known = ", ".join(sorted(VCLUSTER_CHART_CLUSTER_RULES))
        return f"the syncer's host ClusterRole of vCluster {version} has not been read (read: {known})"
    for leaf in _leaves(values):
        if any(_related(leaf, path) for path in VCLUSTER_CLUSTER_ROLE_INPUTS):
            return f"its values set {'.'.join(leaf)}, which shapes the syncer's host ClusterRole"
    return None


def syncer_cluster_rules(version: str) -> list[dict[str, Any]]:
    """The chart's rules at `version`, without the read of every namespace's pods."""
    rules = []
    for rule in VCLUSTER_CHART_CLUSTER_RULES[version]:
        narrowed = copy.deepcopy(dict(rule))
        narrowed["resources"] = [r for r in narrowed["resources"] if r != CLUSTER_WIDE_POD_READ]
        rules.append(narrowed)
    return rules


def syncer_role_values(version: str) -> dict[str, Any]:
    """The vCluster values that give the syncer the narrowed ClusterRole."""
    return {"rbac": {"clusterRole": {"overwriteRules": syncer_cluster_rules(version)}}}

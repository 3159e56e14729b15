"""Whether a tenant gets the queue view inside its vCluster, and the vCluster values that give it.

The view is a host ConfigMap the gang controller writes (components/gang_controller/gangcontrol/queue_view.py);
the tenant's syncer copies it in through `sync.fromHost.configMaps`, mapped from the syncer's own namespace
(a key "/<name>": loft-sh/vcluster pkg/syncer/translator/from_config_translator.go @v0.35.1). The chart would
also grant that syncer list and watch of every ConfigMap on the host, so the platform replaces the ClusterRole's
rules with those the chart renders without the mapping (config/upstream.py VCLUSTER_SYNCER_CLUSTER_RULES). That
is sound only for a chart version whose rules were read, and for a tenant whose values leave the ClusterRole as
the platform's values make it: otherwise the tenant keeps the chart's own ClusterRole and has no view.
"""

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from config.names import QUEUE_VIEW_CONFIGMAP, QUEUE_VIEW_IN_TENANT
from config.upstream import VCLUSTER_CLUSTER_ROLE_INPUTS, VCLUSTER_SYNCER_CLUSTER_RULES

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


def queue_view_blocker(values: Mapping[str, Any], version: str) -> str | None:
    """Why a tenant with these vCluster values at this chart version gets no queue view; None if it gets one."""
    if version not in VCLUSTER_SYNCER_CLUSTER_RULES:
        known = ", ".join(sorted(VCLUSTER_SYNCER_CLUSTER_RULES))
        return f"the syncer's host ClusterRole of vCluster {version} has not been read (read: {known})"
    for leaf in _leaves(values):
        if any(_related(leaf, path) for path in VCLUSTER_CLUSTER_ROLE_INPUTS):
            return f"its values set {'.'.join(leaf)}, which shapes the syncer's host ClusterRole"
    return None


def queue_view_values(version: str) -> dict[str, Any]:
    """The vCluster values that copy the view in, and keep the syncer's host ClusterRole as it was."""
    return {
        "sync": {
            "fromHost": {
                "configMaps": {
                    "enabled": True,
                    "mappings": {"byName": {f"/{QUEUE_VIEW_CONFIGMAP}": QUEUE_VIEW_IN_TENANT}},
                }
            }
        },
        "rbac": {"clusterRole": {"overwriteRules": copy.deepcopy(list(VCLUSTER_SYNCER_CLUSTER_RULES[version]))}},
    }

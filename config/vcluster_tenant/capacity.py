"""What one team may take of the host: its namespace's ResourceQuota and LimitRange.

GPUs are not here on purpose: KAI is the only GPU authority (quotas, limits,
fractions), and a fraction never shows in a ResourceQuota. Everything else a
team could exhaust on the shared node (CPU, memory, disk, pods, volumes, node
ports, load balancers) is capped per tenant, with room for the tenant's own
control plane, which runs in the same namespace and counts against the quota.
"""

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from config.quantities import quantity
from config.upstream import VCLUSTER_CONTROL_PLANE_RESOURCES

DEFAULT_QUOTA: dict[str, str] = {
    # vCluster's own tenancy defaults (chart/values.yaml policies.resourceQuota.quota @v0.35.1): sized for one
    # team's interactive and batch work on a shared GPU node, several times the control plane's needs.
    "requests.cpu": "10",
    "limits.cpu": "20",
    "requests.memory": "20Gi",
    "limits.memory": "40Gi",
    "requests.ephemeral-storage": "60Gi",
    "limits.ephemeral-storage": "160Gi",
    "requests.storage": "100Gi",
    "count/persistentvolumeclaims": "20",
    "count/pods": "20",
    "count/services": "20",
    "count/endpoints": "40",
    # The syncer writes a selector-less Service's Endpoints and EndpointSlices, each one more load on every node's
    # kube-proxy (loft-sh/vcluster pkg/controllers/resources/endpointslices @v0.35.1); Kubernetes writes one slice
    # per Service with a selector, which counts too.
    "count/endpointslices.discovery.k8s.io": "40",
    # KAI keeps two ConfigMaps per fraction container (<prefix>-<i> and <prefix>-<i>-evar) in the namespace.
    "count/configmaps": "100",
    "count/secrets": "100",
}
"""Per-tenant defaults; `vcluster.quota` entries override them for every tenant, `tenants[].quota` for one."""

DEFAULT_LIMIT_RANGE: dict[str, dict[str, str]] = {
    # vCluster's defaults (chart/values.yaml policies.limitRange @v0.35.1): what a container that states
    # nothing gets, so that every pod counts against the quota, ephemeral storage included.
    "default": {"cpu": "1", "memory": "512Mi", "ephemeral-storage": "8Gi"},
    "defaultRequest": {"cpu": "100m", "memory": "128Mi", "ephemeral-storage": "3Gi"},
}

PLATFORM_QUOTA_KEYS = {
    "services.nodeports": "it is exactly the node ports of the tenant's API Service, so no team takes another's",
    "services.loadbalancers": "tenants get no LoadBalancer Services: they would expose the host",
}
"""Quota keys the platform sets itself."""


def _resources(
    kind: str, container: Mapping[str, Any], limit_range: Mapping[str, Mapping[str, str]]
) -> dict[str, Decimal]:
    """A container's requests or limits, with the LimitRange's default for what it does not state."""
    stated = container.get(kind, {})
    defaults = limit_range["defaultRequest" if kind == "requests" else "default"]
    return {name: quantity(stated.get(name, defaults[name])) for name in ("cpu", "memory", "ephemeral-storage")}


def control_plane_footprint(limit_range: Mapping[str, Mapping[str, str]], persistence_size: str) -> dict[str, Decimal]:
    """What the tenant's own pods take of its quota before the team runs anything.

    A pod counts the larger of its containers' sum and its largest init container
    (Kubernetes' effective pod requests); the control plane has one of each, CoreDNS one container.
    """
    footprint: dict[str, Decimal] = {
        "count/pods": Decimal(2),
        "count/persistentvolumeclaims": Decimal(1),
        "requests.storage": quantity(persistence_size),
    }
    syncer, init, coredns = (VCLUSTER_CONTROL_PLANE_RESOURCES[n] for n in ("syncer", "init", "coredns"))
    for kind in ("requests", "limits"):
        control_plane = _resources(kind, syncer, limit_range)
        init_container = _resources(kind, init, limit_range)
        dns = _resources(kind, coredns, limit_range)
        for name in control_plane:
            footprint[f"{kind}.{name}"] = max(control_plane[name], init_container[name]) + dns[name]
    return footprint


def quota_shortfalls(quota: Mapping[str, str], footprint: Mapping[str, Decimal]) -> dict[str, Decimal]:
    """Quota keys set below what the control plane needs, with that need."""
    return {key: need for key, need in footprint.items() if key in quota and quantity(quota[key]) < need}

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

from config.quantities import format_quantity, quantity
from config.upstream import VCLUSTER_CONTROL_PLANE_RESOURCES

REFERENCE_GPU_SHARE: dict[str, str] = {
    # One GPU's share of the reference host, NVIDIA's tutorial machine: an L40S on Nebius, whose smallest preset
    # is gpu-l40s-a 1gpu-8vcpu-32gb (skypilot-org/skypilot-catalog catalogs/v7/nebius/vms.csv). Its disk is an
    # assumption (no source gives Brev's boot volume there): set vcluster.perGpu to your machines' figures.
    "cpu": "8",
    "memory": "32Gi",
    "ephemeral-storage": "100Gi",
}
SIZED_RESOURCES = ("cpu", "memory", "ephemeral-storage")
LIMITS_PER_REQUEST = 2
"""A team's quota of limits is twice its requests: room for CPU-only helpers and bursts beside its GPU pods."""
DEFAULT_LIMIT_FRACTION, DEFAULT_REQUEST_FRACTION = Decimal(1) / 2, Decimal(1) / 8
"""What a container that states nothing may use and requests, of one GPU's share."""
PODS_BASE, PODS_PER_GPU = 20, 8
"""A team's pod quota: its control plane, CoreDNS and helpers, and room for fractions (four 0.25s a GPU) and
data loaders beside each GPU's pod."""

DEFAULT_QUOTA: dict[str, str] = {
    # vCluster's own tenancy defaults (chart/values.yaml policies.resourceQuota.quota @v0.35.1) for what does not
    # follow from a GPU's share (sized_quota: CPU, memory, disk and pods).
    "requests.storage": "100Gi",
    "count/persistentvolumeclaims": "20",
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
"""Per-tenant defaults besides the sized ones; `vcluster.quota` entries override both for every tenant,
`tenants[].quota` for one."""


def limit_range_of(share: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """What a container that states nothing gets: half a GPU's share as its limit, an eighth as its request, so a
    GPU pod that names only its GPU is neither OOM-killed nor evicted for disk at once, a helper reserves little,
    and the control plane's own containers (which state no ephemeral storage) leave the team most of its quota."""

    def part(fraction: Decimal) -> dict[str, str]:
        return {name: format_quantity(name, quantity(share[name]) * fraction) for name in share}

    return {"default": part(DEFAULT_LIMIT_FRACTION), "defaultRequest": part(DEFAULT_REQUEST_FRACTION)}


DEFAULT_LIMIT_RANGE = limit_range_of(REFERENCE_GPU_SHARE)


def sized_quota(gpus: int, share: Mapping[str, str], footprint: Mapping[str, Decimal]) -> dict[str, str]:
    """A team's CPU, memory, disk and pod quota: a GPU's share of the machines for each GPU its queue may use, on
    top of what its own control plane takes (`footprint`), and twice that in limits."""
    quota: dict[str, str] = {}
    for name in SIZED_RESOURCES:
        per_gpus = quantity(share[name]) * gpus
        quota[f"requests.{name}"] = format_quantity(name, per_gpus + footprint[f"requests.{name}"])
        quota[f"limits.{name}"] = format_quantity(name, LIMITS_PER_REQUEST * per_gpus + footprint[f"limits.{name}"])
    quota["count/pods"] = str(PODS_BASE + PODS_PER_GPU * gpus)
    return quota


def gpu_pod_shortfalls(
    quota: Mapping[str, str], gpus: int, share: Mapping[str, str], footprint: Mapping[str, Decimal]
) -> dict[str, Decimal]:
    """Quota keys too small for one pod per GPU of the team's limit, each with a GPU's share, beside its control
    plane: the keys with what they would need."""
    need: dict[str, Decimal] = {"count/pods": footprint["count/pods"] + gpus}
    for name in SIZED_RESOURCES:
        for kind in ("requests", "limits"):
            need[f"{kind}.{name}"] = quantity(share[name]) * gpus + footprint[f"{kind}.{name}"]
    return {key: amount for key, amount in need.items() if key in quota and quantity(quota[key]) < amount}


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

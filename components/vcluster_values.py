"""Helm values for one tenant's vCluster: reachable from outside, blind to owner references, on the GPU node."""

from typing import Any

from components.merge import deep_merge
from config.tenants import TenantConfig, VClusterConfig
from config.upstream import KUBECONFIG_SECRET_PREFIX

PERSISTENCE_PATH = ("controlPlane", "statefulSet", "persistence")
"""Rendered into the StatefulSet's volumeClaimTemplates, which Kubernetes refuses to change
(kubernetes/kubernetes pkg/apis/apps/validation/validation.go ValidateStatefulSetUpdate), or, with
persistence off, turns the StatefulSet into a Deployment (loft-sh/vcluster chart/templates/_persistence.tpl
@v0.35.1): set once, when a tenant is created."""


def kubeconfig_secret(tenant: str) -> str:
    """The Secret vCluster's control plane writes its kubeconfig to (see config/upstream.py, vCluster)."""
    return f"{KUBECONFIG_SECRET_PREFIX}{tenant}"


def tenant_endpoint(address: str, node_port: int) -> str:
    return f"https://{address}:{node_port}"


def vcluster_values(tenant: TenantConfig, *, node_port: int, address: str, settings: VClusterConfig) -> dict[str, Any]:
    volume_claim: dict[str, Any] = {"enabled": True, "size": settings.persistence_size}
    if settings.storage_class:
        volume_claim["storageClass"] = settings.storage_class
    defaults = {
        # KAI's pod-grouper walks owner references; on synced pods they would point at
        # the vCluster's Service, which the pod-grouper may not read.
        "experimental": {"syncSettings": {"setOwner": False}},
        # Teams see the real GPU node (its labels, its allocatable nvidia.com/gpu).
        "sync": {"fromHost": {"nodes": {"enabled": True, "selector": {"all": True}}}},
        "controlPlane": {
            "service": {"spec": {"type": "NodePort"}, "httpsNodePort": node_port},
            # The serving certificate must name the address teams use (loft-sh/vcluster pkg/server/cert/cert.go
            # @v0.35.1 adds only the pods' host IPs for a NodePort Service).
            "proxy": {"extraSANs": [address]},
            "statefulSet": {"persistence": {"volumeClaim": volume_claim}},
        },
        "exportKubeConfig": {"server": tenant_endpoint(address, node_port), "context": tenant.name},
    }
    return deep_merge(defaults, tenant.values)

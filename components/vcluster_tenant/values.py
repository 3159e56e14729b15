"""Helm values for one tenant's vCluster: reachable from outside, blind to owner references, fenced in.

The fence is vCluster's own `policies.*` (open source at 0.35.1: only central
admission is Pro): a ResourceQuota and LimitRange in the tenant's host namespace,
NetworkPolicies around its control plane and workloads, and Pod Security inside
the virtual cluster, which the syncer also applies before copying a pod to the host
(loft-sh/vcluster chart/templates/resourcequota.yaml, limitrange.yaml, networkpolicy.yaml,
pkg/controllers/resources/pods/validate_pod_security.go @v0.35.1).
"""

from typing import Any

from components.shared.merge import deep_merge
from components.vcluster_tenant.endpoints import Endpoint
from components.vcluster_tenant.oidc import with_oidc
from config.upstream import (
    HOSTNAME_LABEL,
    KUBECONFIG_SECRET_PREFIX,
    VCLUSTER_OSS_REPOSITORY,
)
from config.vcluster_tenant.queue_view import queue_view_values
from config.vcluster_tenant.syncer_role import syncer_role_blocker, syncer_role_values
from config.vcluster_tenant.tenants import LimitRangeConfig, PodSecurityLevel, TenantConfig, VClusterConfig

_PERSISTENCE = ("controlPlane", "statefulSet", "persistence")
PERSISTENCE_PATHS = tuple((*_PERSISTENCE, key) for key in ("volumeClaim", "volumeClaimTemplates", "dataVolume"))
"""Where the control plane's state lives: rendered into the StatefulSet's volumeClaimTemplates, which Kubernetes
refuses to change (kubernetes/kubernetes pkg/apis/apps/validation/validation.go ValidateStatefulSetUpdate), or,
with persistence off, turning the StatefulSet into a Deployment, or naming the data volume (loft-sh/vcluster
chart/templates/_persistence.tpl, statefulset.yaml @v0.35.1): set once, when a tenant is created. The rest of
`persistence` (addVolumes, addVolumeMounts: the identity provider's CA) follows the config."""

SECURITY_PATHS = (("controlPlane", "statefulSet", "security"), ("controlPlane", "distro", "k8s", "securityContext"))
"""Who the control plane runs as: vCluster cannot move a control plane from root to another user
(vcluster-docs version-0.35.0 deploy/control-plane/kubernetes-pod/security/rootless-mode.mdx), so set once."""

NON_ROOT = 12345
_RESTRICTED_CONTAINER = {
    "runAsUser": NON_ROOT,
    "runAsGroup": NON_ROOT,
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
}
RESTRICTED_CONTROL_PLANE = {
    # vCluster's rootless mode (rootless-mode.mdx, version-0.35.0), plus what Pod Security's restricted level
    # asks of every container: a seccomp profile and no capabilities. The chart's default runs as root
    # (chart/values.yaml controlPlane.statefulSet.security: runAsUser 0 @v0.35.1).
    "statefulSet": {
        "security": {
            "podSecurityContext": {
                "fsGroup": NON_ROOT,
                "runAsUser": NON_ROOT,
                "runAsGroup": NON_ROOT,
                "runAsNonRoot": True,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containerSecurityContext": _RESTRICTED_CONTAINER,
        }
    },
    "distro": {"k8s": {"securityContext": _RESTRICTED_CONTAINER}},
}


def kubeconfig_secret(tenant: str) -> str:
    """The Secret vCluster's control plane writes its kubeconfig to (see config/upstream.py, vCluster)."""
    return f"{KUBECONFIG_SECRET_PREFIX}{tenant}"


def control_plane_account(tenant: str) -> str:
    """The control plane's ServiceAccount; its Role reads and writes the namespace's Secrets
    (loft-sh/vcluster chart/templates/serviceaccount.yaml, role.yaml @v0.35.1)."""
    return f"vc-{tenant}"


def _service(endpoint: Endpoint) -> dict[str, Any]:
    """The control plane's Service: a NodePort with every port set, or the chart's ClusterIP behind the router."""
    if endpoint.ports is None:
        return {}
    service: dict[str, Any] = {"spec": {"type": "NodePort"}, "httpsNodePort": endpoint.ports.https}
    if endpoint.ports.kubelet is not None:
        service["kubeletNodePort"] = endpoint.ports.kubelet
    return service


def _policies(quota: dict[str, str], limit_range: LimitRangeConfig, pod_security: PodSecurityLevel) -> dict[str, Any]:
    return {
        "podSecurityStandard": pod_security,
        "resourceQuota": {"enabled": True, "quota": dict(quota)},
        "limitRange": {
            "enabled": True,
            "default": dict(limit_range.default),
            "defaultRequest": dict(limit_range.default_request),
        },
        # The platform registers each tenant's NetworkPolicies itself (network.py): the chart's cannot be narrowed.
        "networkPolicy": {"enabled": False},
    }


def vcluster_values(
    tenant: TenantConfig,
    *,
    endpoint: Endpoint,
    settings: VClusterConfig,
    version: str,
    sized_gpus: int,
    control_plane_fence: str,
    control_plane_node: str | None = None,
) -> dict[str, Any]:
    """The tenant's vCluster values at chart `version`, its quota sized for `sized_gpus` GPUs.
    `control_plane_fence` is the control plane's NetworkPolicy (network.control_plane_manifest), which the release
    installs before its StatefulSet. `control_plane_node` pins its control plane to the node whose hostpath volumes
    it uses, so removing a worker strands no team's state."""
    volume_claim: dict[str, Any] = {"enabled": True, "size": settings.persistence_size}
    if settings.storage_class:
        volume_claim["storageClass"] = settings.storage_class
    pod_security = settings.pod_security_for(tenant)
    control_plane: dict[str, Any] = {
        "service": _service(endpoint),
        # The serving certificate must name what teams connect to (loft-sh/vcluster pkg/server/cert/cert.go
        # @v0.35.1 adds only the pods' host IPs for a NodePort Service, and no router hostname).
        "proxy": {"extraSANs": [endpoint.name]},
        "statefulSet": {
            "persistence": {"volumeClaim": volume_claim},
            "image": {"repository": VCLUSTER_OSS_REPOSITORY},
        },
        # The virtual controller manager's pod collection: a finished pod stays in the vCluster, and so on the
        # host, until it is collected, and the quota counts only running pods (loft-sh/vcluster pkg/k8s/k8s.go
        # MergeArgs(args, controllerManager.ExtraArgs) @v0.35.1; kubernetes pkg/controller/podgc @v1.36.3).
        "distro": {
            "k8s": {
                "controllerManager": {
                    "enabled": True,
                    "extraArgs": [f"--terminated-pod-gc-threshold={settings.max_finished_pods}"],
                }
            }
        },
    }
    if pod_security == "restricted":
        control_plane = deep_merge(control_plane, RESTRICTED_CONTROL_PLANE)
    defaults = {
        # KAI's pod-grouper walks owner references; on synced pods they would point at
        # the vCluster's Service, which the pod-grouper may not read.
        "experimental": {"syncSettings": {"setOwner": False}},
        # Teams see the real GPU node (its labels, its allocatable nvidia.com/gpu).
        "sync": {"fromHost": {"nodes": {"enabled": True, "selector": {"all": True}}}},
        "controlPlane": control_plane,
        "exportKubeConfig": {"server": endpoint.url, "context": tenant.name},
    }
    values = deep_merge(defaults, tenant.values)
    if settings.oidc is not None:
        # Members sign in through the organisation's identity provider (oidc.py).
        values = with_oidc(values, settings.oidc)
    if syncer_role_blocker(tenant.values, version) is None:
        # The syncer reads no other team's pods (syncer_role.py); and the team's queue, readable inside:
        # kubectl get configmap queue -n gpu-tenancy (queue_view.py).
        values = deep_merge(deep_merge(values, syncer_role_values(version)), queue_view_values())
    if control_plane_node is not None:
        # The chart copies scheduling.nodeSelector into the StatefulSet's pod (loft-sh/vcluster
        # chart/templates/statefulset.yaml @v0.35.1); the kubelet labels its node with its hostname.
        scheduling = {"nodeSelector": {HOSTNAME_LABEL: control_plane_node}}
        values = deep_merge(values, {"controlPlane": {"statefulSet": {"scheduling": scheduling}}})
    node_ports = 0 if endpoint.ports is None else 1 + (endpoint.ports.kubelet is not None)
    quota = {
        **settings.quota_for(tenant, sized_gpus),
        # Exactly the node ports the tenant's own Service holds: none left for a team's Service.
        "services.nodeports": str(node_ports),
        "services.loadbalancers": "0",
    }
    values["policies"] = _policies(quota, settings.limit_range_for(tenant), pod_security)
    # Set last, so a tenant's values cannot drop it; host manifests of its own follow as further documents.
    host = values.setdefault("experimental", {}).setdefault("deploy", {}).setdefault("host", {})
    host["manifests"] = "\n---\n".join(m for m in (control_plane_fence, host.get("manifests")) if m)
    return values

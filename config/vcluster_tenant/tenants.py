"""`gpu-tenancy:tenants`: one vCluster per team, each pinned to a leaf queue, with its own add-ons."""

import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from config.issues import ConfigIssue, ConfigIssues, Path
from config.owned_values import OwnedValues, owned_value_issues
from config.quantities import Quantity
from config.types import (
    NODE_PORT_RANGE,
    ChartVersionWithoutV,
    ConfigModel,
    HelmReleaseName,
    IPv4Cidr,
    KubernetesName,
    PinnedVersion,
    QueueName,
    TenantName,
    require_str,
)
from config.upstream import KAI_PRIORITY_CLASSES
from config.vcluster_tenant.capacity import (
    DEFAULT_LIMIT_RANGE,
    DEFAULT_QUOTA,
    REFERENCE_GPU_SHARE,
    control_plane_footprint,
    limit_range_of,
    sized_quota,
)
from config.vcluster_tenant.oidc import OidcConfig

VCLUSTER_OWNED_VALUES: OwnedValues = {
    ("experimental", "syncSettings", "setOwner"): "KAI's pod-grouper would follow it to a Service it may not read",
    ("sync", "fromHost", "nodes", "enabled"): "teams must see the real GPU node",
    ("controlPlane", "service", "spec", "type"): (
        "the platform exposes the API itself: a NodePort, or a ClusterIP behind the SNI route (vcluster.expose)"
    ),
    ("controlPlane", "service", "httpsNodePort"): "set the tenant's nodePort instead",
    ("controlPlane", "service", "kubeletNodePort"): "gpu-tenancy assigns it once and keeps it, so no two teams clash",
    ("controlPlane", "statefulSet", "persistence", "volumeClaim", "enabled"): (
        "the control plane's state lives on its volume; without one it is lost at every restart"
    ),
    ("exportKubeConfig", "server"): "it is derived from the host address and the tenant's nodePort",
    ("exportKubeConfig", "context"): "it is the tenant's name",
    ("sync", "toHost", "priorityClasses"): (
        "with it the syncer keeps a pod's spec.priorityClassName, which would outrank KAI's classes on the node"
    ),
    ("sync", "fromHost", "priorityClasses"): (
        "with it the syncer keeps a pod's spec.priorityClassName, which would outrank KAI's classes on the node"
    ),
    ("sync", "toHost", "pods", "priorityClassName"): (
        "a team picks its priority with the pod label priorityClassName, among its own classes"
    ),
    ("controlPlane", "distro", "k8s", "controllerManager"): (
        "its --terminated-pod-gc-threshold bounds the finished pods a team keeps on the host: set "
        "vcluster.maxFinishedPods instead"
    ),
    ("policies",): (
        "a tenant's quota, limit range, network policy and pod security are the platform's: "
        "set tenants[].quota, limitRange or podSecurity instead"
    ),
    (
        "sync",
        "toHost",
        "networkPolicies",
    ): "a team's NetworkPolicies on the host would add to what the platform's allow",
}
"""vCluster values the platform sets for every tenant, and why a tenant may not override them."""

_CHART_REPO = r"^(https://|oci://)\S+$"


class AddonChart(ConfigModel):
    repo: str = Field(pattern=_CHART_REPO, description="Chart repository URL (https:// or oci://).")
    chart: str = Field(min_length=1)
    version: PinnedVersion
    values: dict[str, Any] = Field(default_factory=dict)


class AddonConfig(ConfigModel):
    """Something installed inside one tenant's vCluster: a Helm chart, or plain manifests."""

    name: HelmReleaseName = Field(description="A chart's Helm release name inside the tenant's vCluster.")
    namespace: KubernetesName | None = Field(default=None, description="For a chart; defaults to the add-on's name.")
    chart: AddonChart | None = None
    manifests: list[dict[str, Any]] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_kind(self) -> "AddonConfig":
        if (self.chart is None) == (self.manifests is None):
            raise ConfigIssue((), self.name, "needs exactly one of `chart` (a Helm chart) or `manifests` (a list)")
        for index, manifest in enumerate(self.manifests or []):
            missing = [key for key in ("apiVersion", "kind", "metadata") if key not in manifest]
            if missing or "name" not in (manifest.get("metadata") or {}):
                raise ConfigIssue(
                    ("manifests", index),
                    manifest.get("kind", manifest),
                    "needs apiVersion, kind and metadata.name",
                )
        return self


PodSecurityLevel = Literal["baseline", "restricted"]


def proxies_kubelets_by_hostname(values: dict[str, Any]) -> bool:
    """Whether a tenant's API Service has a kubelet port: networking.advanced.proxyKubelets.byHostname,
    true by default (loft-sh/vcluster chart/values.yaml, templates/service.yaml @v0.35.1)."""
    proxy = values.get("networking", {}).get("advanced", {}).get("proxyKubelets", {})
    return proxy.get("byHostname", True) is not False


_DNS_NAME = re.compile(r"^(?=.{1,253}$)[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$")


def _dns_name(value: str) -> str:
    if not _DNS_NAME.match(value):
        raise PydanticCustomError(
            "dns_name", "is not a lowercase DNS domain: use e.g. gpu.example.com (no scheme, no port)", {}
        )
    return value


DnsName = Annotated[str, BeforeValidator(require_str), AfterValidator(_dns_name)]


_LABEL_VALUE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$")


def _priority_class(value: str) -> str:
    if value.startswith("system-"):
        raise PydanticCustomError(
            "priority_class",
            "is a class Kubernetes keeps for its own components (system-*): a team's pods would outrank the "
            "cluster's and could never be preempted; name one of KAI's ({kai}) or a class the platform created",
            {"kai": ", ".join(KAI_PRIORITY_CLASSES)},
        )
    if not _LABEL_VALUE_NAME.match(value):
        raise PydanticCustomError(
            "priority_class",
            "is not a class name a pod label can carry: use at most 63 lowercase letters, digits, '-' and '.', "
            "starting and ending with a letter or digit (e.g. inference)",
        )
    return value


PriorityClassName = Annotated[str, BeforeValidator(require_str), AfterValidator(_priority_class)]
"""Teams choose it with the pod label priorityClassName, so it must be a valid label value as well."""


@dataclass(frozen=True)
class GpuSharingRules:
    """What one tenant's pods may ask of KAI: priority classes, and how small and how wide a GPU fraction."""

    priority_classes: tuple[str, ...]
    min_gpu_fraction: float
    min_gpu_memory_mib: int
    max_fraction_devices: int
    max_grace_seconds: int
    """The longest terminationGracePeriodSeconds a pod may have: how long a reclaimed pod keeps its GPU."""
    max_annotation_bytes: int
    """The most a pod's annotations may hold on the host: every synced pod sits in KAI's caches and ours."""
    max_container_text_bytes: int
    """The most a pod's containers may hold in command, args and env, all of them together, for the same reason."""


class LimitRangeConfig(ConfigModel):
    """What a container that states no resources gets (and so what it counts against the quota)."""

    default: dict[str, Quantity] = Field(
        default_factory=lambda: dict(DEFAULT_LIMIT_RANGE["default"]), description="Limits of such a container."
    )
    default_request: dict[str, Quantity] = Field(
        default_factory=lambda: dict(DEFAULT_LIMIT_RANGE["defaultRequest"]),
        description="Requests of such a container.",
    )

    @model_validator(mode="after")
    def _covers_every_quota_resource(self) -> "LimitRangeConfig":
        for key, entries in (("default", self.default), ("defaultRequest", self.default_request)):
            missing = sorted({"cpu", "memory", "ephemeral-storage"} - entries.keys())
            if missing:
                raise ConfigIssue(
                    (key,),
                    entries,
                    f"needs {', '.join(missing)}: the quota counts them, so a pod that states none would be refused",
                )
        return self


class GpuShareConfig(ConfigModel):
    """One GPU's share of the machines it sits in (their CPUs, memory and disk divided by their GPUs): what a team
    gets beside each GPU its queue may use, and what sizes a container that states nothing."""

    cpu: Quantity = Field(default=REFERENCE_GPU_SHARE["cpu"])
    memory: Quantity = Field(default=REFERENCE_GPU_SHARE["memory"])
    ephemeral_storage: Quantity = Field(default=REFERENCE_GPU_SHARE["ephemeral-storage"])

    @property
    def resources(self) -> dict[str, str]:
        return {"cpu": self.cpu, "memory": self.memory, "ephemeral-storage": self.ephemeral_storage}


class TenantConfig(ConfigModel):
    """One team: its vCluster, the queue its pods are pinned to, and its add-ons."""

    name: TenantName
    queue: QueueName
    node_port: int | None = Field(
        default=None,
        ge=NODE_PORT_RANGE.start,
        le=NODE_PORT_RANGE.stop - 1,
        description="NodePort of the tenant's API server (expose: nodePort); assigned once and kept when unset.",
    )
    values: dict[str, Any] = Field(default_factory=dict, description="vCluster Helm values, merged last.")
    vcluster_version: ChartVersionWithoutV | None = Field(
        default=None,
        description="This tenant's vCluster chart version; default versions.vcluster. A bump restarts only this "
        "team's control plane, so one team can go first.",
    )
    addons: list[AddonConfig] = Field(default_factory=list)
    pod_security: PodSecurityLevel | None = Field(
        default=None, description="Overrides vcluster.podSecurity for this tenant; applies when it is created."
    )
    quota: dict[str, Quantity] = Field(
        default_factory=dict, description="ResourceQuota entries merged over vcluster.quota for this tenant."
    )
    limit_range: LimitRangeConfig | None = Field(
        default=None, description="Replaces vcluster.limitRange for this tenant."
    )
    priority_classes: list[PriorityClassName] | None = Field(
        default=None, description="Replaces vcluster.priorityClasses for this tenant."
    )
    min_gpu_fraction: float | None = Field(
        default=None, gt=0, lt=1, description="Overrides vcluster.minGpuFraction for this tenant."
    )
    min_gpu_memory_mib: int | None = Field(
        default=None, ge=1, alias="minGpuMemoryMiB", description="Overrides vcluster.minGpuMemoryMiB for this tenant."
    )
    max_fraction_devices: int | None = Field(
        default=None, ge=1, le=64, description="Overrides vcluster.maxFractionDevices for this tenant."
    )
    members: list[KubernetesName] = Field(
        default_factory=list,
        description="Team members, each given a kubeconfig of their own (stack output memberKubeconfigs), acting in "
        "the vCluster as themselves; removing one revokes only theirs.",
    )
    groups: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list,
        description="With vcluster.oidc: the identity provider's groups whose members are cluster-admin of this "
        "team's vCluster, signing in as themselves (stack output signInKubeconfigs); nothing per member is stored.",
    )
    non_preemptible: bool = Field(
        default=False,
        description="Every pod of this team is non-preemptible (the label kai.scheduler/preemptibility), for teams "
        "that serve: KAI never preempts or reclaims them, and keeps pending what would take the queue past its quota.",
    )

    @model_validator(mode="after")
    def _platform_values_kept(self) -> "TenantConfig":
        issues = owned_value_issues(self.values, VCLUSTER_OWNED_VALUES)
        names = [addon.name for addon in self.addons]
        issues += [
            ConfigIssue(("members", index), member, "is listed twice: each member gets one credential")
            for index, member in enumerate(self.members)
            if member in self.members[:index]
        ]
        issues += [
            ConfigIssue(("groups", index), group, "is listed twice")
            for index, group in enumerate(self.groups)
            if group in self.groups[:index]
        ]
        issues += _sign_in_flag_issues(self.values)
        issues += [
            ConfigIssue(("addons", index, "name"), name, "is already used by an earlier add-on")
            for index, name in enumerate(names)
            if name in names[:index]
        ]
        if issues:
            raise ConfigIssues(issues)
        return self


_API_SERVER_ARGS = ("controlPlane", "distro", "k8s", "apiServer", "extraArgs")
_SIGN_IN_FLAGS = ("--oidc-", "--authentication-config", "--anonymous-auth", "--token-auth-file")


def _sign_in_flag_issues(values: dict[str, Any]) -> list[ConfigIssue]:
    """A tenant's own API server flags may not decide who signs in: that is vcluster.oidc, the platform's."""
    node: Any = values
    for key in _API_SERVER_ARGS:
        node = node.get(key) if isinstance(node, dict) else None
    return [
        ConfigIssue(
            ("values", *_API_SERVER_ARGS, index),
            arg,
            "decides who signs in to the team's API server, which the platform sets: use vcluster.oidc",
        )
        for index, arg in enumerate(node if isinstance(node, list) else [])
        if isinstance(arg, str) and arg.startswith(_SIGN_IN_FLAGS)
    ]


class VClusterConfig(ConfigModel):
    """`gpu-tenancy:vcluster`: how every tenant's vCluster is installed, reached and fenced in."""

    repo: str = Field(default="https://charts.loft.sh", pattern=_CHART_REPO)
    expose: Literal["nodePort", "sni"] = Field(
        default="nodePort",
        description="nodePort: each API at https://<host.address>:<its node port>. sni: every API on the "
        "host's port 443, routed by hostname, at https://<tenant>.<domain>.",
    )
    domain: DnsName | None = Field(
        default=None, description="With expose sni: each tenant's API is https://<tenant>.<domain>."
    )
    admission: Literal["mutate", "validate"] = Field(
        default="mutate",
        description="mutate: pin pods to their queue and KAI (Kubernetes 1.36+). "
        "validate: only refuse pods that name another queue or use GPUs without KAI (older clusters).",
    )
    persistence_size: str = Field(
        default="5Gi",
        pattern=r"^\d+(Mi|Gi|Ti)$",
        description="Size of each control plane's PVC; a change applies to tenants created afterwards only.",
    )
    storage_class: KubernetesName | None = Field(
        default=None,
        description="StorageClass of the control plane's PVC, the cluster default when unset; "
        "a change applies to tenants created afterwards only.",
    )
    ready_timeout_seconds: int = Field(default=600, ge=60, le=3600)
    pod_security: PodSecurityLevel = Field(
        default="baseline",
        description="Pod Security level enforced on each tenant's host namespace (and inside its vCluster); "
        "restricted also runs the control plane as non-root. Applies to tenants created afterwards.",
    )
    per_gpu: GpuShareConfig = Field(
        default_factory=GpuShareConfig,
        description="One GPU's share of the machines (CPU, memory, ephemeral storage): each tenant's quota holds "
        "that much per GPU of its queue's limit (twice that in limits), and a container that states nothing gets "
        "half of it as its limit and an eighth as its request.",
    )
    quota: dict[str, Quantity] = Field(
        default_factory=dict,
        description="ResourceQuota entries merged over the defaults for every tenant "
        "(GPUs excluded: KAI governs them).",
    )
    limit_range: LimitRangeConfig | None = Field(
        default=None, description="What a container that states nothing gets; derived from perGpu when unset."
    )
    blocked_egress: list[IPv4Cidr] = Field(
        default_factory=list,
        description="More address ranges tenant pods may not reach, e.g. the nodes' public addresses "
        "when host.address is a DNS name or the cluster has several nodes.",
    )
    remove_tenants: list[TenantName] = Field(
        default_factory=list,
        description="Teams whose host namespace, volumes and data the next up deletes: a team dropped from "
        "tenants without being named here is refused, so that no data goes by a slip in one list.",
    )
    priority_classes: list[PriorityClassName] = Field(
        default_factory=lambda: list(KAI_PRIORITY_CLASSES),
        description="The classes a team may name with the pod label priorityClassName (KAI's by default); "
        "an unlabelled pod is train.",
    )
    min_gpu_fraction: float = Field(
        default=0.05,
        gt=0,
        lt=1,
        description="The smallest gpu-fraction a pod may ask for: KAI charges the fraction, yet the pod can use "
        "the whole device.",
    )
    min_gpu_memory_mib: int = Field(
        default=256,
        ge=1,
        alias="minGpuMemoryMiB",
        description="The smallest gpu-memory (MiB) a pod may ask for, for the same reason.",
    )
    max_fraction_devices: int = Field(
        default=1,
        ge=1,
        le=64,
        description="The most devices one fraction pod may span (gpu-fraction-num-devices): each one it "
        "touches is closed to whole-GPU jobs.",
    )
    max_termination_grace_seconds: int = Field(
        default=300,
        ge=1,
        le=3600,
        description="The longest terminationGracePeriodSeconds a tenant's pod may have: KAI evicts with the pod's "
        "own grace period and counts the GPU as held until the pod is gone.",
    )
    max_pod_annotation_bytes: int = Field(
        default=32768,
        ge=4096,
        le=262144,
        description="The most bytes a tenant's pod may carry in annotations on the host (its labels included: the "
        "syncer copies them into one): every synced pod, finished ones too, sits in KAI's caches and the gang "
        "controller's lists.",
    )
    max_container_text_bytes: int = Field(
        default=65536,
        ge=4096,
        le=1048576,
        description="The most bytes a tenant's pod may carry in its containers' command, args and env (names and "
        "values, every container together), the free text of a pod's spec; large configuration belongs in a "
        "ConfigMap or a volume.",
    )
    oidc: OidcConfig | None = Field(
        default=None,
        description="The identity provider members sign in with (tenants[].groups say who is in which team); "
        "without it, members get ServiceAccount tokens (tenants[].members).",
    )
    max_finished_pods: int = Field(
        default=100,
        ge=10,
        le=12500,
        description="How many finished pods a tenant's vCluster keeps (its controller manager's "
        "--terminated-pod-gc-threshold), and so the syncer keeps on the host; the quota counts only running ones.",
    )

    def quota_for(self, tenant: TenantConfig, gpus: int) -> dict[str, str]:
        """The tenant's ResourceQuota, sized for `gpus` whole GPUs (StackConfig.sized_gpus), then overridden."""
        sized = sized_quota(gpus, self.per_gpu.resources, self.footprint_for(tenant))
        return {**DEFAULT_QUOTA, **sized, **self.quota, **tenant.quota}

    def limit_range_for(self, tenant: TenantConfig) -> LimitRangeConfig:
        if tenant.limit_range is not None:
            return tenant.limit_range
        if self.limit_range is not None:
            return self.limit_range
        derived = limit_range_of(self.per_gpu.resources)
        return LimitRangeConfig(default=derived["default"], default_request=derived["defaultRequest"])

    def footprint_for(self, tenant: TenantConfig) -> dict[str, Decimal]:
        """What the tenant's own control plane and CoreDNS take of its quota, with its limit range's defaults."""
        limit_range = self.limit_range_for(tenant)
        defaults = {"default": limit_range.default, "defaultRequest": limit_range.default_request}
        return control_plane_footprint(defaults, self.persistence_size)

    def pod_security_for(self, tenant: TenantConfig) -> PodSecurityLevel:
        return tenant.pod_security or self.pod_security

    def gpu_sharing_for(self, tenant: TenantConfig) -> GpuSharingRules:
        def pick(own: Any, shared: Any) -> Any:
            return shared if own is None else own

        return GpuSharingRules(
            priority_classes=tuple(pick(tenant.priority_classes, self.priority_classes)),
            min_gpu_fraction=pick(tenant.min_gpu_fraction, self.min_gpu_fraction),
            min_gpu_memory_mib=pick(tenant.min_gpu_memory_mib, self.min_gpu_memory_mib),
            max_fraction_devices=pick(tenant.max_fraction_devices, self.max_fraction_devices),
            max_grace_seconds=self.max_termination_grace_seconds,
            max_annotation_bytes=self.max_pod_annotation_bytes,
            max_container_text_bytes=self.max_container_text_bytes,
        )


def node_port_issues(tenants: Sequence[TenantConfig]) -> list[ConfigIssue]:
    """Two tenants given one port: never resolved silently, since moving a port breaks a handed-out kubeconfig."""
    issues = []
    owners: dict[int, str] = {}
    for index, tenant in enumerate(tenants):
        if tenant.node_port is None:
            continue
        if tenant.node_port in owners:
            path: Path = ("tenants", index, "nodePort")
            issues.append(
                ConfigIssue(
                    path,
                    tenant.node_port,
                    f"is already the API port of tenant {owners[tenant.node_port]!r}: set a free nodePort "
                    f"({NODE_PORT_RANGE.start}-{NODE_PORT_RANGE.stop - 1}) on one of them, or leave it unset",
                )
            )
        owners.setdefault(tenant.node_port, tenant.name)
    return issues

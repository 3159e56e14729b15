"""The root of the stack config: every `gpu-tenancy:*` key, validated together."""

import ipaddress
import math
from typing import Any

from pydantic import Field, ValidationError, model_validator

from config.gpu_host.gpu_operator import GpuGateConfig, GpuOperatorConfig
from config.gpu_host.host import BOOTSTRAP_MODES, HostConfig, KubeconfigHost, SshHost
from config.issues import MISSING, ConfigError, ConfigIssue, ConfigIssues, Path
from config.kai_scheduler.fairness import FairnessConfig
from config.kai_scheduler.settings import KaiSchedulerConfig
from config.messages import house_problems
from config.observability.settings import ObservabilityConfig
from config.quantities import format_quantity
from config.queue_hierarchy.hierarchy import QueueTree, overcommit_issues, structural_issues, unassigned_warnings
from config.queue_hierarchy.queues import QueueConfig
from config.types import ConfigModel
from config.upstream import VCLUSTER_VERIFIED_VERSION
from config.vcluster_tenant.capacity import (
    PLATFORM_QUOTA_KEYS,
    control_plane_footprint,
    gpu_pod_shortfalls,
    quota_shortfalls,
)
from config.vcluster_tenant.syncer_role import syncer_role_blocker
from config.vcluster_tenant.tenants import TenantConfig, VClusterConfig, node_port_issues
from config.versions import VersionsConfig

CONTROL_PLANE_NODE_SELECTOR = ("controlPlane", "statefulSet", "scheduling", "nodeSelector")


def _lookup(values: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = values
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def _is_address(value: str) -> bool:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        return False
    return True


class StackConfig(ConfigModel):
    """Plain (non-secret) stack settings. Secrets such as the kubeconfig never enter this model."""

    host: HostConfig
    versions: VersionsConfig
    gpu_operator: GpuOperatorConfig = Field(default_factory=GpuOperatorConfig)
    gpu_gate: GpuGateConfig = Field(default_factory=GpuGateConfig)
    kai_scheduler: KaiSchedulerConfig = Field(default_factory=KaiSchedulerConfig)
    queues: list[QueueConfig] = Field(min_length=1)
    tenants: list[TenantConfig] = Field(default_factory=list)
    vcluster: VClusterConfig = Field(default_factory=VClusterConfig)
    observability: ObservabilityConfig = Field(default_factory=ObservabilityConfig)
    fairness: FairnessConfig = Field(default_factory=FairnessConfig)

    @model_validator(mode="after")
    def _tree_is_sound(self) -> "StackConfig":
        issues = _prefixed("queues", structural_issues(self.queues))
        if not issues:
            issues = _prefixed("queues", overcommit_issues(self.queues)) + self._tenant_issues()
            issues += node_port_issues(self.tenants)
        issues += self._version_issues() + self._cross_component_issues() + self._capacity_issues()
        if issues:
            raise ConfigIssues(issues)
        return self

    def _tenant_issues(self) -> list[ConfigIssue]:
        tree = self.queue_tree
        issues = []
        seen: set[str] = set()
        for i, tenant in enumerate(self.tenants):
            if tenant.name in seen:
                issues.append(
                    ConfigIssue(
                        ("tenants", i, "name"),
                        tenant.name,
                        "is already used by an earlier tenant: tenant names must be unique",
                    )
                )
            seen.add(tenant.name)
            if tenant.groups and self.vcluster.oidc is None:
                issues.append(
                    ConfigIssue(
                        ("tenants", i, "groups"),
                        tenant.groups,
                        "names identity-provider groups, but no provider is set: set gpu-tenancy:vcluster.oidc "
                        "(issuerUrl, clientId), or give members ServiceAccount tokens with tenants[].members",
                    )
                )
            if tenant.name in self.vcluster.remove_tenants:
                issues.append(
                    ConfigIssue(
                        ("tenants", i, "name"),
                        tenant.name,
                        "is also in gpu-tenancy:vcluster.removeTenants: keep the team (drop it from removeTenants) "
                        "or delete it (drop its tenants entry)",
                    )
                )
            if tenant.queue not in tree.index:
                issues.append(
                    ConfigIssue(
                        ("tenants", i, "queue"),
                        tenant.queue,
                        f"names no queue in gpu-tenancy:queues; use one of the leaf queues: {', '.join(tree.leaves)}",
                    )
                )
            elif not tree.is_leaf(tenant.queue):
                issues.append(
                    ConfigIssue(
                        ("tenants", i, "queue"),
                        tenant.queue,
                        "is a parent queue, and KAI never schedules pods into a parent; "
                        f"use one of the leaf queues: {', '.join(tree.leaves)}",
                    )
                )
        return issues

    def _version_issues(self) -> list[ConfigIssue]:
        """Versions are optional in the model because each is needed only by some host setups."""
        issues = []
        if self.host.mode in BOOTSTRAP_MODES and self.versions.microk8s is None:
            issues.append(
                ConfigIssue(
                    ("versions", "microk8s"),
                    MISSING,
                    f"is required when host.mode is {self.host.mode}: set the snap channel, e.g. 1.36/stable",
                )
            )
        if self.tenants and self.versions.vcluster is None:
            issues.append(
                ConfigIssue(
                    ("versions", "vcluster"),
                    MISSING,
                    "is required when there are tenants: set the vCluster chart version, e.g. 0.35.1",
                )
            )
        if self.observability.mode == "install" and self.versions.kube_prometheus_stack is None:
            issues.append(
                ConfigIssue(
                    ("versions", "kubePrometheusStack"),
                    MISSING,
                    "is required when observability.mode is install: set the chart version, e.g. 88.5.3",
                )
            )
        if self.gpu_operator.mode == "install" and self.versions.gpu_operator is None:
            issues.append(
                ConfigIssue(
                    ("versions", "gpuOperator"),
                    MISSING,
                    "is required when gpuOperator.mode is install: set the chart version, e.g. v26.3.3 "
                    "(or set gpuOperator.mode to skip on a cluster that already exposes GPUs)",
                )
            )
        return issues

    def _cross_component_issues(self) -> list[ConfigIssue]:
        """Settings of one component that another one decides."""
        issues = self._exposure_issues()
        needs_address = self.tenants and self.vcluster.expose == "nodePort"
        if isinstance(self.host, KubeconfigHost) and needs_address and self.host.address is None:
            issues.append(
                ConfigIssue(
                    ("host", "address"),
                    MISSING,
                    "is required in kubeconfig mode once there are tenants: their API endpoints are node ports, "
                    "and on EKS, GKE or AKS the kubeconfig's API server is not a node. Set the address of a node "
                    "(or of a load balancer in front of the nodes) that the teams can reach",
                )
            )
        if self.bootstraps_host:
            issues += [
                ConfigIssue(
                    ("tenants", i, "values", *CONTROL_PLANE_NODE_SELECTOR),
                    selector,
                    "is set by gpu-tenancy on a cluster it builds: every control plane runs on the control-plane "
                    "node, where its hostpath volume lives, so removing a worker strands no team. Remove it",
                )
                for i, tenant in enumerate(self.tenants)
                if (selector := _lookup(tenant.values, CONTROL_PLANE_NODE_SELECTOR)) is not None
            ]
        issues += self._fairness_issues()
        views = self.observability
        if views.team_views_enabled and self.tenants:
            issues += [
                ConfigIssue(
                    ("tenants", i, "nodePort"),
                    tenant.node_port,
                    "is observability.teamViewsNodePort, where the team views are served: choose another port",
                )
                for i, tenant in enumerate(self.tenants)
                if tenant.node_port == views.team_views_node_port
            ]
        issues += self._sign_in_issues()
        kai_binder = self.kai_scheduler.values.get("binder")
        if self.gpu_operator.mode == "install" and isinstance(kai_binder, dict) and "cdiEnabled" in kai_binder:
            issues.append(
                ConfigIssue(
                    ("kaiScheduler", "values", "binder", "cdiEnabled"),
                    kai_binder["cdiEnabled"],
                    "is set by gpu-tenancy from the GPU Operator it installs (its cdi.enabled): a mismatch gives "
                    "KAI's fraction pods a GPU name the runtime cannot resolve. Set gpuOperator.values.cdi.enabled "
                    "instead",
                )
            )
        return issues

    def _sign_in_issues(self) -> list[ConfigIssue]:
        """The team views' sign-in uses vcluster.oidc's provider, and Grafana's org_mapping, which splits on spaces
        and commas and reads `:` as its separator (grafana/grafana pkg/login/social/connectors/org_role_mapper.go
        splitOrgMapping; pkg/util SplitString)."""
        if self.observability.team_views_sign_in is None:
            return []
        key = ("observability", "teamViewsSignIn")
        if self.vcluster.oidc is None:
            return [
                ConfigIssue(key, "{...}", "signs members in through vcluster.oidc's provider, which is not set: set it")
            ]
        if not self.observability.team_views_enabled:
            return [ConfigIssue(key, "{...}", "is for the team views, which are off: turn on observability.teamViews")]
        if not any(tenant.groups for tenant in self.tenants):
            return [
                ConfigIssue(
                    key,
                    "{...}",
                    "signs in members of the teams' groups, and no tenant names any: set tenants[].groups",
                )
            ]
        return [
            ConfigIssue(
                ("tenants", i, "groups", j),
                group,
                "holds a space, a comma or a colon, which Grafana's org mapping cannot carry: name the group "
                "without them at the provider, or drop observability.teamViewsSignIn",
            )
            for i, tenant in enumerate(self.tenants)
            for j, group in enumerate(tenant.groups)
            if any(c.isspace() or c in ",:" for c in group)
        ]

    def _exposure_issues(self) -> list[ConfigIssue]:
        """With expose sni every API is <tenant>.<domain> on port 443: no domain, or a node port, is a mistake."""
        if self.vcluster.expose != "sni":
            return []
        issues = []
        if self.vcluster.domain is None:
            issues.append(
                ConfigIssue(
                    ("vcluster", "domain"),
                    MISSING,
                    "is required with vcluster.expose sni: each tenant's API is https://<tenant>.<domain>",
                )
            )
        issues += [
            ConfigIssue(
                ("tenants", i, "nodePort"),
                tenant.node_port,
                "is not used with vcluster.expose sni (every API is on the host's port 443): remove it",
            )
            for i, tenant in enumerate(self.tenants)
            if tenant.node_port is not None
        ]
        return issues

    def _capacity_issues(self) -> list[ConfigIssue]:
        """Quotas leave GPUs to KAI, node ports and load balancers to the platform, and fit the control plane."""
        issues = []
        sources: list[tuple[Path, dict[str, str]]] = [(("vcluster", "quota"), self.vcluster.quota)]
        sources += [(("tenants", i, "quota"), tenant.quota) for i, tenant in enumerate(self.tenants)]
        for path, quota in sources:
            for key in quota:
                if "nvidia.com/" in key:
                    reason = "KAI alone governs GPUs (a fraction never shows in a ResourceQuota): set queue quotas"
                else:
                    reason = PLATFORM_QUOTA_KEYS.get(key, "")
                if reason:
                    issues.append(ConfigIssue((*path, key), quota[key], f"is set by gpu-tenancy: {reason}"))
        for i, tenant in enumerate(self.tenants):
            limit_range = self.vcluster.limit_range_for(tenant)
            footprint = control_plane_footprint(
                {"default": limit_range.default, "defaultRequest": limit_range.default_request},
                self.vcluster.persistence_size,
            )
            quota = self.vcluster.quota_for(tenant, self.sized_gpus(tenant))
            for key, need in quota_shortfalls(quota, footprint).items():
                where: Path = ("tenants", i, "quota", key) if key in tenant.quota else ("vcluster", "quota", key)
                whose = f"tenant {tenant.name}'s" if key in tenant.quota else "each tenant's"
                shortfall = ConfigIssue(
                    where,
                    quota[key],
                    f"is less than {whose} own control plane and CoreDNS take ({format_quantity(key, need)}): raise it",
                )
                if all(issue.path != where for issue in issues):
                    issues.append(shortfall)
        return issues

    @property
    def bootstraps_host(self) -> bool:
        return self.host.mode in BOOTSTRAP_MODES

    def _fairness_issues(self) -> list[ConfigIssue]:
        """Time-based fairness reads usage from the stack's Prometheus, over a window it must still hold."""
        fairness, observability = self.fairness, self.observability
        if not fairness.time_based:
            return []
        if observability.mode == "off":
            return [
                ConfigIssue(
                    ("fairness", "timeBased"),
                    True,
                    "needs a Prometheus to read past GPU use from: set observability.mode to install, or to existing "
                    "with observability.prometheusUrl",
                )
            ]
        if observability.prometheus_address is None:
            return [
                ConfigIssue(
                    ("observability", "prometheusUrl"),
                    MISSING,
                    "is required by fairness.timeBased with mode existing: KAI reads past GPU use from it; set the "
                    "cluster's Prometheus URL as pods reach it",
                )
            ]
        retention = observability.retention_days * 86400
        if observability.mode == "install" and fairness.window_seconds > retention:
            return [
                ConfigIssue(
                    ("fairness", "windowSize"),
                    fairness.window_size,
                    f"is longer than the Prometheus it reads keeps (observability.retentionDays "
                    f"{observability.retention_days}): use at most {observability.retention_days}d, or keep more",
                )
            ]
        return []

    @property
    def queue_tree(self) -> QueueTree:
        return QueueTree(self.queues)

    @property
    def queue_limits(self) -> dict[str, float]:
        """Each queue's GPU limit (-1: none): the dashboards draw it, since no metric carries it."""
        return {queue.name: queue.resources.gpu.limit for queue in self.queues}

    def warnings(self) -> list[str]:
        """Legal but probably unintended settings, shown by `pulumi preview` as warnings."""
        shared = [
            f"tenants {', '.join(names)} share queue {queue!r}: they draw on one budget and can starve each other"
            for queue, names in self._tenants_by_queue().items()
            if len(names) > 1
        ]
        warnings = unassigned_warnings(self.queues) + shared + self._unverified_vclusters() + self._gpu_pod_room()
        return warnings + self._non_preemptible_room() + self._chart_syncer_roles() + self._machines_by_name()

    def _machines_by_name(self) -> list[str]:
        """Machines given by a DNS name: the workloads' NetworkPolicy blocks each machine's address, and a name has
        none offline (components/vcluster_tenant/network.py blocked_ranges), so tenant pods could reach that
        machine's kubelet, node ports and SSH unless vcluster.blockedEgress lists its addresses."""
        named: list[tuple[str, str]] = []
        if isinstance(self.host, (SshHost, KubeconfigHost)) and self.host.address:
            named.append(("host.address", self.host.address))
        if isinstance(self.host, SshHost):
            named += [(f"host.workers[{i}].address", w.address) for i, w in enumerate(self.host.workers)]
        if self.vcluster.blocked_egress:
            return []
        return [
            f"{key} = {address!r} is a DNS name, so tenant pods can reach that machine (its kubelet, node ports and "
            f"SSH) until vcluster.blockedEgress lists its addresses: add each as /32 (`dig +short {address}`), or "
            "give the address itself"
            for key, address in named
            if not _is_address(address)
        ]

    def _chart_syncer_roles(self) -> list[str]:
        """Tenants that keep the chart's host ClusterRole (vcluster_tenant/syncer_role.py)."""
        found = []
        for tenant in self.tenants:
            blocker = syncer_role_blocker(tenant.values, self.vcluster_version(tenant))
            if blocker is not None:
                found.append(
                    f"tenant {tenant.name} keeps the vCluster chart's host ClusterRole, so its syncer may read every "
                    f"team's pods (their env and ServiceAccount tokens), and its members get no queue view "
                    f"(docs/security.md): {blocker}"
                )
        return found

    def sized_gpus(self, tenant: TenantConfig) -> int:
        """The whole GPUs a tenant's quota is sized for: its queue's GPU limit, or the nearest ancestor's where it
        has none, or the root's quota; at least one (a fraction's pod takes a whole GPU's share of the machine)."""
        by_name = {queue.name: queue for queue in self.queues}
        queue = by_name.get(tenant.queue)
        while queue is not None:
            gpu = queue.resources.gpu
            if gpu.limit >= 0:
                return max(1, math.ceil(gpu.limit))
            if queue.parent_queue is None:
                return max(1, math.ceil(gpu.quota))
            queue = by_name.get(queue.parent_queue)
        return 1

    def _non_preemptible_room(self) -> list[str]:
        """Non-preemptible teams whose queue guarantees less than one GPU: KAI schedules a non-preemptible pod only
        within its queue's quota (kai-scheduler/KAI-Scheduler pkg/scheduler/plugins/proportion/capacity_policy/
        capacity_policy.go resultsWithNonPreemptibleOverQuota, read at 521a99a), so a whole GPU never runs."""
        index = {queue.name: i for i, queue in enumerate(self.queues)}
        warnings = []
        for i, tenant in enumerate(self.tenants):
            position = index.get(tenant.queue)
            if not tenant.non_preemptible or position is None:
                continue
            quota = self.queues[position].resources.gpu.quota
            if 0 <= quota < 1:
                warnings.append(
                    f"tenants[{i}].nonPreemptible: queue {tenant.queue!r} guarantees {quota:g} GPU, and KAI runs a "
                    "non-preemptible pod only within its queue's quota, so no pod of this team asking a whole GPU, and "
                    "no gang of more GPUs than the quota, ever runs: raise "
                    f"queues[{position}].resources.gpu.quota, or keep this team's pods to fractions"
                )
        return warnings

    def _gpu_pod_room(self) -> list[str]:
        """Tenants whose quota, as set, cannot hold one pod per GPU of their limit with a GPU's share each."""
        warnings = []
        share = self.vcluster.per_gpu.resources
        for i, tenant in enumerate(self.tenants):
            gpus = self.sized_gpus(tenant)
            quota = self.vcluster.quota_for(tenant, gpus)
            footprint = self.vcluster.footprint_for(tenant)
            for key, need in gpu_pod_shortfalls(quota, gpus, share, footprint).items():
                where = f"tenants[{i}].quota.{key}" if key in tenant.quota else f"vcluster.quota.{key}"
                warnings.append(
                    f"{where} = {quota[key]} cannot hold one pod per GPU of tenant {tenant.name}'s limit ({gpus}) "
                    f"with a GPU's share of the machines (vcluster.perGpu) beside its control plane: raise it to "
                    f"{format_quantity(key, need)}, or lower vcluster.perGpu"
                )
        return warnings

    def vcluster_version(self, tenant: TenantConfig) -> str:
        """The tenant's vCluster chart version: its own, or the stack's."""
        return tenant.vcluster_version or self.versions.vcluster or ""

    def _unverified_vclusters(self) -> list[str]:
        by_version: dict[str, list[str]] = {}
        for tenant in self.tenants:
            version = self.vcluster_version(tenant)
            if version != VCLUSTER_VERIFIED_VERSION:
                by_version.setdefault(version, []).append(tenant.name)
        return [
            f"tenants {', '.join(names)} run vCluster {version}: the fence and gangs were read against the "
            f"{VCLUSTER_VERIFIED_VERSION} syncer (docs/security.md); check what a team's objects become on the host "
            "before relying on them"
            for version, names in sorted(by_version.items())
        ]

    def _tenants_by_queue(self) -> dict[str, list[str]]:
        grouped: dict[str, list[str]] = {}
        for tenant in self.tenants:
            grouped.setdefault(tenant.queue, []).append(tenant.name)
        return grouped


def _prefixed(key: str, issues: list[ConfigIssue]) -> list[ConfigIssue]:
    return [ConfigIssue((key, *issue.path), issue.value, issue.message) for issue in issues]


def parse_stack_config(settings: dict[str, Any]) -> StackConfig:
    """Validate the `gpu-tenancy:*` settings (keys without the project prefix).

    Raises ConfigError listing every problem, each with its key path.
    """
    try:
        return StackConfig.model_validate(settings)
    except ValidationError as error:
        raise ConfigError(house_problems(error, StackConfig, ["host"])) from None

"""Observability: Prometheus scrapes KAI's queues and the GPUs, and Grafana shows them per team.

With mode install, kube-prometheus-stack comes first (it brings the ServiceMonitor
CRD); with existing, the cluster's own Prometheus Operator stack is used. Either way
the platform adds three ServiceMonitors (KAI's queue-controller and scheduler, and
dcgm-exporter with honorLabels, so the GPUs keep their pods' namespace instead of an
`exported_namespace`: NVIDIA/dcgm-exporter#85) and two dashboards.
"""

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.observability.dashboards import dashboard_files
from components.observability.prometheus_values import grafana_service, kube_prometheus_values
from components.observability.team_sign_in import TeamViewsSignIn
from components.observability.team_views import TeamViews, TeamViewsArgs
from components.shared.helm import ReleaseSpec, helm_release
from components.shared.labels import MANAGED_BY, object_name
from components.shared.ownership import owned
from config.observability.settings import ObservabilityConfig
from config.upstream import (
    DCGM_SERVICE,
    KAI_METRICS_SERVICES,
    KUBE_PROMETHEUS_STACK_CHART,
    KUBE_PROMETHEUS_STACK_REPO,
    SERVICE_MONITOR_API,
)

PRIVILEGED = {"pod-security.kubernetes.io/enforce": "privileged"}
# node-exporter uses the host's network, PID namespace and paths (prometheus-node-exporter chart 4.56.1
# values hostNetwork, hostPID, hostRootFsMount), which Pod Security allows only at privileged.
KAI_SCRAPE_INTERVAL = "30s"
DCGM_SCRAPE_INTERVAL = "15s"
GRAFANA_ADMIN_KEY = "admin-password"


@dataclass(frozen=True)
class _Scrape:
    key: str
    namespace: pulumi.Input[str]
    service: str
    port: str
    interval: str
    honor_labels: bool = False
    """Keep the scraped series' own namespace/pod labels (dcgm-exporter's are the GPU's pod's)."""
    after: Sequence[pulumi.Resource] = ()

    def spec(self) -> dict[str, object]:
        endpoint = {"port": self.port, "path": "/metrics", "interval": self.interval, "honorLabels": self.honor_labels}
        return {
            "selector": {"matchLabels": {"app": self.service}},
            "namespaceSelector": {"matchNames": [self.namespace]},
            # With more than one scheduler replica KAI makes the scheduler's Service selector-less and writes an
            # EndpointSlice for the leader itself (no Endpoints object): pkg/operator/operands/scheduler/
            # resources_for_shard.go endpointSliceForShard @v0.16.8. EndpointSlice discovery finds it, and
            # every other Service's as well.
            "serviceDiscoveryRole": "EndpointSlice",
            "endpoints": [endpoint],
        }


@dataclass(frozen=True)
class ObservabilityArgs:
    settings: ObservabilityConfig
    version: str | None
    """kube-prometheus-stack chart version; required with mode install."""
    kai_namespace: pulumi.Input[str]
    operator_namespace: str | None
    """Where dcgm-exporter runs (the GPU Operator's namespace); None when this stack leaves the GPUs alone."""
    gpus_ready: Sequence[pulumi.Resource]
    """The GPU Operator's namespace exists once these have finished."""
    leaf_queues: Sequence[str]
    limits: Mapping[str, float]
    """Each queue's GPU limit (-1: none), for the dashboards: no metric carries it."""
    kubectl_version: str
    """Tag of registry.k8s.io/kubectl for the chart's CRD upgrade job (versions.kubectl)."""
    microk8s: bool = False
    """The cluster is MicroK8s this stack built: its control plane runs in kubelite, its state in dqlite."""
    prometheus_node: pulumi.Input[str] | None = None
    """The node Prometheus, and its volume, stay on (the control-plane node); None: any."""
    secret_values: bool = False
    """`observability.values` holds a secret: the release's values are a Pulumi secret."""
    teams: Mapping[str, str] = field(default_factory=dict)
    """Team -> its host namespace, for the team views (observability.teamViews)."""
    team_limits: Mapping[str, float] = field(default_factory=dict)
    """Team -> its queue's GPU limit (-1: none)."""
    team_members: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """Team -> its members, each given a login of their own to the team's view."""
    team_member_tokens: Mapping[str, pulumi.Input[Mapping[str, str]]] = field(default_factory=dict)
    """Team -> member -> their vCluster token (secret), which their view's password is derived from."""
    team_sign_in: TeamViewsSignIn | None = None
    """Members sign in to the team views through the identity provider (observability.teamViewsSignIn)."""
    host_address: pulumi.Input[str] = ""
    """Where team members reach their views."""
    grafana_version: str = ""
    proxy_version: str = ""


class Observability(pulumi.ComponentResource):
    grafana: pulumi.Output[dict[str, str] | None]
    """With install: Grafana's in-cluster URL, how to reach it from a laptop, and its admin user."""
    grafana_admin_password: pulumi.Output[str | None]
    """With install: Grafana's admin password (secret)."""
    team_views: TeamViews | None
    """With observability.teamViews and at least one team: each team's login."""

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-tenancy:index:Observability", name, None, owned(opts))
        self._name = name
        self._args = args
        settings = args.settings
        child = pulumi.ResourceOptions(parent=self)
        namespace: pulumi.Input[str] = settings.namespace
        after: list[pulumi.Resource] = []
        self.grafana = pulumi.Output.from_input(None)
        self.grafana_admin_password = pulumi.Output.from_input(None)
        if settings.mode == "install":
            created = k8s.core.v1.Namespace(
                f"{name}-namespace",
                metadata={"name": settings.namespace, "labels": {**MANAGED_BY, **PRIVILEGED}},
                opts=child,
            )
            namespace = object_name(created)
            values = pulumi.Output.from_input(args.prometheus_node).apply(
                lambda node: kube_prometheus_values(
                    settings,
                    microk8s=args.microk8s,
                    kubectl_version=args.kubectl_version,
                    prometheus_node=node,
                    team_views=bool(args.teams) and settings.team_views_enabled,
                )
            )
            release = helm_release(
                f"{name}-stack",
                ReleaseSpec(
                    name=settings.release_name,
                    chart=KUBE_PROMETHEUS_STACK_CHART,
                    repo=KUBE_PROMETHEUS_STACK_REPO,
                    version=args.version or "",
                ),
                values=values,
                namespace=namespace,
                secret_values=args.secret_values,
                opts=child,
            )
            after = [release]
            self._grafana(namespace, release, child)
        self._monitors(after, child)
        k8s.core.v1.ConfigMap(
            f"{name}-dashboards",
            metadata={
                "name": "gpu-tenancy-dashboards",
                "namespace": namespace,
                "labels": {**MANAGED_BY, **settings.dashboard_labels},
            },
            data=dashboard_files(args.leaf_queues, args.limits),
            opts=child.merge(pulumi.ResourceOptions(depends_on=after)),
        )
        self.team_views = (
            self._team_views(namespace, after, child) if settings.team_views_enabled and args.teams else None
        )
        self.register_outputs({"grafana": self.grafana, "grafana_admin_password": self.grafana_admin_password})

    def _team_views(
        self, namespace: pulumi.Input[str], after: list[pulumi.Resource], opts: pulumi.ResourceOptions
    ) -> TeamViews:
        settings = self._args.settings
        return TeamViews(
            f"{self._name}-team-views",
            TeamViewsArgs(
                namespace=namespace,
                prometheus_url=settings.prometheus_address or "",
                teams=self._args.teams,
                limits=self._args.team_limits,
                members=self._args.team_members,
                member_tokens=self._args.team_member_tokens,
                sign_in=self._args.team_sign_in,
                price_per_gpu_hour=settings.price_per_gpu_hour,
                host_address=self._args.host_address,
                node_port=settings.team_views_node_port,
                grafana_version=self._args.grafana_version,
                proxy_version=self._args.proxy_version,
                rule_labels=settings.monitor_labels,
                rules_after=after,
            ),
            opts=opts,
        )

    def _monitors(self, after: list[pulumi.Resource], opts: pulumi.ResourceOptions) -> None:
        """One ServiceMonitor per scraped Service, beside it, labelled for the stack's Prometheus to pick."""
        scrapes = [
            _Scrape(key, self._args.kai_namespace, service, port, KAI_SCRAPE_INTERVAL, after=after)
            for key, (service, port) in KAI_METRICS_SERVICES.items()
        ]
        if self._args.operator_namespace is not None:
            service, port = DCGM_SERVICE
            gpus_after = [*after, *self._args.gpus_ready]
            namespace = self._args.operator_namespace
            scrapes.append(_Scrape("dcgm", namespace, service, port, DCGM_SCRAPE_INTERVAL, True, gpus_after))
        api_version, kind = SERVICE_MONITOR_API
        labels = {**MANAGED_BY, **self._args.settings.monitor_labels}
        for scrape in scrapes:
            k8s.apiextensions.CustomResource(
                f"{self._name}-{scrape.key}",
                api_version=api_version,
                kind=kind,
                # Not the operator's own name (queue-controller), which KAI's prometheus.enabled would take.
                metadata={"name": f"gpu-tenancy-{scrape.service}", "namespace": scrape.namespace, "labels": labels},
                spec=scrape.spec(),
                opts=opts.merge(pulumi.ResourceOptions(depends_on=list(scrape.after))),
            )

    def _grafana(
        self, namespace: pulumi.Input[str], release: k8s.helm.v3.Release, opts: pulumi.ResourceOptions
    ) -> None:
        """Grafana's address and its admin password, which its chart generates once and keeps in a Secret."""
        service = grafana_service(self._args.settings.release_name)
        secret = k8s.core.v1.Secret.get(
            f"{self._name}-grafana-admin",
            pulumi.Output.all(namespace, release.id).apply(lambda parts: f"{parts[0]}/{service}"),
            opts=opts,
        )
        self.grafana_admin_password = pulumi.Output.secret(
            secret.data.apply(lambda data: base64.b64decode(data[GRAFANA_ADMIN_KEY]).decode())
        )
        self.grafana = pulumi.Output.from_input(namespace).apply(
            lambda ns: {
                "url": f"http://{service}.{ns}.svc",
                "portForward": f"kubectl -n {ns} port-forward svc/{service} 3000:80",
                "browse": "http://localhost:3000",
                "adminUser": "admin",
            }
        )

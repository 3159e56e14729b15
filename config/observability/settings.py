"""`gpu-tenancy:observability`: who uses the GPUs, seen in Prometheus and Grafana.

`install` puts kube-prometheus-stack on the cluster (its Prometheus keeps the longest
cost window on a persistent volume); `existing` adds only the scrape configs and
dashboards to a Prometheus Operator stack that already runs (e.g. MicroK8s'
observability add-on); `off` does neither.
"""

from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from config.issues import MISSING, ConfigIssue, ConfigIssues
from config.owned_values import OwnedValues, owned_value_issues
from config.quantities import Quantity
from config.types import (
    NODE_PORT_RANGE,
    ConfigModel,
    HelmReleaseName,
    KubernetesName,
    PrometheusUrl,
    require_str,
)
from config.upstream import GRAFANA_DASHBOARD_LABEL, GRAFANA_SIDECAR_LABELS, MICROK8S_OBSERVABILITY_RELEASE

PROMETHEUS_PORT = 9090
"""prometheus.service.port (values.yaml @kube-prometheus-stack-88.5.3)."""


def installed_prometheus_url(release: str, namespace: str) -> str:
    """The installed Prometheus' in-cluster URL: <fullname>-prometheus, where fullname is the release name when it
    holds the chart's name, else <release>-kube-prometheus-stack, cut to 26 characters (templates/_helpers.tpl
    kube-prometheus-stack.fullname, templates/prometheus/service.yaml @kube-prometheus-stack-88.5.3)."""
    chart = "kube-prometheus-stack"
    fullname = (release if chart in release else f"{release}-{chart}")[:26].rstrip("-")
    return f"http://{fullname}-prometheus.{namespace}.svc:{PROMETHEUS_PORT}"


COST_WINDOW_DAYS = 31
"""The longest window `fairshare cost` is meant for: a month, with a day to spare."""

KUBE_PROMETHEUS_STACK_OWNED_VALUES: OwnedValues = {
    ("prometheus", "prometheusSpec", "retention"): "set observability.retentionDays instead",
    ("prometheus", "prometheusSpec", "storageSpec"): "set observability.storageSize and storageClass instead",
    ("kube-state-metrics", "metricLabelsAllowlist"): (
        "the dashboards and the cost report meet teams through the namespace labels it allows"
    ),
    ("grafana", "sidecar", "dashboards", "enabled"): "the dashboards are provisioned through the sidecar",
    ("crds", "upgradeJob"): "the CRDs are upgraded with the chart by its CRD upgrade job, with pinned images",
    ("grafana", "sidecar", "dashboards", "searchNamespace"): (
        "Grafana loads dashboards from observability.namespace only: a team's ConfigMap could replace the platform's"
    ),
}
"""kube-prometheus-stack values the platform sets (charts/kube-prometheus-stack/values.yaml @88.5.3)."""


def _https_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme != "https" or not parts.hostname:
        raise PydanticCustomError(
            "https_url",
            "is not an https URL: give the provider's endpoint, e.g. {example}",
            {"example": "https://login.example.com/realms/ml/protocol/openid-connect/auth"},
        )
    return value


HttpsUrl = Annotated[str, BeforeValidator(require_str), AfterValidator(_https_url)]


class TeamViewsSignInConfig(ConfigModel):
    """Members sign in to the team views through the identity provider of vcluster.oidc: Grafana's generic OAuth,
    as a public client with PKCE (no client secret), each member a Viewer of their groups' teams."""

    auth_url: HttpsUrl = Field(description="The provider's authorization endpoint (its discovery's).")
    token_url: HttpsUrl = Field(description="The provider's token endpoint (its discovery's).")
    client_id: str | None = Field(
        default=None, min_length=1, description="The client registered for the views; default vcluster.oidc.clientId."
    )


class ObservabilityConfig(ConfigModel):
    mode: Literal["off", "install", "existing"] = Field(
        default="off",
        description="install: kube-prometheus-stack at versions.kubePrometheusStack. existing: only "
        "ServiceMonitors and dashboards, for a Prometheus Operator stack already on the cluster. off: nothing.",
    )
    namespace: KubernetesName = Field(
        default="observability",
        description="install: the release's namespace (created, Pod Security privileged for node-exporter). "
        "existing: where the dashboards go (it must exist).",
    )
    release_name: HelmReleaseName = Field(default="kube-prometheus-stack", description="install: the Helm release.")
    retention_days: int = Field(
        default=35,
        ge=COST_WINDOW_DAYS,
        le=3650,
        description=f"install: how long Prometheus keeps data; at least {COST_WINDOW_DAYS}, the cost window.",
    )
    storage_size: Quantity = Field(default="50Gi", description="install: Prometheus' persistent volume.")
    storage_class: KubernetesName | None = Field(default=None, description="install: its StorageClass.")
    service_monitor_labels: dict[str, str] | None = Field(
        default=None,
        description="Labels the stack's Prometheus selects ServiceMonitors by. Default: release=<releaseName> "
        f"with install, release={MICROK8S_OBSERVABILITY_RELEASE} (MicroK8s' add-on) with existing.",
    )
    dashboard_labels: dict[str, str] = Field(
        default_factory=lambda: dict([GRAFANA_DASHBOARD_LABEL]),
        description="Labels Grafana's dashboard sidecar loads ConfigMaps by.",
    )
    values: dict[str, Any] = Field(
        default_factory=dict, description="install: kube-prometheus-stack values deep-merged over the platform's."
    )
    team_views: bool | None = Field(
        default=None,
        description="A Grafana login per team that shows its own GPU use and nothing of another team's "
        "(docs/teams.md). Default: on with install, off with existing.",
    )
    team_views_sign_in: TeamViewsSignInConfig | None = Field(
        default=None,
        description="Members sign in to their team's view through the identity provider (vcluster.oidc), as "
        "members of tenants[].groups, instead of with a login each.",
    )
    team_views_node_port: int = Field(
        default=30080,
        ge=NODE_PORT_RANGE.start,
        le=NODE_PORT_RANGE.stop - 1,
        description="The node port team members reach their views on, kept from one `up` to the next. The default "
        "is in the band the API server gives out at random last (KEP-3668: the lowest 86 ports).",
    )
    prometheus_url: PrometheusUrl | None = Field(
        default=None,
        description="existing: the cluster's Prometheus as its pods reach it, e.g. "
        "http://kube-prom-stack-kube-prome-prometheus.observability.svc:9090; required by teamViews.",
    )
    price_per_gpu_hour: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="What one GPU-hour costs, for the cost panel of each team's view; no cost panel without it.",
    )

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    @property
    def monitor_labels(self) -> dict[str, str]:
        if self.service_monitor_labels is not None:
            return self.service_monitor_labels
        release = self.release_name if self.mode == "install" else MICROK8S_OBSERVABILITY_RELEASE
        return {"release": release}

    @property
    def grafana_labels(self) -> tuple[str, ...]:
        """The labels Grafana loads ConfigMaps and Secrets by: its sidecars' own, and the dashboards' here. No tenant
        object may carry one, whatever the mode: a cluster that is not this stack's may run a Grafana too."""
        return tuple(dict.fromkeys([*GRAFANA_SIDECAR_LABELS, *self.dashboard_labels]))

    @property
    def prometheus_address(self) -> str | None:
        """The stack's Prometheus as pods reach it: the one it installs, or the existing one it was told of."""
        if self.mode == "install":
            return installed_prometheus_url(self.release_name, self.namespace)
        return self.prometheus_url if self.mode == "existing" else None

    @property
    def team_views_enabled(self) -> bool:
        return self.mode == "install" if self.team_views is None else self.team_views

    @model_validator(mode="after")
    def _platform_values_kept(self) -> "ObservabilityConfig":
        issues = owned_value_issues(self.values, KUBE_PROMETHEUS_STACK_OWNED_VALUES)
        if self.mode != "install" and self.values:
            issues.append(
                ConfigIssue(("values",), "{...}", "is used only with mode install: remove it, or install the stack")
            )
        issues += self._team_view_issues()
        if issues:
            raise ConfigIssues(issues)
        return self

    def _team_view_issues(self) -> list[ConfigIssue]:
        if self.mode == "off" and self.team_views:
            return [
                ConfigIssue(("teamViews",), "true", "needs a Prometheus: set observability.mode to install or existing")
            ]
        if self.mode == "install" and self.prometheus_url is not None:
            return [
                ConfigIssue(
                    ("prometheusUrl",),
                    self.prometheus_url,
                    "is for mode existing: with install the stack uses the Prometheus it installs; remove it",
                )
            ]
        if self.mode == "existing" and self.team_views and self.prometheus_url is None:
            return [
                ConfigIssue(
                    ("prometheusUrl",),
                    MISSING,
                    "is required by teamViews with mode existing: set the cluster's Prometheus URL as pods reach it, "
                    "e.g. http://kube-prom-stack-kube-prome-prometheus.observability.svc:9090",
                )
            ]
        return []

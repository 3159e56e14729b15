"""kube-prometheus-stack values (chart 88.5.3): a Prometheus that keeps the cost window, on a volume.

The chart's defaults keep 10 days on an emptyDir (values.yaml prometheus.prometheusSpec
retention, storageSpec @kube-prometheus-stack-88.5.3): a restart loses the history and
a month's cost cannot be read back. Retention is also capped by size, under the volume,
so a full disk never stops Prometheus.
"""

import math
from typing import Any

from components.observability.dashboards import NAMESPACE_LABELS_ALLOWLIST
from components.observability.team_rules import podgroup_read_rule, podgroup_state_metrics
from components.shared.merge import deep_merge
from config.observability.settings import ObservabilityConfig
from config.quantities import quantity
from config.upstream import HOSTNAME_LABEL, POD_GROUP_ANNOTATION

RETENTION_SIZE_SHARE = 0.85
"""Of the volume: the head block and the write-ahead log need the rest."""


def retention_size(storage_size: str) -> str:
    """Prometheus' size cap, in whole GiB, under the volume."""
    gib = float(quantity(storage_size)) / 2**30
    return f"{max(1, math.floor(gib * RETENTION_SIZE_SHARE))}GiB"


MICROK8S_COMPONENTS_OFF = {
    component: {"enabled": False} for component in ("kubeControllerManager", "kubeScheduler", "kubeProxy", "kubeEtcd")
}
"""MicroK8s runs the controller manager, scheduler and proxy inside kubelite and keeps its state in dqlite, not
etcd (canonical/microk8s build-scripts/components/kubernetes, microk8s-resources/default-args/kubelite @v1.36):
nothing answers the chart's scrapes of them, and their Kube*Down and etcd alerts would fire for ever. The chart
drops each one's scrape and alerts when it is not enabled (templates/prometheus/rules-1.14/
kubernetes-system-controller-manager.yaml, kubernetes-system-scheduler.yaml, kubernetes-system-kube-proxy.yaml,
etcd.yaml @kube-prometheus-stack-88.5.3)."""


CRD_UPGRADE_BUSYBOX = "1.37.0-musl"
"""The busybox the chart's CRD upgrade job decompresses the CRDs with (`sh -c bzcat`), pinned instead of the
chart's `latest`: docker-library/official-images library/busybox lists 1.37.0-musl."""


def crd_upgrade_job(kubectl_version: str) -> dict[str, Any]:
    """Helm installs a chart's crds/ once and never upgrades them; the chart's pre-upgrade hook Job applies them
    (server-side, taking them over from Helm) on every install, upgrade and rollback
    (templates/prometheus-operator/crds-upgrade @kube-prometheus-stack-88.5.3, off by default). Its kubectl image
    defaults to the cluster's version as a tag, which an EKS-style version (v1.33.5-eks-...) is not: pinned."""
    return {
        "enabled": True,
        "image": {"busybox": {"tag": CRD_UPGRADE_BUSYBOX}, "kubectl": {"tag": kubectl_version}},
    }


def team_view_state_metrics() -> dict[str, Any]:
    """kube-state-metrics, for the team views: each pod's PodGroup (the annotation KAI writes) and why each PodGroup
    waits (custom resource state, which needs to list and watch PodGroups; chart 8.4.0 templates/deployment.yaml,
    crs-configmap.yaml, role.yaml)."""
    return {
        "metricAnnotationsAllowList": [f"pods=[{POD_GROUP_ANNOTATION}]"],
        "customResourceState": {"enabled": True, "config": podgroup_state_metrics()},
        "rbac": {"extraRules": [podgroup_read_rule()]},
    }


def kube_prometheus_values(
    settings: ObservabilityConfig,
    *,
    microk8s: bool,
    kubectl_version: str,
    prometheus_node: str | None = None,
    team_views: bool = False,
) -> dict[str, Any]:
    """On MicroK8s, the scrapes it cannot answer are off (a stack's own values may turn them on again);
    `prometheus_node` keeps Prometheus, and its volume, on the node that holds it."""
    claim: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": settings.storage_size}},
    }
    if settings.storage_class:
        claim["storageClassName"] = settings.storage_class
    prometheus: dict[str, Any] = {
        "retention": f"{settings.retention_days}d",
        "retentionSize": retention_size(settings.storage_size),
        "storageSpec": {"volumeClaimTemplate": {"spec": claim}},
    }
    if prometheus_node is not None:
        # A microk8s-hostpath volume is a directory on the node its pod first ran on, and stays there; pinned like
        # the tenants' control planes, Prometheus keeps its history when a worker is removed.
        prometheus["nodeSelector"] = {HOSTNAME_LABEL: prometheus_node}
    platform = {
        "prometheus": {"prometheusSpec": prometheus},
        "kube-state-metrics": {
            "metricLabelsAllowlist": [NAMESPACE_LABELS_ALLOWLIST],
            **(team_view_state_metrics() if team_views else {}),
        },
        "crds": {"upgradeJob": crd_upgrade_job(kubectl_version)},
        # The chart's dashboard sidecar searches ALL namespaces (values.yaml @kube-prometheus-stack-88.5.3), where
        # the syncers copy teams' ConfigMaps with their labels: only the platform's namespace is read.
        "grafana": {"sidecar": {"dashboards": {"enabled": True, "searchNamespace": settings.namespace}}},
    }
    defaults = MICROK8S_COMPONENTS_OFF if microk8s else {}
    return deep_merge(deep_merge(defaults, settings.values), platform)


def grafana_service(release: str) -> str:
    """The Grafana Service (and admin Secret): <release>-grafana, or the release name when it says grafana
    (grafana-community/helm-charts charts/grafana/templates/_helpers.tpl grafana.fullname @grafana-12.11.1)."""
    name = release if "grafana" in release else f"{release}-grafana"
    return name[:63].rstrip("-")

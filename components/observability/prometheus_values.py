"""kube-prometheus-stack values (chart 88.5.3): a Prometheus that keeps the cost window, on a volume.

The chart's defaults keep 10 days on an emptyDir (values.yaml prometheus.prometheusSpec
retention, storageSpec @kube-prometheus-stack-88.5.3): a restart loses the history and
a month's cost cannot be read back. Retention is also capped by size, under the volume,
so a full disk never stops Prometheus.
"""

import math
from typing import Any

from components.observability.dashboards import NAMESPACE_LABELS_ALLOWLIST
from components.shared.merge import deep_merge
from config.observability.settings import ObservabilityConfig
from config.quantities import quantity

RETENTION_SIZE_SHARE = 0.85
"""Of the volume: the head block and the write-ahead log need the rest."""


def retention_size(storage_size: str) -> str:
    """Prometheus' size cap, in whole GiB, under the volume."""
    gib = float(quantity(storage_size)) / 2**30
    return f"{max(1, math.floor(gib * RETENTION_SIZE_SHARE))}GiB"


def kube_prometheus_values(settings: ObservabilityConfig) -> dict[str, Any]:
    claim: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": settings.storage_size}},
    }
    if settings.storage_class:
        claim["storageClassName"] = settings.storage_class
    platform = {
        "prometheus": {
            "prometheusSpec": {
                "retention": f"{settings.retention_days}d",
                "retentionSize": retention_size(settings.storage_size),
                "storageSpec": {"volumeClaimTemplate": {"spec": claim}},
            }
        },
        "kube-state-metrics": {"metricLabelsAllowlist": [NAMESPACE_LABELS_ALLOWLIST]},
        "grafana": {"sidecar": {"dashboards": {"enabled": True}}},
    }
    return deep_merge(settings.values, platform)


def grafana_service(release: str) -> str:
    """The Grafana Service (and admin Secret): <release>-grafana, or the release name when it says grafana
    (grafana-community/helm-charts charts/grafana/templates/_helpers.tpl grafana.fullname @grafana-12.11.1)."""
    name = release if "grafana" in release else f"{release}-grafana"
    return name[:63].rstrip("-")

"""What a team's view reads that is not already labelled with the team's namespace.

prom-label-proxy holds each team to `namespace="<its host namespace>"`. dcgm-exporter's GPU
series and kube-state-metrics' pod series carry it already; KAI's queue gauges carry KAI's own
namespace and the queue's name. Recording rules copy each queue gauge once per tenant namespace
whose `gpu-tenancy/queue` label names the queue (kube-state-metrics' kube_namespace_labels), so
the copy carries the team's namespace. The rules are the same for every team: adding a team
adds a namespace, not a rule.

Why a job waits is in its PodGroup's status.schedulingConditions (KAI's scheduler writes the
message there and in an event; pkg/scheduler/cache/status_updater/default_status_updater.go
markPodGroupUnschedulable @v0.16.8): kube-state-metrics' custom resource state turns each
condition into a series in the PodGroup's namespace, which is the team's.
"""

from typing import Any

from config.upstream import (
    KAI_QUEUE_ALLOCATED_GPUS,
    KAI_QUEUE_DESERVED_GPUS,
    KAI_QUEUE_FAIR_SHARE_GPU,
    KAI_QUEUE_LABEL,
    KSM_NAMESPACE_LABELS,
    POD_GROUP_API,
)
from fairshare.queries import KSM_QUEUE_LABEL

TEAM_ALLOCATED = "gpu_tenancy:team_allocated_gpus"
TEAM_DESERVED = "gpu_tenancy:team_deserved_gpus"
TEAM_FAIR_SHARE = "gpu_tenancy:team_fair_share_gpus"
PODGROUP_WAITING = "kai_podgroup_unschedulable_info"
"""One series per scheduling condition of a PodGroup, labelled namespace, podgroup, queue and KAI's message."""
RULE_GROUP = "gpu-tenancy-team-views"
RULE_INTERVAL = "30s"

_TEAM_QUEUES = (
    f'label_replace(max by (namespace, {KSM_QUEUE_LABEL}) ({KSM_NAMESPACE_LABELS}{{{KSM_QUEUE_LABEL}!=""}}), '
    f'"{KAI_QUEUE_LABEL}", "$1", "{KSM_QUEUE_LABEL}", "(.+)")'
)
"""One series per tenant namespace, carrying its queue under KAI's label name (`max by`: one per namespace even
while two kube-state-metrics replicas report it)."""


def _per_team(metric: str) -> str:
    """The queue's gauge, once per namespace of that queue: many namespaces to one queue is group_left."""
    return f"{_TEAM_QUEUES} * on ({KAI_QUEUE_LABEL}) group_left () sum by ({KAI_QUEUE_LABEL}) ({metric})"


def recording_rules() -> list[dict[str, str]]:
    return [
        {"record": TEAM_ALLOCATED, "expr": _per_team(KAI_QUEUE_ALLOCATED_GPUS)},
        {"record": TEAM_DESERVED, "expr": _per_team(KAI_QUEUE_DESERVED_GPUS)},
        {"record": TEAM_FAIR_SHARE, "expr": _per_team(KAI_QUEUE_FAIR_SHARE_GPU)},
    ]


def prometheus_rule_spec() -> dict[str, Any]:
    return {"groups": [{"name": RULE_GROUP, "interval": RULE_INTERVAL, "rules": recording_rules()}]}


def podgroup_state_metrics() -> dict[str, Any]:
    """kube-state-metrics' custom resource state for KAI's PodGroups (pkg/customresourcestate @v2.20.0: an Info
    metric over a list gives one series per element, labels from the element, value 1)."""
    group, version = POD_GROUP_API[0].split("/")
    return {
        "kind": "CustomResourceStateMetrics",
        "spec": {
            "resources": [
                {
                    "groupVersionKind": {"group": group, "version": version, "kind": POD_GROUP_API[1]},
                    "metricNamePrefix": "kai_podgroup",
                    "labelsFromPath": {
                        "namespace": ["metadata", "namespace"],
                        "podgroup": ["metadata", "name"],
                        "queue": ["spec", "queue"],
                    },
                    "metrics": [
                        {
                            "name": "unschedulable_info",
                            "help": "Why KAI did not schedule the PodGroup, per node pool (its scheduling conditions).",
                            "each": {
                                "type": "Info",
                                "info": {
                                    "path": ["status", "schedulingConditions"],
                                    "labelsFromPath": {
                                        "node_pool": ["nodePool"],
                                        "status": ["status"],
                                        "message": ["message"],
                                    },
                                },
                            },
                        }
                    ],
                }
            ]
        },
    }


def podgroup_read_rule() -> dict[str, Any]:
    return {"apiGroups": [POD_GROUP_API[0].split("/")[0]], "resources": ["podgroups"], "verbs": ["list", "watch"]}


def series_checks() -> list[dict[str, str]]:
    """What the views need from the cluster's Prometheus, as a team's data source asks for it, and what gives it. In
    `existing` mode the cluster provides these; the reconciler asks each cycle and logs what is missing."""
    return [
        {
            "query": f'{KSM_NAMESPACE_LABELS}{{{KSM_QUEUE_LABEL}!=""}}',
            "needs": "kube-state-metrics exporting the namespace label gpu-tenancy/queue "
            "(metricLabelsAllowlist: namespaces=[gpu-tenancy/queue,gpu-tenancy/tenant]), scraped with honorLabels",
        },
        {
            "query": TEAM_ALLOCATED,
            "needs": f"the PrometheusRule {RULE_GROUP} loaded (Prometheus selects rules by "
            "observability.serviceMonitorLabels) and KAI's queue-controller scraped",
        },
        {
            "query": "kube_pod_status_phase",
            "needs": "kube-state-metrics scraped with honorLabels, so pod series keep the pod's namespace",
        },
    ]

"""One team's dashboard, for its own Grafana organisation.

No query names a namespace: the organisation's only data source goes through prom-label-proxy,
which adds the team's namespace to every selector. The limit and the price are constants from
the stack config, since no metric carries them.
"""

from typing import Any

from components.observability.dashboards import FRACTIONS_NOTE, dashboard, panel, query_variable
from components.observability.team_rules import PODGROUP_WAITING, TEAM_ALLOCATED, TEAM_DESERVED, TEAM_FAIR_SHARE
from config.types import UNLIMITED
from config.upstream import DCGM_GPU_UTIL, DCGM_MEMORY_USED, KSM_POD_ANNOTATIONS, KSM_POD_PHASE, POD_GROUP_ANNOTATION

POD_GROUP_LABEL = "annotation_" + POD_GROUP_ANNOTATION.replace("-", "_")
"""kube-state-metrics' name for the pod-group-name annotation on kube_pod_annotations."""
TEAM_DATASOURCE_UID = "team-prometheus"
"""Every team organisation's one data source has this uid: the dashboard names it, not a variable a Viewer sets."""
TEAM_DATASOURCE = {"type": "prometheus", "uid": TEAM_DATASOURCE_UID}
PENDING = f'({KSM_POD_PHASE}{{phase="Pending"}} == 1)'
POD_VARIABLE = "pod"
GPU_HOURS = f"sum(sum_over_time({TEAM_ALLOCATED}[$__range:1m])) / 60"
"""GPU-hours over the dashboard's range: one sample a minute of what KAI allocated to the queue."""


def waiting_jobs() -> str:
    """Each waiting PodGroup with KAI's latest reason, kept only while one of its pods is still Pending (KAI leaves
    the condition in place once the group runs)."""
    pending_groups = (
        f'label_replace({KSM_POD_ANNOTATIONS}{{{POD_GROUP_LABEL}!=""}} * on (namespace, pod) group_left () {PENDING}, '
        f'"podgroup", "$1", "{POD_GROUP_LABEL}", "(.+)")'
    )
    return (
        f'max by (podgroup, queue, message) ({PODGROUP_WAITING}{{status="True"}}) '
        f"and on (podgroup) max by (podgroup) ({pending_groups})"
    )


def team_queries(limit: str | None, price: float | None) -> dict[str, list[tuple[str, str]]]:
    """Each panel's (PromQL, legend), by panel title; `limit` is the queue's GPU limit as PromQL (None: no limit)."""
    allocation = [
        (f"sum({TEAM_ALLOCATED})", "allocated"),
        (f"sum({TEAM_DESERVED})", "quota"),
        (f"sum({TEAM_FAIR_SHARE})", "fair share"),
    ]
    if limit is not None:
        allocation.append((f"vector({limit})", "limit"))
    usage = [(GPU_HOURS, "GPU-hours")]
    if price is not None:
        usage.append((f"{GPU_HOURS} * {price:g}", "cost"))
    pods = f'{{pod=~"${POD_VARIABLE}"}}'
    return {
        "GPUs: allocated, quota, fair share and limit": allocation,
        "GPU-hours and cost in the range": usage,
        "GPU utilisation of the team's pods": [(f"avg by (pod) ({DCGM_GPU_UTIL}{pods})", "{{pod}}")],
        "GPU memory used by the team's pods": [(f"sum by (pod) ({DCGM_MEMORY_USED}{pods})", "{{pod}}")],
        "Pods waiting": [(f"sum({PENDING}) or vector(0)", "pending pods")],
        "Why jobs wait": [(waiting_jobs(), "{{podgroup}}")],
    }


def limit_literal(limit: float) -> str | None:
    """A queue's GPU limit as the dashboard's PromQL writes it; None for a queue without one."""
    return None if limit == UNLIMITED else f"{limit:g}"


def team_dashboard(team: str, *, limit: str | None, price: float | None) -> dict[str, Any]:
    """`team` and `limit` are text put into the JSON as they are: the team views render each dashboard from one
    template with placeholders there (team_objects.desired_state)."""
    queries = team_queries(limit, price)
    layout = {
        "GPUs: allocated, quota, fair share and limit": ((0, 0, 16, 9), "none", "timeseries", False),
        "GPU-hours and cost in the range": ((16, 0, 8, 9), "none", "stat", True),
        "GPU utilisation of the team's pods": ((0, 9, 12, 8), "percent", "timeseries", False),
        "GPU memory used by the team's pods": ((12, 9, 12, 8), "mbytes", "timeseries", False),
        "Pods waiting": ((0, 17, 8, 8), "none", "timeseries", False),
        "Why jobs wait": ((8, 17, 16, 8), "none", "table", True),
    }
    descriptions = {
        "GPUs: allocated, quota, fair share and limit": "Allocated includes GPU fractions. Quota is guaranteed; fair "
        "share is KAI's live division of the pool; no limit line when the queue has none.",
        "GPU-hours and cost in the range": "GPUs KAI allocated to the team, summed over the time range"
        + ("; cost at the stack's price per GPU-hour." if price is not None else "."),
        "GPU utilisation of the team's pods": FRACTIONS_NOTE,
        "GPU memory used by the team's pods": FRACTIONS_NOTE,
        "Pods waiting": "The team's pods not yet running (waiting for KAI, an image or a volume).",
        "Why jobs wait": "Each waiting job (PodGroup) with KAI's reason, e.g. over the queue's limit or a gang "
        "that does not fit yet.",
    }
    panels = [
        panel(
            title,
            queries[title],
            position=position,
            unit=unit,
            kind=kind,
            instant=instant,
            description=descriptions[title],
            datasource=TEAM_DATASOURCE,
        )
        for title, (position, unit, kind, instant) in layout.items()
    ]
    pods = query_variable(
        POD_VARIABLE, f"label_values({DCGM_GPU_UTIL}, pod)", label="Pod", include_all=True, datasource=TEAM_DATASOURCE
    )
    return dashboard(f"gpu-tenancy-team-{team}", f"GPU use: {team}", [pods], panels)

"""Grafana dashboards as code: the fleet, and one team at a time.

Both read the default Prometheus through a `datasource` variable, so they work in
the stack this program installs and in one that already runs. The PromQL is
fairshare/queries.py's, which the cost report shares; the queue limits come from the
stack config, since no KAI metric carries them.
"""

import json
from collections.abc import Mapping, Sequence
from typing import Any

from config.names import QUEUE_NAMESPACE_LABEL, TENANT_LABEL
from config.upstream import KAI_QUEUE_LABEL, KSM_NAMESPACE_LABELS
from fairshare import queries

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
FRACTIONS_NOTE = (
    "dcgm-exporter maps a GPU to the pod that was given it as nvidia.com/gpu, so this covers whole-GPU pods "
    "only: a KAI GPU fraction's use shows under KAI's reservation pod, not the team."
)


def _target(
    expr: str, legend: str, ref: str, *, instant: bool = False, datasource: dict[str, str] = DATASOURCE
) -> dict[str, Any]:
    target: dict[str, Any] = {"datasource": datasource, "expr": expr, "legendFormat": legend, "refId": ref}
    if instant:
        # One value, evaluated at the end of the range: a range query of `..[$__range:1m]` would draw a series of
        # sliding windows, and a stat would show its last or mean value, not the range's.
        target.update({"instant": True, "range": False})
    return target


def panel(
    title: str,
    targets: Sequence[tuple[str, str]],
    *,
    position: tuple[int, int, int, int],
    unit: str,
    description: str = "",
    kind: str = "timeseries",
    instant: bool = False,
    datasource: dict[str, str] = DATASOURCE,
) -> dict[str, Any]:
    x, y, width, height = position
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": datasource,
        "gridPos": {"x": x, "y": y, "w": width, "h": height},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            _target(expr, legend, chr(ord("A") + i), instant=instant, datasource=datasource)
            for i, (expr, legend) in enumerate(targets)
        ],
    }


def _datasource_variable() -> dict[str, Any]:
    return {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus"}


def query_variable(
    name: str,
    query: str,
    *,
    label: str,
    hide: int = 0,
    include_all: bool = False,
    datasource: dict[str, str] = DATASOURCE,
) -> dict[str, Any]:
    variable = {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": datasource,
        "query": {"query": query, "refId": name},
        "definition": query,
        "refresh": 2,
        "hide": hide,
        "sort": 1,
    }
    if include_all:
        variable.update({"includeAll": True, "multi": True, "allValue": ".*"})
    return variable


def dashboard(uid: str, title: str, variables: list[dict[str, Any]], panels: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "uid": uid,
        "title": title,
        "tags": ["gpu-tenancy"],
        "schemaVersion": 39,
        "editable": False,
        "time": {"from": "now-7d", "to": "now"},
        "refresh": "1m",
        "templating": {"list": variables},
        "panels": panels,
    }


def _queue_selector(queues: Sequence[str]) -> str:
    return "|".join(queues)


def fleet_dashboard(leaf_queues: Sequence[str]) -> dict[str, Any]:
    """Every team's quota, fair share and allocation side by side, and each GPU node's load."""
    teams = _queue_selector(leaf_queues)
    legend = "{{" + KAI_QUEUE_LABEL + "}}"
    panels = [
        panel(
            "GPUs allocated per team",
            [(queries.allocated(teams), legend)],
            position=(0, 0, 12, 9),
            unit="none",
            description="What KAI has bound to each leaf queue's pods, GPU fractions included.",
        ),
        panel(
            "Quota, fair share and allocation now",
            [
                (queries.deserved(teams), f"quota {legend}"),
                (queries.fair_share(teams), f"fair share {legend}"),
                (queries.allocated(teams), f"allocated {legend}"),
            ],
            position=(12, 0, 12, 9),
            unit="none",
            kind="bargauge",
            description="Quota is the guarantee; fair share is KAI's live division of the pool.",
        ),
        panel(
            "GPU utilisation per node",
            [(queries.node_utilisation(), "{{Hostname}}")],
            position=(0, 9, 12, 8),
            unit="percent",
        ),
        panel(
            "GPU memory used per node",
            [(queries.node_memory_used(), "{{Hostname}}")],
            position=(12, 9, 12, 8),
            unit="mbytes",
        ),
    ]
    return dashboard("gpu-tenancy-fleet", "GPU tenancy: fleet", [_datasource_variable()], panels)


def team_dashboard(limits: Mapping[str, float]) -> dict[str, Any]:
    """One team, chosen by the `team` variable: its allocation against quota, fair share and limit."""
    tenant, queue = queries.KSM_TENANT_LABEL, queries.KSM_QUEUE_LABEL
    team_var = query_variable("team", f'label_values({KSM_NAMESPACE_LABELS}{{{tenant}!=""}}, {tenant})', label="Team")
    queue_var = query_variable(
        "queue",
        f'label_values({KSM_NAMESPACE_LABELS}{{{tenant}="$team"}}, {queue})',
        label="Queue",
        hide=2,
    )
    allocation = [
        (queries.allocated("$queue"), "allocated"),
        (queries.deserved("$queue"), "quota"),
        (queries.fair_share("$queue"), "fair share"),
    ]
    limit = queries.limits(limits, "$queue")
    if limit is not None:
        allocation.append((limit, "limit"))
    panels = [
        panel(
            "GPUs: allocated, quota, fair share and limit",
            allocation,
            position=(0, 0, 16, 9),
            unit="none",
            description="Allocated includes GPU fractions. A queue without a limit has no limit line.",
        ),
        panel(
            "Time over quota",
            [(queries.time_over_quota("$queue"), "over quota")],
            position=(16, 0, 8, 9),
            unit="percent",
            kind="stat",
            instant=True,
            description="Share of the dashboard's time range the team held more GPUs than its quota.",
        ),
        panel(
            "GPU utilisation of the team's pods",
            [(queries.utilisation("$queue"), "utilisation")],
            position=(0, 9, 12, 8),
            unit="percent",
            description=FRACTIONS_NOTE,
        ),
        panel(
            "GPU memory used by the team's pods",
            [(queries.memory_used("$queue"), "memory used")],
            position=(12, 9, 12, 8),
            # dcgm-exporter reports framebuffer in MiB: Grafana's mbytes (IEC), not decmbytes (SI megabytes).
            unit="mbytes",
            description=FRACTIONS_NOTE,
        ),
    ]
    variables = [_datasource_variable(), team_var, queue_var]
    return dashboard("gpu-tenancy-team", "GPU tenancy: team", variables, panels)


def dashboard_files(leaf_queues: Sequence[str], limits: Mapping[str, float]) -> dict[str, str]:
    """ConfigMap data: one JSON file per dashboard, as Grafana's sidecar loads them."""
    return {
        "gpu-tenancy-fleet.json": json.dumps(fleet_dashboard(leaf_queues), indent=1, sort_keys=True),
        "gpu-tenancy-team.json": json.dumps(team_dashboard(limits), indent=1, sort_keys=True),
    }


NAMESPACE_LABELS_ALLOWLIST = f"namespaces=[{QUEUE_NAMESPACE_LABEL},{TENANT_LABEL}]"
"""kube-state-metrics' metricLabelsAllowlist entry that lets the dashboards meet teams and queues."""

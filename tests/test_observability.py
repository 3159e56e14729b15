"""Observability: what is scraped, how, the dashboards' PromQL, and Grafana's outputs."""

import json
import re
from typing import Any

import promql_parser
import pytest
import yaml

from components.observability.dashboards import fleet_dashboard, team_dashboard
from components.observability.prometheus_values import retention_size
from config.quantities import quantity
from config.upstream import (
    DCGM_GPU_UTIL,
    DCGM_MEMORY_FREE,
    DCGM_MEMORY_USED,
    KAI_QUEUE_ALLOCATED_GPUS,
    KAI_QUEUE_DESERVED_GPUS,
    KAI_QUEUE_FAIR_SHARE_GPU,
    KAI_QUEUE_INFO,
    KSM_NAMESPACE_LABELS,
)
from fairshare import queries
from harness import GRAFANA_PASSWORD, ProgramRun, Registration, dev_settings, run_main
from tests.charts import chart_text
from tests.conftest import FAKE_KUBECONFIG, KUBE_PROMETHEUS_CHART

RELEASE = "kubernetes:helm.sh/v3:Release"
MONITOR = "kubernetes:monitoring.coreos.com/v1:ServiceMonitor"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
NAMESPACE = "kubernetes:core/v1:Namespace"

UPSTREAM_METRICS = {
    KAI_QUEUE_ALLOCATED_GPUS,
    KAI_QUEUE_DESERVED_GPUS,
    KAI_QUEUE_FAIR_SHARE_GPU,
    KAI_QUEUE_INFO,
    DCGM_GPU_UTIL,
    DCGM_MEMORY_USED,
    DCGM_MEMORY_FREE,
    KSM_NAMESPACE_LABELS,
}
"""Every metric the program may query, each read in its exporter's source (config/upstream.py)."""

# Grafana's variables (grafana.com/docs: variable syntax, global variables) become a placeholder before parsing;
# a `$1` in label_replace is PromQL's own and stays.
GRAFANA_DURATIONS = {"__range": "1h", "__rate_interval": "5m", "__interval": "1m"}
GRAFANA_VARIABLE = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\$([A-Za-z_]\w*)")


def metric_names(expr: str) -> set[str]:
    """The metrics an expression reads; a ValueError if it is not PromQL."""
    text = GRAFANA_VARIABLE.sub(lambda m: GRAFANA_DURATIONS.get(m.group(1) or m.group(2), "x"), expr)
    names: set[str] = set()

    def visit(node: Any) -> bool:
        if isinstance(node, promql_parser.MatrixSelector):
            node = node.vector_selector
        if isinstance(node, promql_parser.VectorSelector):
            assert node.name, f"a selector without a metric name: {expr}"
            names.add(node.name)
        return True

    promql_parser.walk(promql_parser.parse(text), visit)
    return names


def test_the_name_check_catches_what_is_not_promql_or_not_upstream() -> None:
    with pytest.raises(ValueError, match="parenthesis"):
        metric_names("sum(kai_queue_allocated_gpus")
    assert metric_names('rate(kai_queue_gpu_usage_total{a="$team"}[$__rate_interval])') == {"kai_queue_gpu_usage_total"}
    assert not {"kai_queue_gpu_usage_total"} <= UPSTREAM_METRICS


def _install() -> ProgramRun:
    return run_main(dev_settings())


def _existing(**observability: Any) -> ProgramRun:
    config = dev_settings()
    config["observability"] = {"mode": "existing", **observability}
    return run_main(config)


def _dashboards(run: ProgramRun) -> dict[str, dict[str, Any]]:
    data = run.one(CONFIG_MAP, "observability-dashboards").inputs["data"]
    return {name: json.loads(text) for name, text in data.items()}


def _expressions(dashboard: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            inner = re.fullmatch(r"label_values\((.+), \w+\)", variable["definition"])
            assert inner, variable
            exprs.append(inner.group(1))
    return exprs


@pytest.mark.parametrize("build", [_install, _existing], ids=["install", "existing"])
def test_every_dashboard_expression_parses_and_reads_only_upstream_metrics(build: Any) -> None:
    dashboards = _dashboards(build())
    assert set(dashboards) == {"gpu-tenancy-fleet.json", "gpu-tenancy-team.json"}
    for dashboard in dashboards.values():
        for expr in _expressions(dashboard):
            assert metric_names(expr) <= UPSTREAM_METRICS, expr


def test_the_cost_reports_queries_are_promql_on_upstream_metrics() -> None:
    for expr in (queries.allocated("a|b"), queries.utilisation("a|b")):
        assert metric_names(expr) <= UPSTREAM_METRICS


def test_the_team_view_is_chosen_by_a_team_variable_and_shows_the_limit() -> None:
    dashboard = team_dashboard({"ml-org": -1, "team-nlp": 1, "team-vision": 0.5})
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert set(variables) == {"datasource", "team", "queue"}
    assert "label_gpu_tenancy_tenant" in variables["team"]["definition"]
    assert '"$team"' in variables["queue"]["definition"], "the queue follows the team, through the namespace"
    panels = {p["title"]: p for p in dashboard["panels"]}
    allocation = panels["GPUs: allocated, quota, fair share and limit"]["targets"]
    assert [t["legendFormat"] for t in allocation] == ["allocated", "quota", "fair share", "limit"]
    limit = allocation[3]["expr"]
    assert 'vector(1), "queue_metadata_name", "team-nlp"' in limit
    assert 'vector(0.5), "queue_metadata_name", "team-vision"' in limit
    assert "ml-org" not in limit, "an uncapped queue has no limit line"
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            assert '"$queue"' in target["expr"], panel["title"]
    for title in ("GPU utilisation of the team's pods", "GPU memory used by the team's pods"):
        assert "whole-GPU pods only" in panels[title]["description"]
    assert "Time over quota" in panels


def test_the_fleet_view_covers_every_team_and_every_gpu_node() -> None:
    dashboard = fleet_dashboard(["team-nlp", "team-vision"])
    exprs = " ".join(_expressions(dashboard))
    assert '"team-nlp|team-vision"' in exprs
    assert {KAI_QUEUE_DESERVED_GPUS, KAI_QUEUE_FAIR_SHARE_GPU, KAI_QUEUE_ALLOCATED_GPUS, DCGM_GPU_UTIL} <= {
        name for expr in _expressions(dashboard) for name in metric_names(expr)
    }
    assert "by (Hostname)" in exprs


def _monitors(run: ProgramRun) -> dict[str, Registration]:
    return {r.name.removeprefix("observability-"): r for r in run.of_type(MONITOR)}


def test_kai_and_the_gpus_are_scraped_where_their_services_are(dev_install: ProgramRun) -> None:
    monitors = _monitors(dev_install)
    assert set(monitors) == {"queue-controller", "scheduler", "dcgm"}
    expected = {
        "queue-controller": ("kai-scheduler", "queue-controller", "metrics", False),
        "scheduler": ("kai-scheduler", "kai-scheduler-default", "http-metrics", False),
        "dcgm": ("gpu-operator-resources", "nvidia-dcgm-exporter", "gpu-metrics", True),
    }
    release = dev_install.one(RELEASE, "observability-stack")
    for key, (namespace, app, port, honor) in expected.items():
        monitor = monitors[key]
        spec = monitor.inputs["spec"]
        assert monitor.inputs["metadata"]["namespace"] == namespace
        assert monitor.inputs["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        assert spec["selector"] == {"matchLabels": {"app": app}}
        assert spec["namespaceSelector"] == {"matchNames": [namespace]}
        (endpoint,) = spec["endpoints"]
        assert (endpoint["port"], endpoint["honorLabels"]) == (port, honor), key
        assert monitor.depends_on(release), "the release brings the ServiceMonitor CRD"
    assert monitors["dcgm"].depends_on(dev_install.one("kubernetes:batch/v1:Job", "host-gpu-gate"))


@pytest.fixture(scope="module")
def dev_install() -> ProgramRun:
    return _install()


def _stack_values(run: ProgramRun) -> dict[str, Any]:
    values: dict[str, Any] = run.one(RELEASE, "observability-stack").inputs["values"]
    return values


def test_prometheus_keeps_a_month_on_a_volume(dev_install: ProgramRun) -> None:
    release = dev_install.one(RELEASE, "observability-stack").inputs
    assert (release["chart"], release["version"]) == ("kube-prometheus-stack", "88.5.3")
    assert release["repositoryOpts"]["repo"] == "https://prometheus-community.github.io/helm-charts"
    spec = _stack_values(dev_install)["prometheus"]["prometheusSpec"]
    assert int(spec["retention"].removesuffix("d")) >= 31
    claim = spec["storageSpec"]["volumeClaimTemplate"]["spec"]
    volume = quantity(claim["resources"]["requests"]["storage"])
    assert quantity(spec["retentionSize"].removesuffix("B")) < volume, "the size cap stays under the volume"
    namespace = dev_install.one(NAMESPACE, "observability-namespace").inputs["metadata"]
    assert namespace["labels"]["pod-security.kubernetes.io/enforce"] == "privileged", "node-exporter's host access"


def test_kube_state_metrics_exports_the_labels_teams_and_queues_meet_by(dev_install: ProgramRun) -> None:
    allowlist = _stack_values(dev_install)["kube-state-metrics"]["metricLabelsAllowlist"]
    assert allowlist == ["namespaces=[gpu-tenancy/queue,gpu-tenancy/tenant]"]


def _paths(values: Any, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    if not isinstance(values, dict):
        return set()
    return {p for key, value in values.items() for p in {(*prefix, key), *_paths(value, (*prefix, key))}}


def test_the_stack_values_are_keys_the_chart_defines(dev_install: ProgramRun) -> None:
    chart = yaml.safe_load(chart_text(KUBE_PROMETHEUS_CHART, "kube-prometheus-stack/values.yaml"))
    subchart = yaml.safe_load(
        chart_text(KUBE_PROMETHEUS_CHART, "kube-prometheus-stack/charts/kube-state-metrics/values.yaml")
    )
    free_form = (
        # A Prometheus StorageSpec, documented by the chart as a commented example.
        ("prometheus", "prometheusSpec", "storageSpec"),
        # A map the chart defines empty ({}), keyed by label.
        ("prometheus", "prometheusSpec", "nodeSelector"),
        # The kube-state-metrics subchart's custom resource state config ({}) and extra RBAC rules ([]).
        ("kube-state-metrics", "customResourceState", "config"),
        ("kube-state-metrics", "rbac", "extraRules"),
    )
    ours = {p for p in _paths(_stack_values(dev_install)) if not any(p[: len(f)] == f for f in free_form)}
    # kube-state-metrics' keys are its own chart's (8.4.0, which 88.5.3 brings).
    assert {p for p in ours if p[0] != "kube-state-metrics"} - _paths(chart) == set()
    assert {p[1:] for p in ours if p[0] == "kube-state-metrics" and len(p) > 1} - _paths(subchart) == set()
    assert ("prometheus", "prometheusSpec", "storageSpec") in _paths(chart)


def test_grafana_is_reached_by_port_forward_with_a_secret_password(dev_install: ProgramRun) -> None:
    grafana = dev_install.exports["grafana"].value
    assert grafana["portForward"] == "kubectl -n observability port-forward svc/kube-prometheus-stack-grafana 3000:80"
    password = dev_install.exports["grafanaAdminPassword"]
    assert (password.value, password.secret) == (GRAFANA_PASSWORD, True)


def test_an_existing_stack_gets_only_monitors_and_dashboards_labelled_for_it() -> None:
    run = _existing()
    assert not [r for r in run.of_type(RELEASE) if r.name == "observability-stack"]
    assert not [r for r in run.of_type(NAMESPACE) if r.name == "observability-namespace"]
    assert {m.inputs["metadata"]["labels"]["release"] for m in _monitors(run).values()} == {"kube-prom-stack"}
    assert (run.exports["grafana"].value, run.exports["grafanaAdminPassword"].value) == (None, None)
    custom = _existing(serviceMonitorLabels={"prometheus": "platform"}, dashboardLabels={"dashboards": "gpu"})
    for monitor in _monitors(custom).values():
        labels = monitor.inputs["metadata"]["labels"]
        assert labels["prometheus"] == "platform"
        assert "release" not in labels, "the given labels replace the default"
    labels = custom.one(CONFIG_MAP, "observability-dashboards").inputs["metadata"]["labels"]
    assert labels["dashboards"] == "gpu"


def test_a_cluster_whose_gpus_are_not_ours_to_manage_is_not_scraped_for_them() -> None:
    config = dev_settings()
    config["host"] = {"mode": "kubeconfig", "address": "203.0.113.30"}
    config["gpuOperator"] = {"mode": "skip"}
    config["versions"] = {k: v for k, v in config["versions"].items() if k != "gpuOperator"}
    run = run_main(config, {"kubeconfig": FAKE_KUBECONFIG})
    assert set(_monitors(run)) == {"queue-controller", "scheduler"}


def test_off_registers_nothing_of_it() -> None:
    config = dev_settings()
    config["observability"] = {"mode": "off"}
    run = run_main(config)
    assert not [r for r in run.registrations if r.name.startswith("observability")]
    assert "grafana" not in run.exports


@pytest.mark.parametrize(("size", "cap"), [("50Gi", "42GiB"), ("1Gi", "1GiB"), ("200G", "158GiB")])
def test_the_size_cap_is_under_the_volume(size: str, cap: str) -> None:
    assert retention_size(size) == cap


def test_framebuffer_memory_is_shown_in_mebibytes() -> None:
    """dcgm-exporter reports DCGM_FI_DEV_FB_USED in MiB: Grafana's mbytes; decmbytes would read them as SI MB."""
    for dashboard in (fleet_dashboard(["team-nlp"]), team_dashboard({})):
        memory = [p for p in dashboard["panels"] if "memory" in p["title"].lower()]
        assert memory
        assert {p["fieldConfig"]["defaults"]["unit"] for p in memory} == {"mbytes"}


def test_the_time_over_quota_stat_is_one_instant_value() -> None:
    (panel,) = [p for p in team_dashboard({})["panels"] if p["title"] == "Time over quota"]
    assert panel["type"] == "stat"
    assert all(t.get("instant") is True and t.get("range") is False for t in panel["targets"])


def test_every_scrape_finds_its_targets_by_endpointslice(dev_install: ProgramRun) -> None:
    """KAI's scheduler, with more than one replica, has a selector-less Service and an EndpointSlice of its own."""
    monitors = dev_install.of_type(MONITOR)
    assert monitors
    assert {m.inputs["spec"]["serviceDiscoveryRole"] for m in monitors} == {"EndpointSlice"}

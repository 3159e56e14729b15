"""Each tenant's fence on the host: Pod Security, its network, and its share of the node.

The mechanisms are vCluster's own `policies.*` and Pod Security admission. What is
checked here is what the program asks of them, as those mechanisms read it: the
enforced level, the egress the workloads' NetworkPolicy allows (its rule as
loft-sh/vcluster chart/templates/networkpolicy.yaml @v0.35.1 renders it, evaluated
for destinations a team might try), and a quota its own control plane fits in.
"""

from typing import Any

import pytest

from config.quantities import quantity
from config.vcluster_tenant.capacity import DEFAULT_LIMIT_RANGE, control_plane_footprint
from harness import ProgramRun, dev_settings, run_main
from tests.conftest import vcluster_schema_errors

RELEASE = "kubernetes:helm.sh/v3:Release"
NAMESPACE = "kubernetes:core/v1:Namespace"
TEAMS = ("team-nlp", "team-vision", "team-recommender")
# canonical/microk8s microk8s-resources/default-args/cni-env (IPv4_CLUSTER_CIDR) @v1.36.

Json = dict[str, Any]


def _run(**changes: Any) -> ProgramRun:
    config = dev_settings()
    for key, value in changes.items():
        config[key] = value
    return run_main(config)


@pytest.fixture(scope="module")
def dev_run() -> ProgramRun:
    return _run()


def _values(run: ProgramRun, team: str) -> Json:
    values: Json = run.one(RELEASE, f"{team}-vcluster").inputs["values"]
    return values


def _namespace_labels(run: ProgramRun, team: str) -> dict[str, str]:
    labels: dict[str, str] = run.one(NAMESPACE, f"{team}-namespace").inputs["metadata"]["labels"]
    return labels


# --- Pod Security -----------------------------------------------------------------------------------


@pytest.mark.parametrize("team", TEAMS)
def test_pod_security_baseline_is_enforced_on_the_host_and_inside(dev_run: ProgramRun, team: str) -> None:
    """Baseline refuses privileged pods, hostPath, hostNetwork, hostPID, hostIPC and added capabilities."""
    assert _namespace_labels(dev_run, team)["pod-security.kubernetes.io/enforce"] == "baseline"
    assert _values(dev_run, team)["policies"]["podSecurityStandard"] == "baseline"


def test_the_level_is_set_when_a_tenant_is_created(dev_run: ProgramRun) -> None:
    """A control plane cannot move between root and non-root, so neither its user nor the level follows a change."""
    namespace = dev_run.one(NAMESPACE, "team-nlp-namespace")
    assert namespace.ignore_changes == ['metadata.labels["pod-security.kubernetes.io/enforce"]']
    release = dev_run.one(RELEASE, "team-nlp-vcluster")
    assert {"values.controlPlane.statefulSet.security", "values.controlPlane.distro.k8s.securityContext"} <= set(
        release.ignore_changes
    )


def test_a_restricted_tenant_runs_its_control_plane_as_non_root() -> None:
    tenants = dev_settings()["tenants"]
    tenants[1]["podSecurity"] = "restricted"
    run = _run(tenants=tenants)
    assert _namespace_labels(run, "team-vision")["pod-security.kubernetes.io/enforce"] == "restricted"
    assert _namespace_labels(run, "team-nlp")["pod-security.kubernetes.io/enforce"] == "baseline"
    values = _values(run, "team-vision")
    security = values["controlPlane"]["statefulSet"]["security"]
    containers = [security["containerSecurityContext"], values["controlPlane"]["distro"]["k8s"]["securityContext"]]
    # What Pod Security's restricted level asks of every pod and container.
    assert security["podSecurityContext"]["runAsNonRoot"] is True
    assert security["podSecurityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for context in containers:
        assert context["runAsUser"] != 0
        assert context["runAsNonRoot"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
    assert vcluster_schema_errors(values) == []


# --- capacity ---------------------------------------------------------------------------------------


def _quota(values: Json) -> dict[str, str]:
    quota: dict[str, str] = values["policies"]["resourceQuota"]["quota"]
    assert values["policies"]["resourceQuota"]["enabled"] is True
    assert values["policies"]["limitRange"]["enabled"] is True
    return quota


@pytest.mark.parametrize("team", TEAMS)
def test_every_tenant_gets_a_quota_its_own_control_plane_fits_in(dev_run: ProgramRun, team: str) -> None:
    quota = _quota(_values(dev_run, team))
    footprint = control_plane_footprint(DEFAULT_LIMIT_RANGE, "5Gi")
    for key, need in footprint.items():
        assert quantity(quota[key]) >= need, key
    assert not [key for key in quota if "nvidia.com" in key], "GPUs are KAI's alone"


@pytest.mark.parametrize(
    ("tenant_values", "node_ports"),
    [
        ({}, "2"),
        ({"networking": {"advanced": {"proxyKubelets": {"byHostname": False}}}}, "1"),
    ],
    ids=["https-and-kubelet", "https-only"],
)
def test_a_tenant_may_take_exactly_the_node_ports_its_api_service_has(tenant_values: Json, node_ports: str) -> None:
    """Zero would refuse the control plane's own NodePort Service (loft-sh/vcluster#954); more would let a
    team take node ports promised to others."""
    tenants = dev_settings()["tenants"]
    tenants[0]["values"] = tenant_values
    quota = _quota(_values(_run(tenants=tenants), "team-nlp"))
    assert (quota["services.nodeports"], quota["services.loadbalancers"]) == (node_ports, "0")


def test_quotas_and_limit_ranges_are_set_per_tenant() -> None:
    tenants = dev_settings()["tenants"]
    tenants[2]["quota"] = {"count/pods": 80, "requests.cpu": "24"}
    tenants[2]["limitRange"] = {
        "default": {"cpu": "2", "memory": "1Gi", "ephemeral-storage": "8Gi"},
        "defaultRequest": {"cpu": "200m", "memory": "256Mi", "ephemeral-storage": "3Gi"},
    }
    run = _run(tenants=tenants, vcluster={"quota": {"count/pods": "40"}})
    assert _quota(_values(run, "team-nlp"))["count/pods"] == "40"
    custom = _values(run, "team-recommender")
    assert (_quota(custom)["count/pods"], _quota(custom)["requests.cpu"]) == ("80", "24")
    assert custom["policies"]["limitRange"]["default"]["cpu"] == "2"
    assert vcluster_schema_errors(custom) == []

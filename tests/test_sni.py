"""`vcluster.expose: sni`: every team's API on the host's port 443, routed by hostname, no node port at all."""

import shlex
from typing import Any

import pytest

from harness import ProgramRun, dev_settings, run_main
from tests.conftest import FAKE_KUBECONFIG, vcluster_schema_errors

RELEASE = "kubernetes:helm.sh/v3:Release"
ROUTE = "kubernetes:traefik.io/v1alpha1:IngressRouteTCP"
TEAMS = ("team-nlp", "team-vision", "team-recommender")


@pytest.fixture(scope="module")
def sni_run() -> ProgramRun:
    config = dev_settings()
    config["vcluster"] = {"expose": "sni", "domain": "gpu.example.com"}
    return run_main(config)


def _values(run: ProgramRun, team: str) -> dict[str, Any]:
    values: dict[str, Any] = run.one(RELEASE, f"{team}-vcluster").inputs["values"]
    return values


@pytest.mark.parametrize("team", TEAMS)
def test_each_team_is_reached_by_its_own_hostname_on_port_443(sni_run: ProgramRun, team: str) -> None:
    hostname = f"{team}.gpu.example.com"
    values = _values(sni_run, team)
    assert values["controlPlane"]["proxy"]["extraSANs"] == [hostname]
    assert values["exportKubeConfig"]["server"] == f"https://{hostname}"
    assert sni_run.exports["tenantEndpoints"].value[team] == f"https://{hostname}"
    assert vcluster_schema_errors(values) == []


@pytest.mark.parametrize("team", TEAMS)
def test_no_node_port_is_taken_and_none_is_allowed(sni_run: ProgramRun, team: str) -> None:
    values = _values(sni_run, team)
    assert values["controlPlane"].get("service", {}) == {}, "the chart's ClusterIP Service"
    assert values["policies"]["resourceQuota"]["quota"]["services.nodeports"] == "0"
    assert sni_run.exports["nodePorts"].value == {}


@pytest.mark.parametrize("team", TEAMS)
def test_traefik_passes_the_tls_connection_through_to_the_tenants_api(sni_run: ProgramRun, team: str) -> None:
    route = sni_run.one(ROUTE, f"{team}-route")
    assert route.inputs["metadata"]["namespace"] == f"vcluster-{team}", "beside the Service it routes to"
    assert route.inputs["spec"] == {
        "entryPoints": ["websecure"],
        "routes": [{"match": f"HostSNI(`{team}.gpu.example.com`)", "services": [{"name": team, "port": 443}]}],
        "tls": {"passthrough": True},
    }
    assert route.depends_on(sni_run.one(RELEASE, f"{team}-vcluster"))


def test_bootstrap_enables_microk8s_ingress_for_sni(sni_run: ProgramRun) -> None:
    _shell, _flag, script = shlex.split(sni_run.one("command:remote:Command", "host-addons").inputs["create"])
    assert "ADDONS='dns hostpath-storage ingress'\n" in script


def test_an_existing_cluster_brings_its_own_router() -> None:
    config = dev_settings()
    # No address needed: the teams' endpoints are hostnames, not node ports.
    config["host"] = {"mode": "kubeconfig"}
    config["vcluster"] = {"expose": "sni", "domain": "gpu.example.com"}
    run = run_main(config, {"kubeconfig": FAKE_KUBECONFIG})
    assert len(run.of_type(ROUTE)) == 3
    assert not run.of_type("command:remote:Command")

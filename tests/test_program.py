"""The real program, run under mocks with Pulumi.dev.yaml: what `pulumi up` would create, and in what order."""

import copy
from typing import Any

import pytest
import yaml

from components.shared.kubeconfigs import with_server
from config.vcluster_tenant.node_ports import hashed_port
from harness import (
    FAKE_HOST_KUBECONFIG,
    GRAFANA_PASSWORD,
    ProgramRun,
    Registration,
    dev_settings,
    run_main,
    stack_with_teams,
    tenant_kubeconfig,
)
from tests.charts import chart_text
from tests.conftest import KAI_CHART, queue_schema_errors

QUEUE = "kubernetes:scheduling.run.ai/v2:Queue"
RELEASE = "kubernetes:helm.sh/v3:Release"
JOB = "kubernetes:batch/v1:Job"
PROVIDER = "pulumi:providers:kubernetes"

TUTORIAL_GPU_SHARES = {
    "ml-org": {"quota": 1, "limit": -1, "overQuotaWeight": 1},
    "team-nlp": {"quota": 0.33, "limit": 1, "overQuotaWeight": 1},
    "team-vision": {"quota": 0.33, "limit": 1, "overQuotaWeight": 1},
    "team-recommender": {"quota": 0.33, "limit": 1, "overQuotaWeight": 1},
}
TEAMS = ("team-nlp", "team-vision", "team-recommender")
NOT_GOVERNED = {"quota": -1, "limit": -1, "overQuotaWeight": 1}


@pytest.fixture(scope="module")
def dev_run() -> ProgramRun:
    return run_main(dev_settings())


def _queues(run: ProgramRun) -> dict[str, Registration]:
    return {r.inputs["metadata"]["name"]: r for r in run.of_type(QUEUE)}


def test_dev_stack_renders_the_tutorial_queues_with_cpu_and_memory_explicit(dev_run: ProgramRun) -> None:
    queues = _queues(dev_run)
    assert set(queues) == set(TUTORIAL_GPU_SHARES)
    for name, registration in queues.items():
        spec = registration.inputs["spec"]
        assert spec["resources"] == {
            "gpu": TUTORIAL_GPU_SHARES[name],
            "cpu": NOT_GOVERNED,
            "memory": NOT_GOVERNED,
        }, name
        assert spec["priority"] == 100, name
        assert spec.get("parentQueue") == (None if name == "ml-org" else "ml-org"), name


def test_dev_stack_installs_kai_as_the_tutorial_does(dev_run: ProgramRun) -> None:
    release = dev_run.one(RELEASE, "kai-release").inputs
    assert release["chart"] == "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler"
    assert release["version"] == "v0.16.8"
    assert release["name"] == "kai-scheduler"
    assert release["namespace"] == "kai-scheduler"
    # The operator this stack installs runs CDI, so KAI's binder names GPUs the CDI way.
    # The default SchedulingShard is the platform's own (components/kai_scheduler/shard.py).
    assert release["values"] == {
        "global": {"gpuSharing": True, "blockNvidiaVisibleDevices": True},
        "binder": {"cdiEnabled": True},
        "defaultShard": {"enabled": False},
    }


def test_every_queue_waits_for_kai_to_admit_queues(dev_run: ProgramRun) -> None:
    gate = dev_run.one(JOB, "kai-gate")
    release = dev_run.one(RELEASE, "kai-release")
    assert gate.depends_on(release), "the gate must run after the release is installed"
    for name, queue in _queues(dev_run).items():
        assert queue.depends_on(gate), f"{name} does not wait for the KAI gate"


def test_children_are_created_after_and_deleted_before_their_parent(dev_run: ProgramRun) -> None:
    queues = _queues(dev_run)
    for name, queue in queues.items():
        parent = queue.inputs["spec"].get("parentQueue")
        if parent:
            assert queue.depends_on(queues[parent]), f"{name} does not depend on {parent}"
        # Queue names are fixed, so a replacement has to delete the old object first.
        assert queue.delete_before_replace, name


def test_every_kubernetes_resource_uses_the_explicit_host_provider(dev_run: ProgramRun) -> None:
    provider = dev_run.one(PROVIDER, "host-cluster")
    for registration in dev_run.registrations:
        if registration.type.startswith("kubernetes:"):
            assert registration.provider.startswith(provider.urn), registration.name


def test_the_provider_uses_the_hosts_kubeconfig_as_a_secret(dev_run: ProgramRun) -> None:
    provider = dev_run.one(PROVIDER, "host-cluster")
    assert "kubeconfig" in provider.secret_inputs
    assert provider.inputs["kubeconfig"] == FAKE_HOST_KUBECONFIG


GATE = "gpu-tenancy:index:Gate"


class _AnyPassword(str):
    """Equal to any 24-character password: pulumi-random makes them, the test does not."""

    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and len(other) == 24


ANY_PASSWORD = _AnyPassword("any")


def test_components_own_their_children(dev_run: ProgramRun) -> None:
    """Every resource sits under the component that made it; a gate's resources under its Gate, in turn."""
    by_urn = {r.urn: r for r in dev_run.registrations}
    owners = {
        "host": "GpuHost",
        "kai": "KaiScheduler",
        "tenant": "TenantAdmission",
        "observability": "Observability",
        "gangs": "GangController",
        "node": "NodePortMemory",
    }
    gated = 0
    for registration in dev_run.registrations:
        if registration.type == QUEUE:
            assert by_urn[registration.parent].type == "gpu-tenancy:index:QueueHierarchy"
        elif registration.type.startswith(("kubernetes:", "command:")):
            parent = by_urn[registration.parent]
            if parent.type == GATE:
                assert registration.name.startswith(parent.name), registration.name
                parent, gated = by_urn[parent.parent], gated + 1
            owner = owners.get(registration.name.split("-")[0], "VClusterTenant")
            if registration.name.startswith("observability-team-views-"):
                owner = "TeamViews"
            assert parent.type == f"gpu-tenancy:index:{owner}", registration.name
    # The GPU gate: account, two roles, two bindings, Job; KAI's: account, two roles, two bindings, files, Job.
    # A tenant's kubeconfig gate is its Job alone, the tenant's own child (one registration less per team).
    assert gated == 6 + 7


def test_stack_outputs(dev_run: ProgramRun) -> None:
    exports = {
        key: exported.value for key, exported in dev_run.exports.items() if key not in {"queuePlan", "nodePorts"}
    }
    assert exports == {
        "hostKubeconfig": FAKE_HOST_KUBECONFIG,
        "hostAddress": "198.51.100.7",
        "gpu": {"gpu-node-1": {"name": "NVIDIA-L40S", "memoryMiB": 46068, "driverVersion": "580.95.05", "count": 1}},
        "kaiNamespace": "kai-scheduler",
        "schedulerName": "kai-scheduler",
        "kaiReleaseStatus": "deployed",
        "queues": ["ml-org", "team-nlp", "team-vision", "team-recommender"],
        "leafQueues": ["team-nlp", "team-vision", "team-recommender"],
        "tenantKubeconfigs": {
            team: with_server(tenant_kubeconfig(team), f"https://198.51.100.7:{hashed_port(team, 'https')}")
            for team in TEAMS
        },
        "tenantEndpoints": {team: f"https://198.51.100.7:{hashed_port(team, 'https')}" for team in TEAMS},
        "memberKubeconfigs": {},
        "signInKubeconfigs": {},
        "grafana": {
            "url": "http://kube-prometheus-stack-grafana.observability.svc",
            "portForward": "kubectl -n observability port-forward svc/kube-prometheus-stack-grafana 3000:80",
            "browse": "http://localhost:3000",
            "adminUser": "admin",
        },
        "grafanaAdminPassword": GRAFANA_PASSWORD,
        # Each team's own login: one Grafana at one node port, a password per team.
        "teamViews": {
            team: {"url": exports["teamViews"]["team-nlp"]["url"], "login": team, "password": ANY_PASSWORD}
            for team in TEAMS
        },
        "memberTeamViews": {},
        "teamViewsCaCertificate": exports["teamViewsCaCertificate"],
    }
    assert exports["teamViews"]["team-nlp"]["url"].startswith("https://198.51.100.7:3")
    assert exports["teamViewsCaCertificate"].startswith("-----BEGIN CERTIFICATE-----\n")
    assert len({login["password"] for login in exports["teamViews"].values()}) == len(TEAMS)


def test_only_credentials_are_secret_outputs(dev_run: ProgramRun) -> None:
    secret = {key for key, exported in dev_run.exports.items() if exported.secret}
    assert secret == {
        "hostKubeconfig",
        "tenantKubeconfigs",
        "memberKubeconfigs",
        "grafanaAdminPassword",
        "teamViews",
        "memberTeamViews",
    }


def test_unassigned_guarantee_is_a_warning_not_an_error(dev_run: ProgramRun) -> None:
    assert any("ml-org" in warning and "0.01 GPU" in warning for warning in dev_run.warnings), dev_run.warnings


def _manifest(queue: Registration) -> dict[str, Any]:
    return copy.deepcopy({key: queue.inputs[key] for key in ("apiVersion", "kind", "metadata", "spec")})


def test_every_queue_is_valid_against_kais_queue_crd(dev_run: ProgramRun) -> None:
    errors = {name: queue_schema_errors(_manifest(queue)) for name, queue in _queues(dev_run).items()}
    assert not any(errors.values()), errors


def test_the_crd_check_catches_a_misspelled_field(dev_run: ProgramRun) -> None:
    manifest = _manifest(_queues(dev_run)["team-nlp"])
    manifest["spec"]["resources"]["gpu"]["overQuotaWieght"] = 1
    assert queue_schema_errors(manifest)


def _paths(values: dict[str, Any], prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    found = set()
    for key, value in values.items():
        path = (*prefix, key)
        found.add(path)
        if isinstance(value, dict):
            found |= _paths(value, path)
    return found


KAI_KEYS_READ_BY_TEMPLATES = {
    # Absent from values.yaml on purpose: set, it overrides the binder's CDI auto-detection
    # (kai-scheduler/KAI-Scheduler deployments/kai-scheduler/templates/_helpers.tpl `hasKey .Values.binder
    # "cdiEnabled"` @v0.16.8).
    ("binder", "cdiEnabled"),
}


def test_kai_values_only_use_keys_the_chart_reads(dev_run: ProgramRun) -> None:
    chart_values = yaml.safe_load(chart_text(KAI_CHART, "kai-scheduler/values.yaml"))
    rendered = dev_run.one(RELEASE, "kai-release").inputs["values"]
    unknown = _paths(rendered) - _paths(chart_values) - KAI_KEYS_READ_BY_TEMPLATES
    assert not unknown, f"keys the KAI chart does not read: {sorted(unknown)}"


def test_the_preview_shows_the_fair_share_plan_and_exports_it(dev_run: ProgramRun) -> None:
    (shown,) = [info for info in dev_run.infos if info.startswith("Fair-share plan")]
    assert "team-nlp alone: 1.00 GPU (rigid partition: 0.33)" in shown
    exported = dev_run.exports["queuePlan"]
    assert not exported.secret
    assert exported.value["capacity"] == 1
    assert exported.value["queues"]["team-vision"] == {
        "parent": "ml-org",
        "quota": 0.33,
        "limit": 1,
        "weight": 1,
        "priority": 100,
        "saturated": 0.33,
        "alone": 1,
        "rigid": 0.33,
    }


def test_a_team_costs_eight_registrations_and_each_member_one() -> None:
    """Every registration is a step of each `up` and `preview`, a row of the state and a billed resource: a team
    brings its component, namespace, workloads' NetworkPolicy, release, kubeconfig gate Job and read, queue and
    team views password (docs/scaling.md), with observability, team views and gangs on; what carries nothing of a
    team's own is shared. A member brings their token alone: their account is in the team's one release of
    accounts, and their team views password is derived from the token."""

    def registered(teams: int, members: int = 0) -> int:
        config = stack_with_teams(teams)
        config["tenants"][0]["members"] = [f"member-{i}" for i in range(members)]
        return len(run_main(config, shared=False).registrations)

    assert registered(4) - registered(3) == 8
    # The first member brings the provider inside the team's vCluster and the release of the members' accounts.
    assert registered(3, members=1) - registered(3) == 3
    assert registered(3, members=5) - registered(3, members=1) == 4

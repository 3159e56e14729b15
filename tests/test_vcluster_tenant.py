"""VClusterTenant under mocks: a vCluster per team, fenced into its queue, with a kubeconfig that works."""

import copy
import json
import subprocess
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from components.vcluster_tenant.members import (
    ACCOUNTS_RELEASE,
    BINDING,
    OBJECTS_CHART,
    OBJECTS_CHART_VERSION,
    SERVICE_ACCOUNT_ANNOTATION,
    accounts,
)
from config.names import MEMBERS_NAMESPACE
from config.types import NODE_PORT_RANGE
from harness import ROOT, ProgramRun, Registration, dev_settings, run_main, tenant_kubeconfig
from tests.charts import helm
from tests.conftest import vcluster_schema_errors

TEAMS = {"team-nlp": "team-nlp", "team-vision": "team-vision", "team-recommender": "team-recommender"}
RELEASE = "kubernetes:helm.sh/v3:Release"
NAMESPACE = "kubernetes:core/v1:Namespace"
JOB = "kubernetes:batch/v1:Job"
PROVIDER = "pulumi:providers:kubernetes"
SECRET = "kubernetes:core/v1:Secret"
ADMISSION = "kubernetes:admissionregistration.k8s.io/v1"


def _run(mutate: Any = None) -> ProgramRun:
    config = dev_settings()
    if mutate:
        mutate(config)
    return run_main(config)


@pytest.fixture(scope="module")
def dev_run() -> ProgramRun:
    return _run()


def _values(run: ProgramRun, team: str) -> dict[str, Any]:
    values: dict[str, Any] = copy.deepcopy(run.one(RELEASE, f"{team}-vcluster").inputs["values"])
    return values


@pytest.mark.parametrize(("team", "queue"), TEAMS.items())
def test_each_team_gets_a_namespace_and_a_vcluster_release(dev_run: ProgramRun, team: str, queue: str) -> None:
    namespace = dev_run.one(NAMESPACE, f"{team}-namespace").inputs["metadata"]
    assert namespace["name"] == f"vcluster-{team}"
    assert namespace["labels"]["gpu-tenancy/tenant"] == team
    assert namespace["labels"]["gpu-tenancy/queue"] == queue
    release = dev_run.one(RELEASE, f"{team}-vcluster").inputs
    assert (release["name"], release["chart"], release["version"]) == (team, "vcluster", "0.35.1")
    assert release["repositoryOpts"] == {"repo": "https://charts.loft.sh"}
    assert release["namespace"] == f"vcluster-{team}"


@pytest.mark.parametrize("team", TEAMS)
def test_vcluster_values_are_what_kai_and_the_teams_need(dev_run: ProgramRun, team: str) -> None:
    values = _values(dev_run, team)
    port = int(values["controlPlane"]["service"]["httpsNodePort"])
    assert values["experimental"]["syncSettings"]["setOwner"] is False
    assert values["sync"]["fromHost"]["nodes"] == {"enabled": True, "selector": {"all": True}}
    assert values["controlPlane"]["service"]["spec"]["type"] == "NodePort"
    assert values["controlPlane"]["proxy"]["extraSANs"] == ["198.51.100.7"]
    assert values["exportKubeConfig"] == {"server": f"https://198.51.100.7:{port}", "context": team}
    assert values["controlPlane"]["statefulSet"]["persistence"]["volumeClaim"]["enabled"] is True
    assert dev_run.exports["tenantEndpoints"].value[team] == f"https://198.51.100.7:{port}"


@pytest.mark.parametrize("team", TEAMS)
def test_vcluster_values_are_valid_against_the_charts_schema(dev_run: ProgramRun, team: str) -> None:
    assert vcluster_schema_errors(_values(dev_run, team)) == []


def test_the_schema_check_catches_a_misspelled_tenant_value() -> None:
    def misspell(config: dict[str, Any]) -> None:
        config["tenants"][0]["values"] = {"controlPlane": {"statefulSet": {"resourcess": {}}}}

    errors = vcluster_schema_errors(_values(_run(misspell), "team-nlp"))
    assert any("resourcess" in error for error in errors), errors


def test_tenant_values_are_merged_last() -> None:
    def tune(config: dict[str, Any]) -> None:
        config["tenants"][1]["values"] = {"controlPlane": {"statefulSet": {"resources": {"limits": {"memory": "4Gi"}}}}}

    values = _values(_run(tune), "team-vision")
    assert values["controlPlane"]["statefulSet"]["resources"] == {"limits": {"memory": "4Gi"}}
    assert values["controlPlane"]["statefulSet"]["persistence"]["volumeClaim"]["enabled"] is True
    assert vcluster_schema_errors(values) == []


SHAPES_THE_ROLE = "which shapes the syncer's host ClusterRole"
SYNCER_ROLE_CASES: dict[str, tuple[dict[str, Any], str | None, str | None]] = {
    "platform-values-alone": ({}, None, None),
    "a-setting-the-cluster-role-never-reads": ({"sync": {"toHost": {"ingresses": {"enabled": True}}}}, None, None),
    "host-storage-classes": (
        {"sync": {"fromHost": {"storageClasses": {"enabled": True}}}},
        None,
        f"its values set sync.fromHost.storageClasses.enabled, {SHAPES_THE_ROLE}",
    ),
    "its-own-configmap-mapping": (
        {"sync": {"fromHost": {"configMaps": {"enabled": True, "mappings": {"byName": {"a/b": "c/d"}}}}}},
        None,
        f"its values set sync.fromHost.configMaps.enabled, {SHAPES_THE_ROLE}",
    ),
    "extra-host-rules": (
        {"rbac": {"clusterRole": {"extraRules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}}},
        None,
        f"its values set rbac.clusterRole.extraRules, {SHAPES_THE_ROLE}",
    ),
    "an-unread-vcluster": (
        {},
        "0.37.0",
        "the syncer's host ClusterRole of vCluster 0.37.0 has not been read (read: 0.35.1, 0.35.3, 0.36.1)",
    ),
}


@pytest.mark.parametrize("name", SYNCER_ROLE_CASES)
def test_a_tenant_gets_the_narrowed_syncer_role_and_the_queue_view_unless_its_values_or_version_forbid(
    name: str,
) -> None:
    """Otherwise the tenant's values are the chart's to act on, and the preview says what that costs and why."""
    values, version, blocked = SYNCER_ROLE_CASES[name]

    def tenant(config: dict[str, Any]) -> None:
        config["tenants"][0]["values"] = values
        if version:
            config["tenants"][0]["vclusterVersion"] = version

    run = _run(tenant)
    given = _values(run, "team-nlp")
    mapping = given["sync"]["fromHost"].get("configMaps", {}).get("mappings", {}).get("byName", {})
    warnings = [w for w in run.warnings if "host ClusterRole" in w]
    if blocked is None:
        assert mapping == {"/gpu-tenancy-queue": "gpu-tenancy/queue"}
        rules = given["rbac"]["clusterRole"]["overwriteRules"]
        assert "pods" not in {resource for rule in rules for resource in rule["resources"]}
        assert warnings == []
    else:
        assert "/gpu-tenancy-queue" not in mapping
        assert "overwriteRules" not in given.get("rbac", {}).get("clusterRole", {})
        (warning,) = warnings
        assert warning.startswith("tenant team-nlp keeps the vCluster chart's host ClusterRole, so its syncer may read")
        assert warning.endswith(f"no queue view (docs/security.md): {blocked}")


def test_node_ports_are_unique_and_in_the_node_port_range(dev_run: ProgramRun) -> None:
    ports = [_values(dev_run, team)["controlPlane"]["service"]["httpsNodePort"] for team in TEAMS]
    assert len(set(ports)) == len(ports)
    assert all(port in NODE_PORT_RANGE for port in ports)


def test_an_explicit_node_port_wins() -> None:
    run = _run(lambda c: c["tenants"][0].update(nodePort=30090))
    assert _values(run, "team-nlp")["controlPlane"]["service"]["httpsNodePort"] == 30090


def _tenant_resources(run: ProgramRun, team: str) -> dict[tuple[str, str], Any]:
    by_urn = {r.urn: r.name for r in run.registrations}
    return {
        (r.type, r.name): (r.inputs, sorted(by_urn.get(d, d) for d in r.dependencies))
        for r in run.registrations
        if r.name.startswith(team) or r.inputs.get("metadata", {}).get("name") == f"gpu-tenancy-{team}-queue"
    }


def test_adding_a_fourth_team_changes_no_existing_tenant(dev_run: ProgramRun) -> None:
    def add_team(config: dict[str, Any]) -> None:
        for queue in config["queues"][1:]:
            queue["resources"]["gpu"]["quota"] = 0.25
        config["queues"].append(
            {"name": "team-speech", "parentQueue": "ml-org", "resources": {"gpu": {"quota": 0.25, "limit": 1}}}
        )
        config["tenants"].append({"name": "team-speech", "queue": "team-speech"})

    bigger = _run(add_team)
    for team in TEAMS:
        assert _tenant_resources(bigger, team) == _tenant_resources(dev_run, team), team
    assert bigger.one(RELEASE, "team-speech-vcluster")


@pytest.mark.parametrize("team", TEAMS)
def test_a_tenants_vcluster_starts_only_once_the_tenant_policies_exist(dev_run: ProgramRun, team: str) -> None:
    release = dev_run.one(RELEASE, f"{team}-vcluster")
    bindings = [
        r
        for r in dev_run.registrations
        if r.type.startswith(ADMISSION) and r.type.endswith("Binding") and "TenantAdmission" in r.urn
    ]
    assert len(bindings) == 9
    tenants = {"matchExpressions": [{"key": "gpu-tenancy/tenant", "operator": "Exists"}]}
    for binding in bindings:
        if binding.inputs["spec"]["policyName"] == "gpu-tenancy-gang-consistency":
            # It waits for KAI (tests/test_lab_kai_installing.py); until then gang pods only wait.
            assert not release.depends_on(binding), "the control plane would wait for KAI"
            continue
        assert release.depends_on(binding), f"no synced pod may come before {binding.name}"
        selector = binding.inputs["spec"]["matchResources"]["namespaceSelector"]
        if binding.inputs["spec"]["policyName"] == "gpu-tenancy-tenant-non-preemptible":
            assert selector == {**tenants, "matchLabels": {"gpu-tenancy/preemptibility": "non-preemptible"}}
            continue
        assert selector == tenants
    labels = dev_run.one(NAMESPACE, f"{team}-namespace").inputs["metadata"]["labels"]
    assert (labels["gpu-tenancy/tenant"], labels["gpu-tenancy/queue"]) == (team, TEAMS[team])


def test_validate_only_mode_has_no_mutation() -> None:
    run = _run(lambda c: c.update(vcluster={"admission": "validate"}))
    kinds = {r.type.rsplit(":", 1)[1] for r in run.registrations if r.type.startswith(ADMISSION)}
    assert kinds == {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}


@pytest.mark.parametrize("team", TEAMS)
def test_the_kubeconfig_is_read_only_after_the_control_plane_published_it(dev_run: ProgramRun, team: str) -> None:
    release = dev_run.one(RELEASE, f"{team}-vcluster")
    gate = dev_run.one(JOB, f"{team}-ready")
    assert gate.depends_on(release)
    assert gate.inputs["metadata"]["namespace"] == f"vcluster-{team}"
    (read,) = [r for r in dev_run.registrations if r.read and r.name == f"{team}-kubeconfig"]
    assert read.import_id == f"vcluster-{team}/vc-{team}"
    assert dev_run.registrations.index(read) > dev_run.registrations.index(gate)


def _servers(kubeconfig: str) -> list[str]:
    return [cluster["cluster"]["server"] for cluster in yaml.safe_load(kubeconfig)["clusters"]]


def test_tenant_kubeconfigs_name_the_endpoint_the_platform_knows(dev_run: ProgramRun) -> None:
    """The Secret in the mocks names an old endpoint, as one does until a restarted control plane rewrites it."""
    kubeconfigs = dev_run.exports["tenantKubeconfigs"]
    endpoints = dev_run.exports["tenantEndpoints"]
    assert kubeconfigs.secret
    assert not endpoints.secret
    assert set(kubeconfigs.value) == set(endpoints.value) == set(TEAMS)
    for team, kubeconfig in kubeconfigs.value.items():
        assert _servers(tenant_kubeconfig(team)) != [endpoints.value[team]], "the mocks must start from a stale one"
        assert _servers(kubeconfig) == [endpoints.value[team]]
        assert yaml.safe_load(kubeconfig)["users"] == yaml.safe_load(tenant_kubeconfig(team))["users"]


def _provider_of(run: ProgramRun, registration: Registration) -> Registration:
    (provider,) = [p for p in run.of_type(PROVIDER) if registration.provider.startswith(p.urn)]
    return provider


def test_addons_go_in_through_the_tenants_own_api_server() -> None:
    def addons(config: dict[str, Any]) -> None:
        config["tenants"][0]["addons"] = [
            {
                "name": "kuberay",
                "chart": {
                    "repo": "https://ray-project.github.io/kuberay-helm",
                    "chart": "kuberay-operator",
                    "version": "1.4.2",
                },
            },
            {
                "name": "team-crds",
                "manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "team-settings"}}],
            },
        ]

    run = _run(addons)
    chart = run.one(RELEASE, "team-nlp-addon-kuberay")
    group = run.one("kubernetes:yaml/v2:ConfigGroup", "team-nlp-addon-team-crds")
    for addon in (chart, group):
        provider = _provider_of(run, addon)
        assert provider.name == "team-nlp-vcluster", addon.name
        assert "kubeconfig" in provider.secret_inputs
        assert provider.inputs["kubeconfig"] == run.exports["tenantKubeconfigs"].value["team-nlp"]
        # From config alone, so an unknown kubeconfig (a preview) never plans the add-ons' replacement.
        assert provider.inputs["clusterIdentifier"] == "brev/gpu-tenancy-dev/vcluster/team-nlp"
    assert (chart.inputs["chart"], chart.inputs["version"], chart.inputs["namespace"]) == (
        "kuberay-operator",
        "1.4.2",
        "kuberay",
    )
    assert not any(r.name.startswith("team-vision-addon") for r in run.registrations)


def test_a_new_persistence_setting_applies_to_new_tenants_and_leaves_existing_ones_alone(dev_run: ProgramRun) -> None:
    """volumeClaimTemplates cannot change on a running StatefulSet: the change stays under ignore_changes."""
    changed = _run(lambda c: c.update(vcluster={"persistenceSize": "20Gi", "storageClass": "fast"}))
    for team in TEAMS:
        release = changed.one(RELEASE, f"{team}-vcluster")
        before, after = _values(dev_run, team), _values(changed, team)
        assert after["controlPlane"]["statefulSet"]["persistence"]["volumeClaim"]["size"] == "20Gi"
        differing = _differences(before, after)
        assert differing, "the new setting is rendered (a new tenant gets it)"
        ignored = [tuple(path.split(".")[1:]) for path in release.ignore_changes]
        assert all(any(path[: len(i)] == i for i in ignored) for path in differing), (differing, ignored)


def _differences(before: Any, after: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if isinstance(before, dict) and isinstance(after, dict):
        return [
            d
            for key in before.keys() | after.keys()
            for d in _differences(before.get(key), after.get(key), (*path, key))
        ]
    return [] if before == after else [path]


def _members_run(members: list[str]) -> ProgramRun:
    def named(config: dict[str, Any]) -> None:
        config["tenants"][0]["members"] = members

    return _run(named)


def test_each_member_gets_an_account_a_token_and_a_kubeconfig_of_their_own_inside_the_vcluster() -> None:
    """Everything goes through the team's own API server: the accounts in one release of the team's, each token
    registered after it; the kubeconfigs are secret and name the member."""
    run = _members_run(["bob", "alice"])
    inside = [r for r in run.registrations if r.provider and "::team-nlp-vcluster::" in r.provider]
    assert sorted((r.type.rsplit(":", 1)[1], r.name) for r in inside) == [
        ("Release", "team-nlp-members"),
        ("Secret", "team-nlp-member-alice-token"),
        ("Secret", "team-nlp-member-bob-token"),
    ]
    release = run.one(RELEASE, "team-nlp-members")
    assert (release.inputs["name"], release.inputs["namespace"]) == (ACCOUNTS_RELEASE, "kube-system")
    assert release.inputs["chart"] == OBJECTS_CHART
    objects = {(o["kind"], o["metadata"]["name"]): o for o in release.inputs["values"]["objects"]}
    assert set(objects) == {
        ("Namespace", MEMBERS_NAMESPACE),
        ("ServiceAccount", "alice"),
        ("ServiceAccount", "bob"),
        ("ClusterRoleBinding", BINDING),
    }
    binding = objects[("ClusterRoleBinding", BINDING)]
    assert binding["roleRef"]["name"] == "cluster-admin"
    assert [(s["name"], s["namespace"]) for s in binding["subjects"]] == [
        ("alice", MEMBERS_NAMESPACE),
        ("bob", MEMBERS_NAMESPACE),
    ]
    for member in ("alice", "bob"):
        token = run.one(SECRET, f"team-nlp-member-{member}-token")
        assert release.urn in token.dependencies, "the token is asked for once its ServiceAccount exists"
        assert token.inputs["metadata"]["annotations"][SERVICE_ACCOUNT_ANNOTATION] == member
    exported = run.exports["memberKubeconfigs"]
    assert exported.secret
    alice = yaml.safe_load(exported.value["team-nlp"]["alice"])
    assert alice["users"] == [{"name": "team-nlp-alice", "user": {"token": "token-of-alice"}}]
    assert alice["clusters"][0]["cluster"]["server"] == run.exports["tenantEndpoints"].value["team-nlp"]
    assert set(exported.value) == {"team-nlp"}, "teams without members get none, and no provider of their own"


def test_the_objects_chart_is_the_version_the_program_installs() -> None:
    """The release names the chart by its path from the project's root, where the engine starts providers, and
    by version: a change to the chart that keeps its version would reach no team's release."""
    chart = yaml.safe_load((ROOT / OBJECTS_CHART / "Chart.yaml").read_text())
    assert chart["version"] == OBJECTS_CHART_VERSION


@given(members=st.lists(st.from_regex(r"[a-z]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True), min_size=1, max_size=4))
@settings(max_examples=5, deadline=None)
def test_the_real_helm_renders_the_members_accounts_as_the_program_builds_them(members: list[str]) -> None:
    """`helm template` of the program's chart (the real Helm) gives back exactly the objects in its values."""
    values = {"objects": accounts(members)}
    rendered = subprocess.run(
        [str(helm()), "template", ACCOUNTS_RELEASE, str(ROOT / OBJECTS_CHART), "--values", "-"],
        input=json.dumps(values),
        capture_output=True,
        text=True,
        check=True,
    )
    assert [d for d in yaml.safe_load_all(rendered.stdout) if d] == values["objects"]


def test_removing_a_member_removes_only_their_token_and_account() -> None:
    """The token is the member's only registration; their account leaves the team's release, which Helm
    upgrades in place."""
    runs = {members: _members_run(list(members)) for members in (("alice", "bob"), ("bob",))}
    before, after = ({r.name for r in run.registrations} for run in runs.values())
    assert before - after == {"team-nlp-member-alice-token"}
    assert after <= before
    accounts = {
        members: {o["metadata"]["name"] for o in run.one(RELEASE, "team-nlp-members").inputs["values"]["objects"]}
        for members, run in runs.items()
    }
    assert accounts[("alice", "bob")] - accounts[("bob",)] == {"alice"}


def test_every_kubernetes_provider_updates_config_maps_and_secrets_in_place() -> None:
    """The host's and each tenant's: otherwise a change of a fixed-name ConfigMap's or Secret's contents is a
    replacement that fails on the real engine (components/shared/providers.py, tests/test_lab_engine.py)."""
    run = _members_run(["alice"])
    providers = [r for r in run.registrations if r.type == PROVIDER]
    assert {r.name for r in providers} == {"host-cluster", "team-nlp-vcluster"}
    for provider in providers:
        assert (provider.inputs["enableConfigMapMutable"], provider.inputs["enableSecretMutable"]) == ("true", "true")

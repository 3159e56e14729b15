"""vcluster.oidc and observability.teamViewsSignIn under mocks and real Helm: what signing in through the identity
provider registers and renders.

What the real API server makes of the provider's tokens is in tests/test_lab_tenants.py (the real vCluster).
"""

import configparser
import functools
from typing import Any

import pytest
import yaml

from components.observability.team_objects import grafana_ini
from harness import ProgramRun, dev_settings, run_main
from tests.charts import chart_file_for, render
from tests.network_policy import Pod, Target
from tests.oidc_provider import IdentityProvider
from tests.test_tenant_network import world

Json = dict[str, Any]
RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
BINDING = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
TEAMS = ("team-nlp", "team-vision", "team-recommender")
ISSUER = "https://login.example.com/realms/ml"


@functools.cache
def _ca() -> str:
    provider = IdentityProvider("127.0.0.1")
    provider.close()
    return provider.ca_pem


def _oidc(**fields: Any) -> Json:
    return {"issuerUrl": ISSUER, "clientId": "gpu-tenancy", "addresses": ["203.0.113.0/28"], **fields}


def _run(oidc: Json | None, *, groups: list[str] | None = None, values: Json | None = None) -> ProgramRun:
    config = dev_settings()
    if oidc is not None:
        config.setdefault("vcluster", {})["oidc"] = oidc
    if groups is not None:
        config["tenants"][0]["groups"] = groups
    if values is not None:
        config["tenants"][0]["values"] = values
    return run_main(config)


@pytest.fixture(scope="module")
def signed_in() -> ProgramRun:
    return _run(_oidc(certificateAuthority=_ca()), groups=["ml-nlp", "ml-platform"])


def _values(run: ProgramRun, team: str) -> Json:
    values: Json = run.one(RELEASE, f"{team}-vcluster").inputs["values"]
    return values


def test_every_tenants_api_server_trusts_the_provider_with_prefixed_names_after_its_own_flags() -> None:
    audit = ["--audit-log-path=/data/audit.log"]
    run = _run(_oidc(), values={"controlPlane": {"distro": {"k8s": {"apiServer": {"extraArgs": audit}}}}})
    expected = [
        f"--oidc-issuer-url={ISSUER}",
        "--oidc-client-id=gpu-tenancy",
        "--oidc-username-claim=email",
        "--oidc-username-prefix=oidc:",
        "--oidc-groups-claim=groups",
        "--oidc-groups-prefix=oidc:",
    ]
    for team in TEAMS:
        api_server = _values(run, team)["controlPlane"]["distro"]["k8s"]["apiServer"]
        assert api_server["extraArgs"] == (audit if team == "team-nlp" else []) + expected, team
        assert "addVolumes" not in _values(run, team)["controlPlane"]["statefulSet"]["persistence"], "no CA given"
    assert not [r.name for r in run.of_type(CONFIG_MAP) if r.name.endswith("-oidc-ca")]


def test_the_providers_ca_is_mounted_into_the_container_that_starts_the_api_server(signed_in: ProgramRun) -> None:
    """Real Helm over the pinned chart: the CA's ConfigMap, in the team's namespace, is a volume of the syncer
    container (which runs kube-apiserver), at the path the flag names; the release waits for the ConfigMap."""
    for team in TEAMS:
        ca = signed_in.one(CONFIG_MAP, f"{team}-oidc-ca")
        assert ca.inputs["metadata"]["namespace"] == f"vcluster-{team}"
        assert ca.inputs["data"] == {"ca.crt": _ca()}
        release = signed_in.one(RELEASE, f"{team}-vcluster")
        assert release.depends_on(ca)
        values = _values(signed_in, team)
        assert (
            "--oidc-ca-file=/etc/gpu-tenancy/oidc/ca.crt"
            in values["controlPlane"]["distro"]["k8s"]["apiServer"]["extraArgs"]
        )
        chart = chart_file_for("vcluster", release.inputs["version"])
        (statefulset,) = [o for o in render(team, f"vcluster-{team}", chart, values) if o["kind"] == "StatefulSet"]
        pod = statefulset["spec"]["template"]["spec"]
        assert {"name": "gpu-tenancy-oidc-ca", "configMap": {"name": "gpu-tenancy-oidc-ca"}} in pod["volumes"]
        (syncer,) = [c for c in pod["containers"] if c["name"] == "syncer"]
        mount = {"name": "gpu-tenancy-oidc-ca", "mountPath": "/etc/gpu-tenancy/oidc", "readOnly": True}
        assert mount in syncer["volumeMounts"]


def test_a_change_of_provider_reaches_running_tenants_and_their_volumes_stay_as_created(
    signed_in: ProgramRun,
) -> None:
    """What is ignored on a running tenant is where its state lives (volumeClaim and the like), not the mounts: a
    provider turned on later must reach the control plane with its CA, or its API server could not start."""
    for team in TEAMS:
        ignored = signed_in.one(RELEASE, f"{team}-vcluster").ignore_changes
        assert "values.controlPlane.statefulSet.persistence.volumeClaim" in ignored
        assert not any("persistence.addVolume" in path or path.endswith(".persistence") for path in ignored), ignored
        assert not any(path.startswith("values.controlPlane.distro.k8s.apiServer") for path in ignored)


def test_a_teams_groups_are_cluster_admin_of_its_vcluster_alone(signed_in: ProgramRun) -> None:
    binding = signed_in.one(BINDING, "team-nlp-oidc-groups")
    assert "::team-nlp-vcluster::" in binding.provider, "inside the team's vCluster, through its own API server"
    assert binding.inputs["roleRef"]["name"] == "cluster-admin"
    assert binding.inputs["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "oidc:ml-nlp"},
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "oidc:ml-platform"},
    ]
    assert [r.name for r in signed_in.of_type(BINDING) if r.name.endswith("-oidc-groups")] == ["team-nlp-oidc-groups"]
    assert not [r for r in signed_in.registrations if r.provider and "::team-vision-vcluster::" in r.provider], (
        "a team without groups, members or add-ons needs no provider of its own"
    )


def test_each_team_gets_one_sign_in_kubeconfig_that_holds_no_credential(signed_in: ProgramRun) -> None:
    exported = signed_in.exports["signInKubeconfigs"]
    assert not exported.secret
    assert set(exported.value) == set(TEAMS)
    for team in TEAMS:
        document = yaml.safe_load(exported.value[team])
        team_kubeconfig = yaml.safe_load(signed_in.exports["tenantKubeconfigs"].value[team])
        assert document["clusters"][0]["cluster"] == team_kubeconfig["clusters"][0]["cluster"], "endpoint and CA"
        assert document["clusters"][0]["cluster"]["server"] == signed_in.exports["tenantEndpoints"].value[team]
        (user,) = document["users"]
        assert set(user["user"]) == {"exec"}, "no token, no client certificate"
        exec_ = user["user"]["exec"]
        assert exec_["command"] == "kubectl"
        assert exec_["args"][:4] == [
            "oidc-login",
            "get-token",
            f"--oidc-issuer-url={ISSUER}",
            "--oidc-client-id=gpu-tenancy",
        ]
        assert "--oidc-extra-scope=groups" in exec_["args"]
        assert any(arg.startswith("--certificate-authority-data=") for arg in exec_["args"])
    assert _run(None).exports["signInKubeconfigs"].value == {}


def _rendered_release(run: ProgramRun, team: str) -> list[Json]:
    """What the team's release installs, by real Helm: its control plane's NetworkPolicy among it."""
    release = run.one("kubernetes:helm.sh/v3:Release", f"{team}-vcluster").inputs
    chart = chart_file_for(release["chart"], release["version"])
    return render(release["name"], release["namespace"], chart, release["values"])


def test_a_control_plane_reaches_the_provider_on_its_port_and_nothing_else_outside(signed_in: ProgramRun) -> None:
    policies = world(signed_in, _rendered_release(signed_in, "team-nlp"))
    control_plane = Pod("vcluster-team-nlp", "10.1.10.2", {"release": "team-nlp", "app": "vcluster"})
    assert policies.allows(control_plane, Target("203.0.113.9", 443))
    assert not policies.allows(control_plane, Target("203.0.113.9", 22))
    assert not policies.allows(control_plane, Target("203.0.113.99", 443)), "outside the listed range"
    by_address = _run({"issuerUrl": "https://198.51.100.20:8443/dex", "clientId": "c"})
    assert world(by_address, _rendered_release(by_address, "team-nlp")).allows(
        control_plane, Target("198.51.100.20", 8443)
    )


SIGN_IN = {
    "authUrl": "https://login.example.com/realms/ml/protocol/openid-connect/auth",
    "tokenUrl": "https://login.example.com:8443/realms/ml/protocol/openid-connect/token",
}
VIEWS_CONFIG = "observability-team-views-config"
VIEWS_GRAFANA = "observability-team-views-grafana"


def _views_run(sign_in: Json | None, **oidc: Any) -> ProgramRun:
    config = dev_settings()
    config.setdefault("vcluster", {})["oidc"] = _oidc(**oidc)
    config["tenants"][0]["groups"] = ["ml-nlp", "ml-platform"]
    config["tenants"][1]["groups"] = ["ml-vision", "ml-platform"]
    if sign_in is not None:
        config["observability"]["teamViewsSignIn"] = sign_in
    return run_main(config)


@pytest.fixture(scope="module")
def views_signed_in() -> ProgramRun:
    return _views_run(SIGN_IN, certificateAuthority=_ca())


def _grafana_ini(run: ProgramRun) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(run.one(CONFIG_MAP, VIEWS_CONFIG).inputs["data"]["grafana.ini"])
    return parser


def _org_roles(section: configparser.SectionProxy, groups: list[str]) -> dict[str, str] | None:
    """What Grafana makes of a member's groups claim: refused unless in allowed_groups, then each org_mapping entry
    `<group>:<org>:<role>` of a group they are in (grafana/grafana pkg/login/social/connectors/generic_oauth.go
    IsGroupMember, org_role_mapper.go ParseOrgMappingSettings, getMappedOrgRoles; pkg/util SplitString)."""
    allowed = section["allowed_groups"].replace(",", " ").split()
    if allowed and not set(allowed) & set(groups):
        return None
    roles = {}
    for entry in section["org_mapping"].replace(",", " ").split():
        group, organisation, role = entry.split(":")
        if group in groups:
            roles[organisation] = role
    return roles


def test_a_member_signs_in_to_the_views_of_their_groups_teams_as_a_viewer_and_nobody_else_signs_in(
    views_signed_in: ProgramRun,
) -> None:
    section = _grafana_ini(views_signed_in)["auth.generic_oauth"]
    assert _org_roles(section, ["ml-nlp"]) == {"team-nlp": "Viewer"}
    assert _org_roles(section, ["ml-platform", "staff"]) == {"team-nlp": "Viewer", "team-vision": "Viewer"}
    assert _org_roles(section, ["staff"]) is None, "in no team's group: refused, not a Viewer of the main org"
    assert _org_roles(section, []) is None
    assert (section["client_authentication"], section["use_pkce"]) == ("none", "true"), "a public client: no secret"
    assert "client_secret" not in section
    assert section["scopes"].split() == ["openid", "email", "groups"]
    assert (section["auth_url"], section["token_url"]) == (SIGN_IN["authUrl"], SIGN_IN["tokenUrl"])
    assert (section["login_attribute_path"], section["groups_attribute_path"]) == ("email", "groups")


def test_the_views_send_members_back_to_their_own_address_and_trust_the_providers_ca(
    views_signed_in: ProgramRun,
) -> None:
    ini = _grafana_ini(views_signed_in)
    url = views_signed_in.exports["teamViews"].value["team-nlp"]["url"]
    assert ini["server"]["root_url"] == f"{url}/", "the redirect URI is <root_url>login/generic_oauth"
    config = views_signed_in.one(CONFIG_MAP, VIEWS_CONFIG).inputs["data"]
    assert config["oidc-ca.crt"] == _ca()
    pod = views_signed_in.one("kubernetes:apps/v1:Deployment", VIEWS_GRAFANA).inputs["spec"]["template"]["spec"]
    (grafana,) = [c for c in pod["containers"] if c["name"] == "grafana"]
    (mount,) = [m for m in grafana["volumeMounts"] if m["name"] == "config"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "config"]
    assert {"key": "oidc-ca.crt", "path": "oidc-ca.crt"} in volume["configMap"]["items"]
    assert ini["auth.generic_oauth"]["tls_client_ca"] == f"{mount['mountPath']}/oidc-ca.crt"


def test_the_views_grafana_reaches_the_providers_token_endpoint_and_nothing_else_outside(
    views_signed_in: ProgramRun,
) -> None:
    policies = world(views_signed_in, [])
    grafana = Pod("observability", "10.1.50.2", {"app": "gpu-tenancy-team-views"})
    assert policies.allows(grafana, Target("203.0.113.9", 8443)), "the token endpoint's port"
    assert not policies.allows(grafana, Target("203.0.113.9", 22))
    assert not policies.allows(grafana, Target("93.184.215.14", 8443))


def test_without_the_sign_in_the_views_grafana_is_as_it_was() -> None:
    """No pod roll for a stack that does not use it: the same grafana.ini, byte for byte."""
    plain = _views_run(None)
    assert plain.one(CONFIG_MAP, VIEWS_CONFIG).inputs["data"]["grafana.ini"] == grafana_ini()
    assert "oidc-ca.crt" not in plain.one(CONFIG_MAP, VIEWS_CONFIG).inputs["data"]

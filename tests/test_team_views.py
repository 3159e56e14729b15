"""Each team sees its own GPU use, and only its own.

The rendered objects of the dev stack are taken as they are: the proxy's flags from its
Deployment, each team's data source (header name from the ConfigMap, header value from the
Secret) and its dashboard's queries. Those go through the real prom-label-proxy v0.14.0 (the
lab's build, with the Deployment's flags: tests/label_proxy.py) to a real Prometheus on 127.0.0.1
holding three teams' series and the stack's recording rules; the reconciler runs against a
Grafana stand-in.
"""

import configparser
import ipaddress
import json
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from components.observability.grafana_teams.reconcile import (
    ORG_HEADER,
    DesiredState,
    Grafana,
    TeamView,
    load_state,
    missing_series,
    reconcile,
)
from components.observability.member_passwords import member_password
from components.observability.team_objects import ENFORCED_LABEL, NAME, PROXY, TENANT_HEADER
from components.observability.team_rules import podgroup_state_metrics
from config.upstream import GRAFANA_ORG_HEADER, POD_GROUP_ANNOTATION
from harness import ProgramRun, dev_settings, run_main
from tests.conftest import FAKE_KUBECONFIG
from tests.grafana_double import GrafanaWorld, grafana_double
from tests.label_proxy import prom_label_proxy
from tests.real_prometheus import Series, real_prometheus
from tests.stacks import releases

CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
SECRET = "kubernetes:core/v1:Secret"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
RANDOM_PASSWORD = "random:index/randomPassword:RandomPassword"
HOUR = 3600


@pytest.fixture(scope="module")
def run() -> ProgramRun:
    return run_main(dev_settings())


def _rendered(run: ProgramRun) -> tuple[dict[str, Any], dict[str, Any], list[str], list[dict[str, Any]]]:
    """The reconciler's state and secrets, the proxy's args, and the recording rules, as the stack renders them."""
    config = next(r for r in run.of_type(CONFIG_MAP) if r.inputs.get("metadata", {}).get("name") == NAME)
    secret = next(r for r in run.of_type(SECRET) if r.inputs.get("metadata", {}).get("name") == NAME)
    proxy = next(r for r in run.of_type(DEPLOYMENT) if r.inputs.get("metadata", {}).get("name") == PROXY)
    rules = run.one("kubernetes:monitoring.coreos.com/v1:PrometheusRule")
    args = proxy.inputs["spec"]["template"]["spec"]["containers"][0]["args"]
    return (
        json.loads(config.inputs["data"]["state.json"]),
        json.loads(secret.inputs["stringData"]["secrets.json"]),
        args,
        rules.inputs["spec"]["groups"],
    )


def _until(end: float, value: float) -> Callable[[float], float | None]:
    return lambda t: value if t < end else None


RECORDED_UNTIL = 10 * 60
"""The backfilled recorded history stops this long before now, past the 5-minute lookback: an instant query sees only
what the stack's rules record live."""


def _team_series(namespaces: dict[str, str], now: float) -> list[Series]:
    """Three teams' GPUs, pods, queues and a waiting gang, and KAI's own queue series; and the allocation history a
    running Prometheus would have recorded with the stack's rules (rules only record from their start)."""
    series: list[Series] = []
    for index, (team, namespace) in enumerate(sorted(namespaces.items())):
        queue = f"q-{team}"
        kai = {"queue_metadata_name": queue, "namespace": "kai-scheduler"}
        trainer = {"namespace": namespace, "pod": f"{team}-trainer", "gpu": str(index)}
        pending = {"namespace": namespace, "pod": f"{team}-worker-1", "phase": "Pending"}
        recorded = {"namespace": namespace, "label_gpu_tenancy_queue": queue, "queue_metadata_name": queue}
        series += [
            Series(
                "gpu_tenancy:team_allocated_gpus",
                recorded,
                _until(now - RECORDED_UNTIL, index + 1),
            ),
            Series("kube_namespace_labels", {"namespace": namespace, "label_gpu_tenancy_queue": queue}, lambda t: 1),
            Series("kai_queue_allocated_gpus", kai, _until(now + HOUR, index + 1)),
            Series("kai_queue_deserved_gpus", kai, lambda t: 1),
            Series("kai_queue_fair_share_gpu", kai, lambda t: 1),
            Series("DCGM_FI_DEV_GPU_UTIL", trainer, lambda t: 90),
            Series("DCGM_FI_DEV_FB_USED", trainer, lambda t: 1000),
            Series("kube_pod_status_phase", pending, lambda t: 1),
            Series(
                "kube_pod_annotations",
                {"namespace": namespace, "pod": f"{team}-worker-1", "annotation_pod_group_name": f"pg-{team}"},
                lambda t: 1,
            ),
            Series(
                "kai_podgroup_unschedulable_info",
                {
                    "namespace": namespace,
                    "podgroup": f"pg-{team}",
                    "queue": queue,
                    "status": "True",
                    "node_pool": "default",
                    "message": f"{team}: Resources were found for 1 pods while 2 are required",
                },
                lambda t: 1,
            ),
        ]
    return series


def _desired(run: ProgramRun, folder: Path, proxy: str | None = None) -> DesiredState:
    """What the reconciler makes of the rendered state and secrets (each data source pointed at `proxy`, if given)."""
    state, secrets, _, _ = _rendered(run)
    if proxy is not None:
        state["datasource"]["url"] = proxy
    (folder / "state.json").write_text(json.dumps(state))
    (folder / "secrets.json").write_text(json.dumps(secrets))
    return load_state(str(folder / "state.json"), str(folder / "secrets.json"))


class _Views:
    def __init__(self, proxy: str, desired: DesiredState) -> None:
        self.proxy = proxy
        self.datasources = {team.name: team.datasource for team in desired.teams}
        self.dashboards = {team.name: team.dashboard for team in desired.teams}
        self.header_values = {team.name: team.datasource["secureJsonData"] for team in desired.teams}

    def get(self, team: str, path: str, params: dict[str, str] | list[tuple[str, str]]) -> tuple[int, Any]:
        """A request as the team's Grafana data source sends it: its header name and its secret value."""
        datasource = self.datasources[team]
        header = datasource["jsonData"]["httpHeaderName1"]
        value = self.header_values[team]["httpHeaderValue1"]
        request = urllib.request.Request(
            f"{self.proxy}{path}?{urllib.parse.urlencode(params)}", headers={header: value}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def query(self, team: str, expr: str) -> tuple[int, Any]:
        return self.get(team, "/api/v1/query", {"query": expr})


@pytest.fixture(scope="module")
def views(run: ProgramRun, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[_Views, dict[str, str]]]:
    _, secrets, args, groups = _rendered(run)
    namespaces = {team: value["httpHeaderValue1"] for team, value in secrets["datasources"].items()}
    root = tmp_path_factory.mktemp("team-views")
    now = time.time()
    rules = root / "rules.yml"
    rules.write_text(json.dumps({"groups": [{**group, "interval": "1s"} for group in groups]}))
    with real_prometheus(root, _team_series(namespaces, now), now - 6 * HOUR, now, rule_files=[rules]) as url:
        assert f"-label={ENFORCED_LABEL}" in args
        assert f"-header-name={TENANT_HEADER}" in args
        with prom_label_proxy(args, upstream=url) as proxy:
            views = _Views(proxy, _desired(run, root))
            _wait_for_rules(views, next(iter(namespaces)))
            yield views, namespaces


def _wait_for_rules(views: _Views, team: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if views.query(team, "gpu_tenancy:team_allocated_gpus")[1]["data"]["result"]:
            return
        time.sleep(0.5)
    raise AssertionError("the recording rules produced nothing")


def _namespaces_in(body: Any) -> set[str]:
    return {r["metric"].get("namespace") for r in body["data"]["result"] if "namespace" in r["metric"]}


def _panel_queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (panel["title"], target["expr"].replace("$__range", "1h").replace("$pod", ".*"))
        for panel in dashboard["panels"]
        for target in panel["targets"]
    ]


def test_every_panel_of_a_team_reads_its_own_series_only(views: tuple[_Views, dict[str, str]]) -> None:
    client, namespaces = views
    for team, namespace in namespaces.items():
        for title, expr in _panel_queries(client.dashboards[team]):
            status, body = client.query(team, expr)
            assert status == 200, (team, title, body)
            result = body["data"]["result"]
            assert result, f"{team}: {title!r} shows nothing: {expr}"
            assert _namespaces_in(body) <= {namespace}, (team, title)
            # What the team sees is its own numbers: its pods, its queue's gang.
            text = json.dumps(result)
            for other in namespaces.keys() - {team}:
                assert other not in text, (team, title, text)


def test_the_allocation_and_gpu_hours_are_the_teams_own(views: tuple[_Views, dict[str, str]]) -> None:
    client, namespaces = views
    for index, team in enumerate(sorted(namespaces)):
        _, body = client.query(team, "sum(gpu_tenancy:team_allocated_gpus)")
        assert float(body["data"]["result"][0]["value"][1]) == index + 1
        hours = next(
            t["expr"]
            for p in client.dashboards[team]["panels"]
            for t in p["targets"]
            if t["legendFormat"] == "GPU-hours"
        )
        _, body = client.query(team, hours.replace("$__range", "2h").replace("[2h:1m]", "[2h:1m] offset 15m"))
        # Two hours at index + 1 GPUs, sampled each minute.
        assert float(body["data"]["result"][0]["value"][1]) == pytest.approx(2 * (index + 1), rel=0.02)


HAND_EDITED = [
    'DCGM_FI_DEV_GPU_UTIL{{namespace="{other}"}}',
    'sum(kube_pod_status_phase{{namespace="{other}"}})',
    'label_replace(DCGM_FI_DEV_GPU_UTIL{{namespace="{other}"}}, "x", "y", "", "")',
    'DCGM_FI_DEV_GPU_UTIL{{namespace!="{own}"}}',
    'gpu_tenancy:team_allocated_gpus{{namespace=~"{other}"}} or vector(1)',
]


@pytest.mark.parametrize("template", HAND_EDITED)
def test_a_hand_edited_query_for_another_team_is_refused(views: tuple[_Views, dict[str, str]], template: str) -> None:
    client, namespaces = views
    own_team, other_team = sorted(namespaces)[:2]
    expr = template.format(own=namespaces[own_team], other=namespaces[other_team])
    status, body = client.query(own_team, expr)
    assert status == 400, body
    assert "conflicting label matcher" in body["error"]


@pytest.mark.parametrize(
    "expr",
    [
        "DCGM_FI_DEV_GPU_UTIL",
        '{__name__=~".+"}',
        "kai_queue_allocated_gpus",
        "sum by (namespace) (kube_pod_status_phase)",
        'gpu_tenancy:team_allocated_gpus{namespace=~".+"}',
        'DCGM_FI_DEV_GPU_UTIL{namespace=~"vcluster-.*"}',
    ],
)
def test_a_query_without_a_namespace_gets_the_teams_own_or_nothing(
    views: tuple[_Views, dict[str, str]], expr: str
) -> None:
    """KAI's raw queue gauges carry KAI's namespace: a team reads them only through the recorded copies. A regex that
    also matches the team's own namespace is narrowed to it (enforce.go: compatible, then replaced)."""
    client, namespaces = views
    for team, namespace in namespaces.items():
        status, body = client.query(team, expr)
        assert status == 200
        assert _namespaces_in(body) <= {namespace}


def test_label_values_variables_list_only_the_teams_own(views: tuple[_Views, dict[str, str]]) -> None:
    """Grafana's label_values(metric, label) is /api/v1/label/<label>/values with match[]=metric."""
    client, namespaces = views
    for team, namespace in namespaces.items():
        variable = client.dashboards[team]["templating"]["list"][0]
        found = re.fullmatch(r"label_values\((\w+), (\w+)\)", variable["query"]["query"])
        assert found is not None
        metric, label = found.groups()
        _, pods = client.get(team, f"/api/v1/label/{label}/values", [("match[]", metric)])
        assert pods["data"] == [f"{team}-trainer"]
        _, seen = client.get(team, "/api/v1/label/namespace/values", [])
        assert seen["data"] == [namespace]
        other = next(n for n in namespaces.values() if n != namespace)
        _, edited = client.get(team, f"/api/v1/label/{label}/values", [("match[]", f'{metric}{{namespace="{other}"}}')])
        assert edited["data"] == []


def _teams_at(proxy: str, run: ProgramRun, tmp_path: Path) -> tuple[list[TeamView], list[dict[str, str]]]:
    """The rendered desired state, with each data source pointed at the proxy on 127.0.0.1."""
    desired = _desired(run, tmp_path, proxy)
    return desired.teams, desired.checks


def test_the_reconciler_finds_everything_the_views_need(
    views: tuple[_Views, dict[str, str]], run: ProgramRun, tmp_path: Path
) -> None:
    client, _ = views
    teams, checks = _teams_at(client.proxy, run, tmp_path)
    assert [problem for team in teams for problem in missing_series(team, checks)] == []


def test_the_reconciler_says_what_an_existing_prometheus_lacks(run: ProgramRun, tmp_path: Path) -> None:
    """A cluster's Prometheus without the stack's rules (in existing mode, rules it does not select): each team's
    log line says what is missing and what gives it, rather than an empty panel nobody can explain."""
    _, secrets, args, _ = _rendered(run)
    namespaces = {team: value["httpHeaderValue1"] for team, value in secrets["datasources"].items()}
    now = time.time()
    series = _team_series(namespaces, now)
    with (
        real_prometheus(tmp_path / "prometheus", series, now - HOUR, now) as url,
        prom_label_proxy(args, upstream=url) as proxy,
    ):
        teams, checks = _teams_at(proxy, run, tmp_path)
        problems = [problem for team in teams for problem in missing_series(team, checks)]
    assert len(problems) == len(teams)
    assert all("gpu_tenancy:team_allocated_gpus returns nothing" in p and "PrometheusRule" in p for p in problems)


def test_without_the_header_the_proxy_answers_nothing(views: tuple[_Views, dict[str, str]]) -> None:
    client, _ = views
    request = urllib.request.Request(f"{client.proxy}/api/v1/query?query=up")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 400


# --- the Grafana side -------------------------------------------------------------------------------------------


def _server_admin(run: ProgramRun) -> str:
    """The login Grafana makes its server admin: `[security] admin_user` of the grafana.ini the stack renders."""
    config = next(r for r in run.of_type(CONFIG_MAP) if r.inputs.get("metadata", {}).get("name") == NAME)
    ini = configparser.ConfigParser()
    ini.read_string(config.inputs["data"]["grafana.ini"])
    return ini["security"]["admin_user"]


def _reconcile(run: ProgramRun, tmp_path: Path, world: GrafanaWorld | None = None) -> GrafanaWorld:
    desired = _desired(run, tmp_path)
    world = world or GrafanaWorld(desired.admin_password, admin_login=_server_admin(run))
    with grafana_double(world) as url:
        reconcile(Grafana(url, desired.admin_login, desired.admin_password), desired)
    return world


@pytest.mark.parametrize("team", ["admin", "gpu-tenancy-admin"])
def test_no_team_becomes_grafanas_server_admin(team: str, tmp_path: Path) -> None:
    """A team's login is its name; Grafana's server admin is a login no team name can spell, so a team named like
    it gets an ordinary Viewer login and the admin keeps its own password."""
    config = dev_settings()
    config["tenants"][0]["name"] = team
    run = run_main(config)
    desired = _desired(run, tmp_path)
    world = _reconcile(run, tmp_path)
    admin = world.user_by_login(_server_admin(run))
    assert admin == 1
    assert world.users[admin]["password"] == desired.admin_password
    assert world.orgs_of(team) == {team: "Viewer"}
    assert world.users[world.user_by_login(team) or 0]["password"] == run.exports["teamViews"].value[team]["password"]


def test_each_team_logs_in_to_its_own_organisation_only_as_viewer(run: ProgramRun, tmp_path: Path) -> None:
    world = _reconcile(run, tmp_path)
    credentials = run.exports["teamViews"]
    assert credentials.secret
    for team, login in credentials.value.items():
        user = world.user_by_login(login["login"])
        assert user is not None
        assert world.users[user]["password"] == login["password"]
        assert world.orgs_of(login["login"]) == {team: "Viewer"}
        sources = world.datasources_for(login["login"])
        assert [s["secureJsonData"]["httpHeaderValue1"] for s in sources] == [f"vcluster-{team}"]
        org = next(o for o, name in world.orgs.items() if name == team)
        assert world.home[org] == f"gpu-tenancy-team-{team}"


def test_the_reconciler_names_grafanas_own_org_header() -> None:
    """The reconciler stands alone in its image, so it cannot import config.upstream: the two must agree."""
    assert ORG_HEADER == GRAFANA_ORG_HEADER


PROVIDER_CERTIFICATE = """[req]
distinguished_name = dn
x509_extensions = ext
prompt = no
[dn]
CN = gpu-tenancy team views
[ext]
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:198.51.100.7
subjectKeyIdentifier = none
authorityKeyIdentifier = none
"""
"""The certificate pulumi-tls makes from TeamViews' SelfSignedCert: no basic constraints and no key identifiers (not a
CA, set_subject_key_id off), key usage and server auth from allowed_uses, the SANs given (hashicorp/
terraform-provider-tls internal/provider/common_cert.go createCertificate @v4.2.1, which pulumi-tls 5 bridges)."""


def test_the_reconciler_trusts_grafanas_certificate_strictly_at_localhost(run: ProgramRun, tmp_path: Path) -> None:
    openssl = shutil.which("openssl")
    assert openssl, "openssl: apt-get install openssl"
    (tmp_path / "cert.cfg").write_text(PROVIDER_CERTIFICATE)
    key, cert = tmp_path / "tls.key", tmp_path / "tls.crt"
    subprocess.run([openssl, "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key)], check=True)
    request = ["req", "-x509", "-new", "-key", str(key), "-days", "365", "-config", str(tmp_path / "cert.cfg")]
    subprocess.run([openssl, *request, "-out", str(cert)], check=True, capture_output=True)
    _, secrets, _, _ = _rendered(run)
    login = _server_admin(run)
    world = GrafanaWorld(secrets["admin"], admin_login=login)
    with grafana_double(world, tls=(cert, key)) as url:
        grafana = Grafana(url, login, secrets["admin"], cafile=str(cert))
        grafana.wait_healthy(timeout=10)
        assert grafana.call("GET", "/api/health") == {"database": "ok"}
        stranger = Grafana(url.replace("localhost", "127.0.0.1"), login, secrets["admin"], cafile=str(cert))
        with pytest.raises(urllib.error.URLError, match=r"CERTIFICATE_VERIFY_FAILED|IP address mismatch"):
            stranger.call("GET", "/api/health")


def test_reconciling_again_changes_nothing(run: ProgramRun, tmp_path: Path) -> None:
    """A restarted reconciler container finds Grafana's database as it left it."""
    first = _reconcile(run, tmp_path)
    snapshot = (dict(first.orgs), dict(first.members), dict(first.datasources), dict(first.dashboards))
    again = _reconcile(run, tmp_path, first)
    assert (again.orgs, again.members, again.datasources, again.dashboards) == snapshot


def test_adding_or_removing_a_team_rolls_grafana_and_its_logins() -> None:
    """Grafana keeps nothing: a changed team list changes the pod's fingerprint, so the next pod starts empty and
    builds only the teams that remain."""
    before = run_main(dev_settings())
    fewer = dev_settings()
    removed = fewer["tenants"].pop()["name"]
    after = run_main(fewer)

    def fingerprint(r: ProgramRun) -> str:
        grafana = next(d for d in r.of_type(DEPLOYMENT) if d.inputs.get("metadata", {}).get("name") == NAME)
        return str(grafana.inputs["spec"]["template"]["metadata"]["annotations"]["gpu-tenancy/state"])

    assert fingerprint(before) != fingerprint(after)
    assert removed in before.exports["teamViews"].value
    assert removed not in after.exports["teamViews"].value
    state, secrets, _, _ = _rendered(after)
    assert removed not in {team["name"] for team in state["teams"]} | set(secrets["passwords"])
    # Only the removed team's password goes; the others keep theirs.
    passwords = {r.name for r in after.of_type("random:index/randomPassword:RandomPassword")}
    assert passwords == {r.name for r in before.of_type("random:index/randomPassword:RandomPassword")} - {
        f"observability-team-views-{removed}-password"
    }


def test_passwords_and_header_values_stay_secret(run: ProgramRun) -> None:
    secret = next(r for r in run.of_type(SECRET) if r.inputs.get("metadata", {}).get("name") == NAME)
    assert "stringData" in secret.secret_inputs
    config = next(r for r in run.of_type(CONFIG_MAP) if r.inputs.get("metadata", {}).get("name") == NAME)
    text = json.dumps(config.inputs)
    for login in run.exports["teamViews"].value.values():
        assert login["password"] not in text


def test_only_the_team_grafana_reaches_the_proxy(run: ProgramRun) -> None:
    policies = {
        r.inputs["metadata"]["name"]: r.inputs["spec"]
        for r in run.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
        if r.inputs["metadata"]["name"] in {NAME, PROXY}
    }
    assert policies[PROXY]["ingress"] == [
        {"from": [{"podSelector": {"matchLabels": {"app": NAME}}}], "ports": [{"port": 8080, "protocol": "TCP"}]}
    ]
    egress_targets = [peer for rule in policies[NAME]["egress"] for peer in rule["to"]]
    assert {"podSelector": {"matchLabels": {"app": PROXY}}} in egress_targets
    assert not any("ipBlock" in peer for peer in egress_targets), "Grafana reaches nothing but the proxy and DNS"


# --- what the rest of the stack must give the views ------------------------------------------------------------


def test_kube_state_metrics_exports_the_podgroups_and_pod_group_annotation() -> None:
    """Rendered by real Helm from the pinned kube-prometheus-stack: the PodGroup state config reaches
    kube-state-metrics, which may list PodGroups, and pods carry their PodGroup's name as a label."""
    (release,) = [r for r in releases("brev") if r.resource == "observability-stack"]
    rendered = release.render()
    (ksm,) = [o for o in rendered if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("kube-state-metrics")]
    args = ksm["spec"]["template"]["spec"]["containers"][0]["args"]
    assert any(a.startswith("--custom-resource-state-config-file=") for a in args)
    assert f"--metric-annotations-allowlist=pods=[{POD_GROUP_ANNOTATION}]" in args
    (config,) = [o for o in rendered if o["kind"] == "ConfigMap" and "customresourcestate" in o["metadata"]["name"]]
    assert yaml.safe_load(config["data"]["config.yaml"]) == podgroup_state_metrics()
    rules = [
        rule
        for o in rendered
        if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("kube-state-metrics")
        for rule in o["rules"]
    ]
    assert {"apiGroups": ["scheduling.run.ai"], "resources": ["podgroups"], "verbs": ["list", "watch"]} in rules


def test_the_recording_rules_pass_promtool(run: ProgramRun, tmp_path: Path) -> None:
    _, _, _, groups = _rendered(run)
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump({"groups": groups}))
    promtool = shutil.which("promtool")
    assert promtool, "promtool: venv/bin/python -m harness.tools install-debian"
    checked = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _existing(**observability: Any) -> dict[str, Any]:
    config = dev_settings()
    config["observability"] = {"mode": "existing", **observability}
    return config


def test_an_existing_prometheus_is_reached_where_the_stack_says() -> None:
    url = "http://kube-prom-stack-kube-prome-prometheus.observability.svc:9090"
    existing = run_main(_existing(teamViews=True, prometheusUrl=url))
    _, _, args, _ = _rendered(existing)
    assert f"-upstream={url}" in args
    rule = existing.one("kubernetes:monitoring.coreos.com/v1:PrometheusRule")
    # MicroK8s' observability add-on selects rules, like ServiceMonitors, by its release label.
    assert rule.inputs["metadata"]["labels"]["release"] == "kube-prom-stack"
    assert "observability-stack" not in {r.name for r in existing.of_type("kubernetes:helm.sh/v3:Release")}


def test_the_views_are_off_unless_asked_for_on_an_existing_stack() -> None:
    quiet = run_main(_existing())
    assert "teamViews" not in quiet.exports
    assert not [r for r in quiet.registrations if r.name.startswith("observability-team-views")]


def test_the_installed_prometheus_is_the_upstream(run: ProgramRun) -> None:
    """kube-prometheus-stack names its Prometheus Service <fullname>-prometheus (rendered by real Helm)."""
    _, _, args, _ = _rendered(run)
    (release,) = [r for r in releases("brev") if r.resource == "observability-stack"]
    (service,) = [
        o for o in release.render() if o["kind"] == "Service" and o["metadata"]["name"].endswith("-prometheus")
    ]
    port = next(p["port"] for p in service["spec"]["ports"] if p["name"] == "http-web")
    assert f"-upstream=http://{service['metadata']['name']}.{release.namespace}.svc:{port}" in args


@pytest.mark.parametrize(
    ("address", "dns_names", "ip_addresses"),
    [
        ("203.0.113.30", ["localhost"], ["203.0.113.30"]),
        ("gpu-1.example.com", ["localhost", "gpu-1.example.com"], []),
    ],
)
def test_the_certificate_names_the_host_by_name_or_by_address(
    address: str, dns_names: list[str], ip_addresses: list[str]
) -> None:
    """pulumi-tls parses every `ip_addresses` entry as an IP and fails the `up` on a name ("Invalid IP address",
    terraform-provider-tls resource_self_signed_cert.go): a name goes to the DNS names."""
    config = dev_settings()
    config["host"] = {"mode": "kubeconfig", "address": address}
    run = run_main(config, {"kubeconfig": FAKE_KUBECONFIG})
    certificate = run.one("tls:index/selfSignedCert:SelfSignedCert")
    assert certificate.inputs["dnsNames"] == dns_names
    assert certificate.inputs.get("ipAddresses", []) == ip_addresses
    assert all(ipaddress.ip_address(ip) for ip in certificate.inputs.get("ipAddresses", []))


def _with_members(members: list[str]) -> ProgramRun:
    config = dev_settings()
    config["tenants"][0]["members"] = members
    return run_main(config)


def test_each_member_logs_in_as_themselves_to_their_teams_organisation_only(tmp_path: Path) -> None:
    """`<team>.<member>`, a Viewer of the team's organisation alone, with a password of their own; the team's login
    stays for automation."""
    run = _with_members(["alice", "bob"])
    world = _reconcile(run, tmp_path)
    members = run.exports["memberTeamViews"]
    assert members.secret
    assert set(members.value) == {"team-nlp"}
    for member, login in members.value["team-nlp"].items():
        assert login["login"] == f"team-nlp.{member}"
        user = world.user_by_login(login["login"])
        assert user is not None
        assert world.users[user]["password"] == login["password"]
        assert world.orgs_of(login["login"]) == {"team-nlp": "Viewer"}
    passwords = {m["password"] for m in members.value["team-nlp"].values()}
    assert len(passwords | {run.exports["teamViews"].value["team-nlp"]["password"]}) == 3
    # From each member's token (the mocks' token controller gives `token-of-<member>`), registering nothing.
    assert members.value["team-nlp"]["alice"]["password"] == member_password("token-of-alice", "team-nlp.alice")
    assert not any(".alice" in r.name for r in run.of_type(RANDOM_PASSWORD))


def test_removing_a_member_rolls_grafana_without_their_login_and_keeps_everyone_elses_password(tmp_path: Path) -> None:
    """Grafana keeps nothing (an emptyDir): the changed state rolls the pod, which builds only the logins that remain,
    so the removed member's is refused from the new pod on; nobody else's password changes."""
    before, after = _with_members(["alice", "bob"]), _with_members(["bob"])

    def fingerprint(r: ProgramRun) -> str:
        grafana = next(d for d in r.of_type(DEPLOYMENT) if d.inputs.get("metadata", {}).get("name") == NAME)
        return str(grafana.inputs["spec"]["template"]["metadata"]["annotations"]["gpu-tenancy/state"])

    assert fingerprint(before) != fingerprint(after)
    world = _reconcile(after, tmp_path)
    assert world.user_by_login("team-nlp.alice") is None
    assert world.user_by_login("team-nlp.bob") is not None
    old, new = (
        {login["login"]: login["password"] for login in run.exports["memberTeamViews"].value["team-nlp"].values()}
        for run in (before, after)
    )
    assert new == {"team-nlp.bob": old["team-nlp.bob"]}
    assert {r.name for r in after.of_type(RANDOM_PASSWORD)} == {r.name for r in before.of_type(RANDOM_PASSWORD)}


@given(tokens=st.lists(st.text(min_size=1, max_size=64), min_size=2, max_size=2, unique=True))
def test_a_members_password_is_their_tokens_alone_and_gives_it_nothing_back(tokens: list[str]) -> None:
    """Derived from the member's vCluster token (member_passwords.py): another token (the member removed and added
    again, or their token replaced) gives another password, and so does another login under the same token."""
    first, second = tokens
    password = member_password(first, "team-nlp.alice")
    assert len(password) == 32
    assert password == member_password(first, "team-nlp.alice")
    assert password != member_password(second, "team-nlp.alice")
    assert password != member_password(first, "team-nlp.bob")


def test_a_stack_without_members_keeps_its_grafana_state_as_it_was() -> None:
    """No `members` key where there are none: adding the feature rolls no existing stack's Grafana."""
    state, _, _, _ = _rendered(run_main(dev_settings()))
    assert all(set(team) == {"name", "limit"} for team in state["teams"])

"""What the charts make of the values the program passes: every Helm release, rendered by real Helm.

Each release the program registers (the GPU Operator, KAI, a vCluster per tenant,
kube-prometheus-stack and add-ons with a packaged chart) is rendered with `helm template
--kube-version 1.36` from the pinned chart (tests/charts.py), in brev, ssh with two
workers and kubeconfig mode, with both `expose` modes and a `restricted` tenant. The
rendered objects are then checked: values the charts never read, custom resources their
CRDs refuse, pods their namespace's Pod Security level refuses, quotas too small for
what they hold, networks that let a tenant reach what it may not, alerts that always
fire, and ports the docs do not list.
"""

import base64
import copy
import functools
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
import yaml

from components.shared.helm import HELM_HISTORY
from config.names import QUEUE_VIEW_CONFIGMAP, QUEUE_VIEW_IN_TENANT
from config.quantities import quantity
from config.upstream import (
    VCLUSTER_CHART_CLUSTER_RULES,
    VCLUSTER_CLUSTER_ROLE_INPUTS,
    VCLUSTER_CONTROL_PLANE_RESOURCES,
)
from config.vcluster_tenant.syncer_role import syncer_cluster_rules
from harness import ROOT, ProgramRun
from harness.tools import CHART_SOURCES
from tests.charts import chart_text, crd_errors, pod_specs, render, render_text
from tests.conftest import GPU_OPERATOR_CHART, KAI_CHART, KUBE_PROMETHEUS_CHART, VCLUSTER_CHART
from tests.lab import Lab
from tests.lab_admission import Request
from tests.lab_pod_security import pod_security_violations
from tests.stacks import BOOTSTRAPPED, RELEASE, STACKS, Release, release_id, releases, stack
from tests.tenant_pods import admit
from tests.tenant_pods import namespace as tenant_namespace

Json = dict[str, Any]
NAMESPACE = "kubernetes:core/v1:Namespace"


ALL = [release for name in STACKS for release in releases(name)]


@pytest.mark.parametrize("release", ALL, ids=release_id)
def test_every_release_renders_with_real_helm(release: Release) -> None:
    rendered = release.render()
    assert rendered, "a release that renders nothing installs nothing"
    assert all(obj.get("kind") for obj in rendered)


# --- every value is used ------------------------------------------------------------------------------


def _leaves(values: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(values, dict) and values:
        for key, value in values.items():
            yield from _leaves(value, (*path, key))
    else:
        yield path, values


def _perturbed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 7
    if isinstance(value, str):
        return f"{value}-probe" if not re.fullmatch(r"\d+(\.\d+)?[A-Za-z]*", value) else f"9{value}"
    if isinstance(value, list):
        return [] if value else ["probe"]
    return {"probe": "x"}


def _with(values: Json, path: tuple[str, ...], value: Any) -> Json:
    changed = copy.deepcopy(values)
    node = changed
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return changed


def _value_probes() -> list[tuple[Release, tuple[str, ...]]]:
    """Each path the program sets in each chart, once (the first release that sets it); add-ons are the teams'."""
    seen: set[tuple[str, tuple[str, ...]]] = set()
    probes = []
    for release in ALL:
        if release.addon:
            continue
        for path, _ in _leaves(release.values):
            if (release.chart, path) not in seen:
                seen.add((release.chart, path))
                probes.append((release, path))
    return sorted(probes, key=lambda probe: (probe[0].chart, probe[1]))


PROBES = _value_probes()


@pytest.mark.parametrize(
    ("release", "path"), PROBES, ids=[f"{r.chart.removesuffix('.tgz')}:{'.'.join(p)}" for r, p in PROBES]
)
def test_every_value_the_program_sets_is_read_by_the_chart(release: Release, path: tuple[str, ...]) -> None:
    """Changed, a value read by a template (or passed into a custom resource or the vCluster's config)
    changes the rendered objects, or makes Helm refuse them: a value that changes nothing is dead."""
    base = render_text(release.name, release.namespace, release.chart, release.values)
    original = functools.reduce(lambda node, key: node[key], path, release.values)
    changed = render_text(
        release.name, release.namespace, release.chart, _with(release.values, path, _perturbed(original))
    )
    assert changed != base, f"{'.'.join(path)} = {original!r} changes nothing the chart renders"


# --- custom resources and their CRDs -----------------------------------------------------------------------


def _crds(name: str) -> dict[tuple[str, str], Json]:
    found = {}
    for release in releases(name):
        if release.addon:
            continue
        for obj in release.render(crds=True):
            if obj["kind"] == "CustomResourceDefinition":
                found[(obj["spec"]["group"], obj["spec"]["names"]["kind"])] = obj
    return found


def _group(obj: Json) -> str:
    return obj["apiVersion"].rsplit("/", 1)[0] if "/" in obj["apiVersion"] else ""


def _registered_custom_resources(run: ProgramRun) -> Iterator[Json]:
    for r in run.registrations:
        inputs = r.inputs
        if r.read or "apiVersion" not in inputs or "kind" not in inputs:
            continue
        yield {key: inputs[key] for key in ("apiVersion", "kind", "metadata", "spec") if key in inputs}


@pytest.mark.parametrize("name", STACKS)
def test_every_custom_resource_validates_against_the_crd_rendered_with_it(name: str) -> None:
    crds = _crds(name)
    assert crds, "the charts bring their CRDs"
    checked = 0
    rendered = [obj for release in releases(name) if not release.addon for obj in release.render(crds=True)]
    for obj in [*rendered, *_registered_custom_resources(stack(name))]:
        crd = crds.get((_group(obj), obj["kind"]))
        if crd is None or obj["kind"] == "CustomResourceDefinition":
            continue
        checked += 1
        assert crd_errors(crd, obj) == [], f"{obj['kind']}/{obj['metadata'].get('name')}"
    assert checked >= 8


# --- pods against Pod Security and the tenant policies ------------------------------------------------------


def _enforced(run: ProgramRun) -> dict[str, str]:
    """Each registered namespace's Pod Security level (unlabelled: privileged, MicroK8s' default)."""
    found = {}
    for namespace in run.of_type(NAMESPACE):
        metadata = namespace.inputs["metadata"]
        found[metadata["name"]] = (metadata.get("labels") or {}).get("pod-security.kubernetes.io/enforce", "privileged")
    return found


@pytest.mark.parametrize("release", [r for r in ALL if not r.addon], ids=release_id)
def test_every_rendered_pod_passes_its_namespaces_pod_security_level(lab: Lab, release: Release) -> None:
    level = _enforced(stack(release.stack)).get(release.namespace, "privileged")
    for where, spec in pod_specs(release.render()):
        assert pod_security_violations(lab, spec, level) == [], f"{where} in {release.namespace} ({level})"


@pytest.mark.parametrize("name", STACKS)
def test_the_programs_own_pods_pass_their_namespaces_pod_security_level(lab: Lab, name: str) -> None:
    run = stack(name)
    levels = _enforced(run)
    objects = [
        {"kind": r.type.rsplit(":", 1)[1], "metadata": r.inputs["metadata"], "spec": r.inputs["spec"]}
        for r in run.registrations
        if r.type in ("kubernetes:batch/v1:Job", "kubernetes:apps/v1:Deployment")
    ]
    for obj in objects:
        level = levels.get(obj["metadata"]["namespace"], "privileged")
        for where, spec in pod_specs([obj]):
            assert pod_security_violations(lab, spec, level) == [], where


@pytest.mark.parametrize("release", [r for r in ALL if r.chart.startswith("vcluster-")], ids=release_id)
def test_a_tenants_control_plane_passes_the_tenant_policies(release: Release) -> None:
    run = stack(release.stack)
    (namespace,) = [
        n.inputs["metadata"] for n in run.of_type(NAMESPACE) if n.inputs["metadata"]["name"] == release.namespace
    ]
    for where, spec in pod_specs(release.render()):
        statefulset = next(o for o in release.render() if f"{o['kind']}/{o['metadata']['name']}" == where)
        pod = {"metadata": {"name": f"{release.name}-0", **statefulset["spec"]["template"]["metadata"]}, "spec": spec}
        request = Request(
            object=pod,
            namespace={
                "metadata": {
                    **namespace,
                    "labels": {**namespace["labels"], "kubernetes.io/metadata.name": release.namespace},
                }
            },
            user="system:serviceaccount:kube-system:statefulset-controller",
        )
        assert admit(run, request) == [], where


# --- quota ------------------------------------------------------------------------------------------------


def _effective(pod: Json, kind: str, defaults: Json) -> dict[str, Decimal]:
    """Kubernetes' effective pod requests or limits: the larger of the containers' sum and the largest init."""

    def of(container: Json) -> dict[str, Decimal]:
        stated = (container.get("resources") or {}).get(kind) or {}
        return {
            name: quantity(str(stated.get(name, defaults[name]))) for name in ("cpu", "memory", "ephemeral-storage")
        }

    total = {name: Decimal(0) for name in ("cpu", "memory", "ephemeral-storage")}
    for container in pod.get("containers") or []:
        for name, amount in of(container).items():
            total[name] += amount
    for container in pod.get("initContainers") or []:
        for name, amount in of(container).items():
            total[name] = max(total[name], amount)
    return total


@pytest.mark.parametrize("release", [r for r in ALL if r.chart.startswith("vcluster-")], ids=release_id)
def test_a_tenants_quota_holds_its_rendered_control_plane_and_its_services_node_ports(release: Release) -> None:
    rendered = release.render()
    (quota,) = [o["spec"]["hard"] for o in rendered if o["kind"] == "ResourceQuota"]
    (limit_range,) = [o["spec"]["limits"][0] for o in rendered if o["kind"] == "LimitRange"]
    (statefulset,) = [o for o in rendered if o["kind"] == "StatefulSet"]
    pod = statefulset["spec"]["template"]["spec"]
    dns = {"containers": [{"name": "coredns", "resources": VCLUSTER_CONTROL_PLANE_RESOURCES["coredns"]}]}
    for kind, defaults in (("requests", limit_range["defaultRequest"]), ("limits", limit_range["default"])):
        need = _effective(pod, kind, defaults)
        for name, amount in _effective(dns, kind, defaults).items():
            need[name] += amount
        for name, amount in need.items():
            assert quantity(str(quota[f"{kind}.{name}"])) >= amount, f"{kind}.{name}"
    claims = statefulset["spec"].get("volumeClaimTemplates") or []
    storage = sum(quantity(c["spec"]["resources"]["requests"]["storage"]) for c in claims)
    assert quantity(str(quota["requests.storage"])) >= storage
    # Secrets: the chart's, Helm's kept revisions, and the kubeconfig the control plane writes.
    secrets = sum(1 for o in rendered if o["kind"] == "Secret") + HELM_HISTORY + 1
    assert int(quota["count/secrets"]) >= secrets
    node_ports = [
        port
        for o in rendered
        if o["kind"] == "Service" and o["spec"].get("type") == "NodePort"
        for port in o["spec"]["ports"]
    ]
    assert int(quota["services.nodeports"]) == len(node_ports)
    assert all(port.get("nodePort") for port in node_ports), "every node port is set, none left to chance"


@pytest.mark.parametrize("release", [r for r in ALL if r.chart.startswith("vcluster-")], ids=release_id)
def test_a_members_port_forward_and_exec_reach_the_host_pod_through_the_control_planes_role(release: Release) -> None:
    """`kubectl port-forward pod/notebook 8888` inside a tenant (docs/teams.md): vCluster redirects a pod's
    portforward, exec and attach to its host pod (loft-sh/vcluster pkg/server/filters/redirect.go @v0.35.1), as its
    own ServiceAccount, which the chart's Role in the tenant's namespace must allow."""
    rendered = release.render()
    (role,) = [o for o in rendered if o["kind"] == "Role"]
    granted = {
        (resource, verb)
        for rule in role["rules"]
        if "" in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule.get("verbs", [])
    }
    for subresource in ("pods/portforward", "pods/exec", "pods/attach"):
        assert (subresource, "create") in granted or (subresource, "*") in granted, subresource


def _with_the_charts_role(values: Json) -> Json:
    """The platform's values without the queue view and without the ClusterRole the platform puts in the chart's
    place: what the chart alone would grant."""
    plain = copy.deepcopy(values)
    del plain["sync"]["fromHost"]["configMaps"]
    del plain["rbac"]
    return plain


def _host_rules(rendered: list[Json]) -> list[Json]:
    (role,) = [o for o in rendered if o["kind"] == "ClusterRole"]
    return list(role["rules"])


def _syncer_config(rendered: list[Json]) -> Json:
    """The config the control plane reads (its vc-config Secret, key config.yaml)."""
    (secret,) = [o for o in rendered if o["kind"] == "Secret" and o["metadata"]["name"].startswith("vc-config-")]
    text = secret.get("stringData", {}).get("config.yaml") or base64.b64decode(secret["data"]["config.yaml"]).decode()
    loaded: Json = yaml.safe_load(text)
    return loaded


@pytest.mark.parametrize("release", [r for r in ALL if r.chart.startswith("vcluster-")], ids=release_id)
def test_no_syncer_reads_another_teams_pods_configmaps_or_secrets(release: Release) -> None:
    """The syncer's host ClusterRole is the chart's rendering without the queue view, less its read of every
    namespace's pods (config/upstream.py VCLUSTER_CHART_CLUSTER_RULES says why): no pod, ConfigMap or Secret
    anywhere, no namespace. Its Role in its own namespace still reads and writes its pods and ConfigMaps."""
    rendered = release.render()
    version = release.chart.removeprefix("vcluster-").removesuffix(".tgz")
    plain = render(release.name, release.namespace, release.chart, _with_the_charts_role(release.values))
    assert _host_rules(plain) == list(VCLUSTER_CHART_CLUSTER_RULES[version]), "the chart's, as read"
    assert _host_rules(rendered) == syncer_cluster_rules(version)
    granted = {resource for rule in _host_rules(rendered) for resource in rule["resources"]}
    assert not granted & {"pods", "configmaps", "secrets", "namespaces"}
    assert "nodes" in granted, "teams still see the GPU nodes"
    (role,) = [o for o in rendered if o["kind"] == "Role"]
    for resource in ("pods", "configmaps"):
        assert any(resource in rule["resources"] and "watch" in rule["verbs"] for rule in role["rules"]), resource


@pytest.mark.parametrize("release", [r for r in ALL if r.chart.startswith("vcluster-")], ids=release_id)
def test_the_queue_view_is_copied_in_from_the_syncers_own_namespace(release: Release) -> None:
    mappings = _syncer_config(release.render())["sync"]["fromHost"]["configMaps"]
    assert mappings["enabled"] is True
    assert mappings["mappings"]["byName"] == {f"/{QUEUE_VIEW_CONFIGMAP}": QUEUE_VIEW_IN_TENANT}


@pytest.mark.parametrize("chart_file", sorted({r.chart for r in ALL if r.chart.startswith("vcluster-")}))
def test_every_value_the_syncers_cluster_role_reads_keeps_the_charts_role(
    chart_file: str,
) -> None:
    """A tenant's own values that reach the ClusterRole's templates would be lost under overwriteRules, so a tenant
    that sets one keeps the chart's ClusterRole (with a warning) and no view: the platform's list must hold each
    value read."""
    read = set()
    for member in ("vcluster/templates/clusterrole.yaml", "vcluster/templates/_rbac.tpl"):
        read |= {tuple(m.split(".")) for m in re.findall(r"\.Values\.([A-Za-z0-9_.]+)", chart_text(chart_file, member))}
    assert read <= set(VCLUSTER_CLUSTER_ROLE_INPUTS), sorted(read - set(VCLUSTER_CLUSTER_ROLE_INPUTS))


@pytest.mark.parametrize("name", STACKS)
def test_every_release_keeps_a_bounded_history(name: str) -> None:
    """Every revision is a Secret; in a tenant's namespace they count against count/secrets."""
    for release in stack(name).of_type(RELEASE):
        assert release.inputs.get("maxHistory") == HELM_HISTORY, release.name


# --- observability on MicroK8s -------------------------------------------------------------------------------

ALWAYS_FIRING_ON_MICROK8S = {"KubeControllerManagerDown", "KubeSchedulerDown", "KubeProxyDown", "etcdMembersDown"}


def _stack_release(name: str) -> Release:
    (release,) = [r for r in releases(name) if r.resource == "observability-stack"]
    return release


def _alerts(release: Release) -> set[str]:
    return {
        rule["alert"]
        for obj in release.render()
        if obj["kind"] == "PrometheusRule"
        for group in obj["spec"]["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }


@pytest.mark.parametrize("name", STACKS)
def test_no_alert_fires_for_ever_on_microk8s(name: str) -> None:
    """MicroK8s runs the controller manager, scheduler and proxy in kubelite, on dqlite: nothing to scrape."""
    alerts = _alerts(_stack_release(name))
    if name in BOOTSTRAPPED:
        assert not alerts & ALWAYS_FIRING_ON_MICROK8S
    else:
        assert alerts >= ALWAYS_FIRING_ON_MICROK8S, "on a cluster this stack did not build, they are real"


@pytest.mark.parametrize("name", STACKS)
def test_prometheus_stays_on_the_node_that_holds_its_volume(name: str) -> None:
    (prometheus,) = [o for o in _stack_release(name).render() if o["kind"] == "Prometheus"]
    selector = prometheus["spec"].get("nodeSelector")
    if name in BOOTSTRAPPED:
        assert selector == {"kubernetes.io/hostname": "gpu-node-1"}
    else:
        assert not selector


@pytest.mark.parametrize("name", STACKS)
def test_grafana_loads_only_the_platforms_namespace_and_only_by_labels_tenants_may_not_use(name: str) -> None:
    """A tenant ConfigMap with any sidecar's LABEL is refused by the registered policies; each sidecar searches the
    release's namespace only (no NAMESPACE: its own; ALL would read every team's)."""
    run, release = stack(name), _stack_release(name)
    sidecars = [
        container
        for obj in release.render()
        if obj["kind"] == "Deployment"
        for container in obj["spec"]["template"]["spec"]["containers"]
        if container["name"].startswith("grafana-sc-")
    ]
    assert sidecars, "Grafana's sidecars are rendered"
    for container in sidecars:
        env = {e["name"]: e.get("value") for e in container.get("env") or []}
        assert env.get("NAMESPACE", release.namespace) == release.namespace, container["name"]
        labelled = {"metadata": {"name": "x", "labels": {env["LABEL"]: "1"}}, "data": {}}
        request = Request(object=labelled, namespace=tenant_namespace(run, "team-nlp"), resource="configmaps")
        assert admit(run, request), env


def test_the_docs_list_every_host_port_a_rendered_pod_opens() -> None:
    table = (ROOT / "docs" / "scaling.md").read_text()
    opened = set()
    for release in ALL:
        for _, spec in pod_specs(release.render()):
            for container in spec.get("containers") or []:
                for port in container.get("ports") or []:
                    if spec.get("hostNetwork") or port.get("hostPort"):
                        opened.add(
                            f"{port.get('hostPort') or port['containerPort']}/{port.get('protocol', 'TCP').lower()}"
                        )
    assert opened, "node-exporter listens on the host's network"
    missing = sorted(port for port in opened if f"| {port} |" not in table)
    assert not missing, f"docs/scaling.md's port table lacks {missing}"


def test_the_tools_fetch_every_chart_the_stacks_install() -> None:
    """Pulumi.dev.yaml's versions, the charts `pull-charts` fetches, and those the schema tests read agree."""
    installed = {release.chart for release in ALL}
    assert installed <= set(CHART_SOURCES), "a chart version changed: add it to harness/tools.py CHART_SOURCES"
    read = {KAI_CHART, VCLUSTER_CHART, GPU_OPERATOR_CHART, KUBE_PROMETHEUS_CHART}
    assert read <= installed, "tests/conftest.py reads another version than the stack installs"

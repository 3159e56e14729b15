"""Who a tenant's pods reach, and who reaches them, through the NetworkPolicies in force on the host.

The world of each stack: the NetworkPolicies the program registers, any a rendered chart
brings (tests/stacks.py renders every release with real Helm), the namespaces' labels, and
pods placed as they run: a team's workloads as vCluster's syncer writes them to the host
(tests/vcluster_syncer.py, including labels a team chose to impersonate the control plane
or its DNS), the control plane with the labels its rendered StatefulSet gives it, the
vCluster's CoreDNS, the host's DNS, and the machines. Connections are judged by the
NetworkPolicy stand-in (tests/network_policy.py). Each team is an attacker: every probe
of the host, the cloud's metadata and the other teams must be refused; the connections
a team's work needs (DDP between its pods, its own API and DNS, the internet) must not.
"""

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from components.vcluster_tenant.network import CONTROL_PLANE_POLICY
from harness import ProgramRun, dev_settings, run_main
from harness.mocks import API_SERVER_ENDPOINT
from tests.charts import render
from tests.network_policy import Pod, Target, World
from tests.stacks import MACHINES, STACKS, releases, stack
from tests.vcluster_syncer import to_host

Json = dict[str, Any]
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
NAMESPACE = "kubernetes:core/v1:Namespace"
INTERNET = "93.184.215.14"
METADATA = "169.254.169.254"
HOST_DNS = Pod("kube-system", "10.1.0.10", {"k8s-app": "kube-dns"})
MACHINE_PORTS = {
    22: "ssh",
    10250: "kubelet",
    16443: "API server",
    25000: "cluster agent",
    9100: "node-exporter",
    31421: "another team's node port",
    443: "SNI router",
}
"""What listens on a machine's address (docs/scaling.md's port table, the node ports, the SNI router)."""


def world(run: ProgramRun, rendered: list[Json]) -> World:
    policies = [{"metadata": r.inputs["metadata"], "spec": r.inputs["spec"]} for r in run.of_type(NETWORK_POLICY)] + [
        obj for obj in rendered if obj["kind"] == "NetworkPolicy"
    ]
    namespaces = {"kube-system": {"kubernetes.io/metadata.name": "kube-system"}}
    for namespace in run.of_type(NAMESPACE):
        metadata = namespace.inputs["metadata"]
        namespaces[metadata["name"]] = {
            **(metadata.get("labels") or {}),
            "kubernetes.io/metadata.name": metadata["name"],
        }
    return World(policies, namespaces)


class Tenant:
    """The pods of one tenant on the host, with addresses in MicroK8s' pod network."""

    def __init__(self, name: str, namespace: str, control_plane_labels: Json, index: int) -> None:
        self.name = name
        self.namespace = namespace
        self.control_plane = Pod(namespace, f"10.1.{index}.2", control_plane_labels)
        self.dns = self.synced("coredns", "kube-system", {"k8s-app": "vcluster-kube-dns"}, f"10.1.{index}.3")
        self.workload = self.synced("train-0", "default", {"app": "train"}, f"10.1.{index}.10")
        self.peer = self.synced("train-1", "default", {"app": "train"}, f"10.1.{index}.11")

    def synced(self, pod: str, namespace: str, labels: Json, ip: str) -> Pod:
        virtual = {"metadata": {"name": pod, "namespace": namespace, "labels": labels}, "spec": {"containers": []}}
        host = to_host(virtual, vcluster=self.name)
        return Pod(host["metadata"]["namespace"], ip, host["metadata"]["labels"])

    def impostors(self) -> Iterator[tuple[str, Pod]]:
        """A team's pods labelled as the platform's: the control plane's `release` and `app`, the DNS's
        `k8s-app`, another team's syncer's `managed-by`."""
        for index, labels in enumerate(
            (
                {"release": self.name, "app": "vcluster"},
                {"k8s-app": "vcluster-kube-dns"},
                {"vcluster.loft.sh/managed-by": "team-other"},
                {"k8s-app": "kube-dns"},
                # vCluster's own policies (off here) trusted these from any namespace.
                {"app": "loft"},
                {"app": "vcluster-snapshot"},
            )
        ):
            yield ",".join(labels), self.synced(f"sneaky-{index}", "default", labels, f"10.1.200.{index + 1}")


def _tenants(run: ProgramRun, name: str) -> dict[str, Tenant]:
    found = {}
    for index, release in enumerate(r for r in releases(name) if r.chart.startswith("vcluster-")):
        (statefulset,) = [o for o in release.render() if o["kind"] == "StatefulSet"]
        found[release.name] = Tenant(
            release.name, release.namespace, statefulset["spec"]["template"]["metadata"]["labels"], 10 + index
        )
    return found


def _rendered(name: str) -> list[Json]:
    return [obj for release in releases(name) if not release.addon for obj in release.render()]


class Scene:
    def __init__(self, name: str) -> None:
        self.run_name = name
        self.run = stack(name)
        self.world = world(self.run, _rendered(name))
        self.tenants = _tenants(self.run, name)
        self.machines = MACHINES[name]
        self.me = self.tenants["team-nlp"]
        self.other = self.tenants["team-vision"]


@pytest.fixture(scope="module", params=list(STACKS))
def scene(request: pytest.FixtureRequest) -> Scene:
    return Scene(request.param)


def _all_tenant_pods(me: Tenant) -> Iterator[tuple[str, Pod]]:
    yield "workload", me.workload
    yield "control plane", me.control_plane
    yield "vCluster DNS", me.dns
    yield from ((f"impostor {labels}", pod) for labels, pod in me.impostors())


# --- what a team's pods may not reach ----------------------------------------------------------------------


def test_no_pod_of_a_team_reaches_any_machine_of_the_cluster_at_any_port(scene: Scene) -> None:
    """Kubelet, cluster agent, node-exporter, the API server at its public address, other teams' node ports."""
    reached = [
        f"{who} -> {address}:{port} ({what})"
        for (who, pod), address, (port, what) in itertools.product(
            _all_tenant_pods(scene.me), scene.machines, MACHINE_PORTS.items()
        )
        if scene.world.allows(pod, Target(address, port))
    ]
    assert reached == []


@pytest.mark.parametrize("port", [80, 443])
def test_no_pod_of_a_team_reaches_the_clouds_metadata_service(scene: Scene, port: int) -> None:
    reached = [who for who, pod in _all_tenant_pods(scene.me) if scene.world.allows(pod, Target(METADATA, port))]
    assert reached == []


def test_no_pod_of_a_team_reaches_another_teams_pods(scene: Scene) -> None:
    other = scene.other
    targets = {
        "control plane": Target(other.control_plane.ip, 8443, pod=other.control_plane),
        "DNS": Target(other.dns.ip, 1053, "UDP", pod=other.dns),
        "workload": Target(other.workload.ip, 29500, pod=other.workload),
    }
    reached = [
        f"{who} -> {what}"
        for (who, pod), (what, target) in itertools.product(_all_tenant_pods(scene.me), targets.items())
        if scene.world.allows(pod, target)
    ]
    assert reached == []


def test_no_pod_of_a_team_reaches_the_platforms_pods(scene: Scene) -> None:
    """KAI's webhooks and binder, Prometheus, the GPU Operator: in their namespaces, at pod addresses."""
    platform = [
        Pod("kai-scheduler", "10.1.3.4", {"app": "binder"}),
        Pod("observability", "10.1.3.5", {"app.kubernetes.io/name": "prometheus"}),
        Pod("gpu-operator-resources", "10.1.3.6", {"app": "nvidia-dcgm-exporter"}),
    ]
    reached = [
        f"{who} -> {target.namespace}"
        for (who, pod), target in itertools.product(_all_tenant_pods(scene.me), platform)
        if scene.world.allows(pod, Target(target.ip, 443, pod=target))
    ]
    assert reached == []


def test_only_the_control_plane_reaches_the_host_api_server(scene: Scene) -> None:
    address, port = API_SERVER_ENDPOINT
    reached = [who for who, pod in _all_tenant_pods(scene.me) if scene.world.allows(pod, Target(address, port))]
    assert reached == ["control plane"]


def test_the_control_plane_reaches_nothing_else(scene: Scene) -> None:
    """The syncer talks to the host's API and its own pods; not the internet, not another port of the API's host."""
    control_plane = scene.me.control_plane
    address = API_SERVER_ENDPOINT[0]
    for target in (Target(INTERNET, 443), Target(address, 10250), Target(address, 25000)):
        assert not scene.world.allows(control_plane, target), target


def test_the_hosts_dns_is_reached_on_its_dns_port_alone(scene: Scene) -> None:
    """The host's DNS answers for every Service of the host. A team controls its CoreDNS (it runs inside the
    team's cluster) and could label any pod as it, so every pod of the team reaches the host's DNS: on port 53,
    and nothing more of it (docs/security.md#network)."""
    for who, pod in _all_tenant_pods(scene.me):
        assert scene.world.allows(pod, Target(HOST_DNS.ip, 53, "UDP", pod=HOST_DNS)), who
        assert not scene.world.allows(pod, Target(HOST_DNS.ip, 9153, pod=HOST_DNS)), f"{who}: only DNS"
        assert not scene.world.allows(pod, Target(HOST_DNS.ip, 8080, pod=HOST_DNS)), f"{who}: only DNS"


# --- what a team's work needs ------------------------------------------------------------------------------


def test_a_teams_pods_reach_each_other_on_any_port(scene: Scene) -> None:
    """DDP's rendezvous and NCCL, Ray's object store, a vLLM router: any port between a team's own pods."""
    me = scene.me
    for port in (29500, 6379, 8000, 40000):
        assert scene.world.allows(me.workload, Target(me.peer.ip, port, pod=me.peer)), port


def test_a_teams_pods_reach_their_api_server_and_dns(scene: Scene) -> None:
    me = scene.me
    assert scene.world.allows(me.workload, Target(me.control_plane.ip, 8443, pod=me.control_plane))
    assert scene.world.allows(me.workload, Target(me.dns.ip, 1053, "UDP", pod=me.dns))
    assert scene.world.allows(me.workload, Target(me.dns.ip, 1053, "TCP", pod=me.dns))
    assert scene.world.allows(me.dns, Target(me.control_plane.ip, 8443, pod=me.control_plane))
    assert scene.world.allows(me.control_plane, Target(me.workload.ip, 8080, pod=me.workload)), "logs, port-forward"


def test_a_teams_workloads_reach_the_internet(scene: Scene) -> None:
    """Pip, Hugging Face, container registries."""
    assert scene.world.allows(scene.me.workload, Target(INTERNET, 443))


def test_the_team_reaches_its_api_server_from_outside_and_nothing_else(scene: Scene) -> None:
    laptop = Pod("outside", "192.0.2.50")
    me = scene.me
    assert scene.world.allows(laptop, Target(me.control_plane.ip, 8443, pod=me.control_plane))
    assert not scene.world.allows(laptop, Target(me.workload.ip, 8888, pod=me.workload)), "a Jupyter, say"
    assert not scene.world.allows(laptop, Target(me.dns.ip, 1053, "UDP", pod=me.dns))


# --- the stack's own ranges, and why the chart's policies are off ---------------------------------------------


def test_ranges_the_stack_names_are_closed_to_every_team() -> None:
    """In kubeconfig mode, nodes this stack did not build are named in vcluster.blockedEgress."""
    config = dev_settings()
    config["vcluster"] = {"blockedEgress": ["192.0.2.0/24"]}
    run = run_main(config)
    policies = World(
        [{"metadata": r.inputs["metadata"], "spec": r.inputs["spec"]} for r in run.of_type(NETWORK_POLICY)], {}
    )
    for tenant in ("team-nlp", "team-vision", "team-recommender"):
        workload = Pod(f"vcluster-{tenant}", "10.1.9.9", {"vcluster.loft.sh/managed-by": tenant})
        assert not policies.allows(workload, Target("192.0.2.77", 10250))
        assert policies.allows(workload, Target(INTERNET, 443))


def test_the_charts_own_policies_would_open_the_metadata_service_and_other_teams_apis() -> None:
    """Why the program writes its own (components/vcluster_tenant/network.py): at the pinned chart, its
    control-plane policy allows 443, 8443 and 6443 anywhere. Should a chart upgrade close this, the
    program's policies may be reconsidered."""
    (release,) = [r for r in releases("brev") if r.name == "team-nlp"]
    values = {**release.values, "policies": {**release.values["policies"], "networkPolicy": {"enabled": True}}}
    rendered = render(release.name, release.namespace, release.chart, values)
    chart_policies = [obj for obj in rendered if obj["kind"] == "NetworkPolicy"]
    assert chart_policies
    (statefulset,) = [o for o in rendered if o["kind"] == "StatefulSet"]
    control_plane = Pod(release.namespace, "10.1.1.2", statefulset["spec"]["template"]["metadata"]["labels"])
    chart_world = World(chart_policies, {})
    assert chart_world.allows(control_plane, Target(METADATA, 443))
    assert chart_world.allows(control_plane, Target("10.1.2.2", 8443))


def test_the_control_planes_policy_is_installed_before_its_control_plane(scene: Scene) -> None:
    """It goes with the release (network.py): real Helm orders NetworkPolicies before StatefulSets, as it installs
    them, so the control plane never runs outside its policy."""
    for release in releases(scene.run_name):
        if release.addon or not release.resource.endswith("-vcluster"):
            continue
        kinds = [(obj["kind"], obj["metadata"]["name"]) for obj in release.render()]
        fence = kinds.index(("NetworkPolicy", CONTROL_PLANE_POLICY))
        assert fence < min(i for i, (kind, _) in enumerate(kinds) if kind == "StatefulSet"), release.resource

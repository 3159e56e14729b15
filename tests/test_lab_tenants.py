"""The real vCluster in the lab: a team's `kubectl apply` inside its tenant, followed to the host.

The dev stack is applied to a lab of this module's own (harness.lab apply); each tenant's
control plane is the chart's StatefulSet pod, run by the lab's kubelet as processes (the
open-source vcluster 0.35.1, kine and the lab's 1.36 binaries, built from the Go module proxy).
A team uses the kubeconfig its vCluster wrote, through the node port the stack exposes. What
the host receives is what the real syncer writes, through the program's real admission
policies; what the team sees back is what the syncer tells it.
"""

import copy
import functools
import hashlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from components.vcluster_tenant.members import (
    SERVICE_ACCOUNT_ANNOTATION,
    member_kubeconfig,
    member_token,
    member_user,
)
from components.vcluster_tenant.oidc import sign_in_kubeconfig
from config.names import QUEUE_VIEW_IN_TENANT
from config.stack import parse_stack_config
from config.upstream import GANG_KEY_LABELS
from config.vcluster_tenant.oidc import OidcConfig
from harness import ROOT, ProgramRun, Registration, dev_settings, run_main
from harness.lab.apply import RELEASE, apply_stack, manifest
from harness.lab.cluster import LabPaths, read_lab
from harness.lab.kube import ApiError
from harness.lab.operators import OPERATORS, Operator
from harness.lab.tenants import tenants
from harness.tools import helm_path
from tests.kai_podgrouper import pod_group
from tests.kai_webhook import KAI_SERVING_LABEL
from tests.lab import Lab, lab_command, private_lab, serve_kai_webhook
from tests.lab import kubectl as host_kubectl
from tests.oidc_provider import IdentityProvider, new_key
from tests.syncer_cases import CASES, EDITED, EDITS, Edit
from tests.teams_page import page_manifests
from tests.tenant_pods import BINDER, POD_GROUPER
from tests.vcluster_syncer import ACCESS_VOLUME, TOKEN, TOKEN_ANNOTATION, TOKEN_PREFIX, Syncer, stored
from tests.workload_operators import pods_of

Json = dict[str, Any]
TEAMS = ("team-nlp", "team-recommender", "team-vision")
CUDA = "nvcr.io/nvidia/cuda:13.0.1-base-ubuntu24.04"
OIDC_CLIENT = "gpu-tenancy"
NLP_GROUP = "ml-nlp"


class Applied(NamedTuple):
    lab: Lab
    result: subprocess.CompletedProcess[str]
    identity_provider: IdentityProvider


@pytest.fixture(scope="module")
def applied() -> Iterator[Applied]:
    """The reference stack applied through the lab's command line, as a user applies it, and its tenants up;
    its tenants trust an identity provider (a stand-in on the lab's bridge), and team-nlp names its group."""
    with private_lab("tenants") as lab:
        provider = IdentityProvider(lab.gateway)
        try:
            stack = _with_identity_provider(lab, provider)
            result = lab_command("apply", str(stack), "--state", str(lab.state))
            assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
            eventually(lambda: all(t.ready and t.kubeconfig for t in tenants(lab.admin, lab.state)), within=180)
            yield Applied(lab, result, provider)
        finally:
            provider.close()


def _oidc(provider: IdentityProvider) -> Json:
    return {"issuerUrl": provider.issuer, "clientId": OIDC_CLIENT, "certificateAuthority": provider.ca_pem}


def _with_identity_provider(lab: Lab, provider: IdentityProvider) -> Path:
    """Pulumi.dev.yaml, as the lab's stack file, with vcluster.oidc set to `provider` and team-nlp's group."""
    document = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    config = document["config"]
    config.setdefault("gpu-tenancy:vcluster", {})["oidc"] = _oidc(provider)
    config["gpu-tenancy:tenants"][0]["groups"] = [NLP_GROUP]
    path = lab.state / "stack" / "Pulumi.dev.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def lab(applied: Applied) -> Lab:
    return applied.lab


@pytest.fixture(scope="module")
def identity_provider(applied: Applied) -> IdentityProvider:
    return applied.identity_provider


@pytest.fixture(scope="module")
def kai_webhook(lab: Lab) -> None:
    """KAI's webhook, its stand-in, registered for namespaces labelled KAI_SERVING_LABEL (tests/lab.py)."""
    serve_kai_webhook(lab.state, lab.admin)


def test_the_reference_stack_is_applied_and_every_object_accepted(applied: Applied) -> None:
    """kubeconfig mode, three teams, observability on; what the lab cannot honour it says, and exits 0."""
    lab, result = applied.lab, applied.result
    assert "REFUSED" not in result.stdout
    assert "mode: kubeconfig" in result.stdout, "the derived stack file is printed"
    assert result.stdout.count("NOT AWAITED Job") == 1, "KAI's gate alone"
    for team in ("team-nlp", "team-vision", "team-recommender"):
        assert f"awaited Job vcluster-{team}/kubeconfig-gate: complete" in result.stdout, "the real vCluster wrote it"
    for release in ("team-nlp", "team-vision", "team-recommender", "kai-scheduler", "kube-prometheus-stack"):
        assert f"/{release} in " in result.stdout, release
    described = read_lab(lab.state)
    assert described is not None
    processes = {name for name in described["processes"] if name.startswith("pod/")}
    assert any(name.startswith("pod/gpu-tenancy-gangs/gang-controller-") for name in processes), processes
    assert any("gpu-tenancy-label-proxy" in name for name in processes), processes
    assert any(entry.startswith("kai-scheduler/kai-operator-") for entry in described["faked"]), described["faked"]
    gate = host_kubectl(lab, "get", "job", "gpu-gate", "-n", "gpu-tenancy-system", "-o", "jsonpath={.status.succeeded}")
    assert gate.stdout == "1", "the GPU gate passed on the lab's labelled nodes, with the real kubectl"
    upgrader = lab.admin.list("v1", "Pod", "kai-scheduler")
    assert not [p for p in upgrader if p["metadata"]["name"].startswith("crd-upgrader")], "its hook pod was deleted"
    crds = lab.admin.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "podgroups.scheduling.run.ai")
    managers = {entry["manager"] for entry in crds["metadata"]["managedFields"]}
    assert "kubectl" in managers, "KAI's crd-upgrader hook applied the CRDs for real, with kubectl"


def test_a_second_apply_changes_nothing(lab: Lab) -> None:
    before = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in lab.admin.list("v1", "Pod")}
    result = lab_command("apply", str(lab.state / "stack" / "Pulumi.dev.yaml"), "--state", str(lab.state))
    assert result.returncode == 0, result.stdout[-3000:]
    after = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in lab.admin.list("v1", "Pod")}
    assert before == after, "no pod was replaced"


def eventually(check: Callable[[], Any], within: float = 60.0) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError("never reached the expected state")


def kubectl(lab: Lab, team: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The team member's kubectl, with the kubeconfig the team is given."""
    config = lab.state / "tenants" / team / "kubeconfig"
    command = [str(lab.kubectl()), f"--kubeconfig={config}", "--request-timeout=20s", *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60, check=False)


def apply(lab: Lab, team: str, pod: Json, *, server_side: bool = False) -> None:
    how = ["--server-side"] if server_side else []
    done = kubectl(lab, team, "apply", *how, "-f", "-", stdin=json.dumps(pod))
    assert done.returncode == 0, done.stderr


def host_pod(lab: Lab, team: str, name: str) -> Json | None:
    return lab.admin.find("v1", "Pod", f"{name}-x-default-x-{team}", f"vcluster-{team}")


def team_pod(name: str, *, labels: Json | None = None, annotations: Json | None = None, **spec: Any) -> Json:
    metadata: Json = {"name": name, "namespace": "default", "labels": {"app": name, **(labels or {})}}
    if annotations:
        metadata["annotations"] = annotations
    containers = [{"name": "main", "image": CUDA, "command": ["sleep", "infinity"]}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": containers, **spec}}


@pytest.fixture
def team_nlp_pods_go(lab: Lab) -> Iterator[None]:
    """team-nlp's pods go when the test ends: the team's quota is sized for one GPU (a GPU's share of the machine,
    twice over in limits), so a bare pod's default limits (half a share) let four such pods run at once, and one
    test's pods must not crowd out the next's. The host's pods are gone when the syncer has deleted them."""
    yield
    removed = kubectl(lab, "team-nlp", "delete", "pods", "--all", "-n", "default", "--force", "--grace-period=0")
    assert removed.returncode == 0, removed.stderr
    eventually(lambda: not [p for p in lab.admin.list("v1", "Pod", "vcluster-team-nlp") if _from_default(p)])


def _from_default(host_pod: Json) -> bool:
    return str(host_pod["metadata"]["name"]).endswith("-x-default-x-team-nlp")


def sync_errors(lab: Lab, team: str, name: str, kind: str = "Pod") -> list[str]:
    listed = kubectl(lab, team, "get", "events", "-n", "default", "-o", "json")
    events = json.loads(listed.stdout or '{"items": []}')["items"]

    def about(event: Json) -> tuple[str, str]:
        involved = event.get("involvedObject") or {}
        return involved.get("kind", ""), involved.get("name", "")

    return [e["message"] for e in events if e.get("reason") == "SyncError" and about(e) == (kind, name)]


@pytest.mark.parametrize("team", TEAMS)
def test_each_team_reaches_its_own_vcluster_as_cluster_admin(lab: Lab, team: str) -> None:
    version = kubectl(lab, team, "version", "-o", "json")
    assert version.returncode == 0, version.stderr
    assert json.loads(version.stdout)["serverVersion"]["gitVersion"].startswith("v1.36.")
    assert kubectl(lab, team, "auth", "can-i", "*", "*").stdout.strip() == "yes"
    namespaces = kubectl(lab, team, "get", "namespaces", "-o", "name").stdout.split()
    assert "namespace/default" in namespaces
    assert not [n for n in namespaces if n.startswith("namespace/vcluster-")], "no host namespace is visible"


@pytest.mark.usefixtures("team_nlp_pods_go")
def test_a_teams_gpu_pod_reaches_the_host_in_its_own_queue_whatever_queue_it_names(lab: Lab) -> None:
    pod = team_pod("train", labels={"kai.scheduler/queue": "team-vision"})
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    apply(lab, "team-nlp", pod)
    host = eventually(lambda: host_pod(lab, "team-nlp", "train"))
    assert host["metadata"]["labels"]["kai.scheduler/queue"] == "team-nlp"
    assert host["spec"]["schedulerName"] == "kai-scheduler"
    # The syncer carries the host's pinning back into the team's pod.
    shown = eventually(lambda: kubectl(lab, "team-nlp", "get", "pod", "train", "-o", "json").stdout)
    eventually(
        lambda: (
            json.loads(kubectl(lab, "team-nlp", "get", "pod", "train", "-o", "json").stdout or shown)["metadata"][
                "labels"
            ].get("kai.scheduler/queue")
            == "team-nlp"
        )
    )


def _container(**fields: Any) -> list[Json]:
    return [{"name": "main", "image": CUDA, "command": ["sleep", "infinity"], **fields}]


@pytest.mark.usefixtures("team_nlp_pods_go")
def test_kubectl_apply_copies_the_manifest_into_an_annotation_which_is_bounded_first(lab: Lab) -> None:
    """kubectl's client-side apply keeps the whole manifest in kubectl.kubernetes.io/last-applied-configuration, so a
    pod's env counts there too, and the API server names the first rule that fails: the annotation bound. A
    server-side apply adds no annotation (tests/syncer_cases.py replays that, as `kubectl create`)."""
    pod = team_pod("dataset", containers=_container(env=[{"name": "DATA", "value": "d" * 70000}]))
    apply(lab, "team-nlp", pod)
    errors = eventually(lambda: sync_errors(lab, "team-nlp", "dataset"), within=30)
    assert any("annotations hold" in error for error in errors), errors
    assert host_pod(lab, "team-nlp", "dataset") is None


@pytest.mark.usefixtures("team_nlp_pods_go")
def test_a_pod_named_long_past_the_host_limit_gets_the_syncers_hashed_name(lab: Lab) -> None:
    """SafeConcatName: a host name over 63 characters is cut and given a digest; the team still sees its own."""
    name = "a-distributed-training-job-with-a-very-long-descriptive-name-w0"
    apply(lab, "team-nlp", team_pod(name))
    host = Syncer("team-nlp").host_name(name, "default")
    assert len(host) <= 63
    eventually(lambda: lab.admin.find("v1", "Pod", host, "vcluster-team-nlp"), within=30)


@pytest.mark.usefixtures("team_nlp_pods_go")
def test_a_pod_that_names_a_system_priority_class_gets_none_on_the_host(lab: Lab) -> None:
    """The virtual cluster has system-node-critical too; with no PriorityClass sync the syncer drops the field
    (pods/translate/translator.go @v0.35.1), and the pod runs at KAI's class from its label."""
    apply(lab, "team-nlp", team_pod("outranks", priorityClassName="system-node-critical"))
    host = eventually(lambda: host_pod(lab, "team-nlp", "outranks"))
    assert not host["spec"].get("priorityClassName")
    assert not host["spec"].get("priority")


@pytest.mark.usefixtures("team_nlp_pods_go")
def test_no_syncer_reads_another_teams_pods_and_their_tokens(lab: Lab) -> None:
    """The chart's node sync would let every syncer read every team's pods, and the syncer writes each pod's
    ServiceAccount token (for the team's own cluster, ten years) into an annotation: the platform's ClusterRole
    leaves that read out (config/vcluster_tenant/syncer_role.py), and the syncers still sync pods and nodes."""
    apply(lab, "team-nlp", team_pod("holds-a-token"))
    host = eventually(lambda: host_pod(lab, "team-nlp", "holds-a-token"))
    assert [key for key in host["metadata"]["annotations"] if key.startswith(TOKEN_PREFIX)], "the token is there"
    groups = ("system:serviceaccounts", "system:serviceaccounts:vcluster-team-vision", "system:authenticated")
    vision = lab.admin.impersonating("system:serviceaccount:vcluster-team-vision:vc-team-vision", groups)
    for where in ("vcluster-team-nlp", None):
        with pytest.raises(ApiError) as refused:
            vision.list("v1", "Pod", where)
        assert refused.value.code == 403, where
    assert vision.list("v1", "Pod", "vcluster-team-vision") is not None, "its own, through the chart's Role"

    def gpus(nodes: list[Json]) -> dict[str, str]:
        allocatable = {n["metadata"]["name"]: n["status"]["allocatable"].get("nvidia.com/gpu") for n in nodes}
        return {name: count for name, count in allocatable.items() if count}

    seen = gpus(json.loads(kubectl(lab, "team-vision", "get", "nodes", "-o", "json").stdout)["items"])
    assert seen == gpus(lab.admin.list("v1", "Node")), "the team sees the host's GPU nodes, as they are"
    assert seen


REPLAY = "replay"
"""The namespace of team-nlp's cluster the suite's cases are replayed in (tests/syncer_cases.py)."""
SYNCER_USER = "system:serviceaccount:vcluster-team-nlp:vc-team-nlp"
LAB_ANSWERS: dict[str, tuple[str, ...] | None] = {
    # In kubeconfig mode (the lab's) no GPU node is read, so a team's gpu-memory floor is the configured 256 MiB,
    # not 5% of an L40S (docs/security.md); the mocks' brev stack reads 46068 MiB and refuses this one.
    "fraction/the-old-floor": None,
    "fraction/below-by-one": None,
}
"""Cases whose answer in the lab differs from the fast tests', with why."""
REFUSED_INSIDE = {
    "node-network/host-path": "the tenant's own Pod Security (baseline) refuses a hostPath volume",
}
"""Cases the tenant's own API server refuses, so no syncer ever sees them. (A Service the host refuses, the team's
create fails with: vCluster writes the host's copy first, pkg/server/filters/service.go @v0.35.1.)"""
GENERATED = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")
"""What the tenant's API server fills in that no model predicts."""


class Replayed(NamedTuple):
    stored: Json | None
    """The followed object as the tenant's API server stored it; None when it refused it."""
    tenant_refusal: str
    sent: Json | None
    """What the real syncer sent the host for it first (the lab's audit log); None: nothing."""
    code: int
    message: str


class Replay(NamedTuple):
    results: dict[str, Replayed]
    syncer: Syncer
    """The model, with what the real tenant's syncer reads: its API's and DNS's addresses, its Services."""


def _in_replay(obj: Json) -> Json:
    moved = copy.deepcopy(obj)
    if moved["kind"] not in ("RuntimeClass", "PriorityClass") and moved["metadata"].get("namespace") == "default":
        moved["metadata"]["namespace"] = REPLAY
    return moved


def _host_name(obj: Json) -> str:
    return Syncer("team-nlp").host_name(obj["metadata"]["name"], obj["metadata"]["namespace"])


def _syncer_writes(lab: Lab, offset: int) -> dict[tuple[str, str], Json]:
    """The first create team-nlp's syncer sent for each (resource, host name), from the audit log past `offset`."""
    first: dict[tuple[str, str], Json] = {}
    with open(LabPaths(lab.state).writes, "rb") as log:
        log.seek(offset)
        for line in log:
            event = json.loads(line)
            reference = event["objectRef"]
            if event["user"]["username"] == SYNCER_USER and event["verb"] == "create":
                first.setdefault((reference["resource"], reference.get("name", "")), event)
    return first


def _create(lab: Lab, obj: Json) -> tuple[Json | None, str]:
    """POSTed as it is (kubectl's own create would rewrite a last-applied-configuration annotation it carries), and
    the object the tenant's API server stored, or its refusal."""
    path = f"/api/v1/namespaces/{obj['metadata']['namespace']}/{_resource(obj)}"
    done = kubectl(lab, "team-nlp", "create", "--raw", path, "-f", "-", stdin=json.dumps(obj))
    return (json.loads(done.stdout), "") if done.returncode == 0 else (None, done.stderr)


@pytest.fixture(scope="module")
def replay(lab: Lab, kai_webhook: None) -> Replay:
    """Every case created in team-nlp's cluster, KAI's webhook serving or not as each case's table has it, each
    followed to what the real syncer sent and the host answered; then all of it deleted again, so the module's later
    tests meet team-nlp's quota as the stack sets it."""
    namespace_made = kubectl(lab, "team-nlp", "create", "namespace", REPLAY)
    assert namespace_made.returncode == 0, namespace_made.stderr
    # vCluster labels a new namespace with the tenant's Pod Security level; the syncer copies those labels.
    eventually(lambda: "pod-security.kubernetes.io/enforce" in _virtual_namespace_labels(lab, REPLAY))
    offset = LabPaths(lab.state).writes.stat().st_size
    try:
        created = _create_every_case(lab, offset)
        writes = _syncer_writes(lab, offset)
        answers = {}
        for key, case in CASES.items():
            stored_object, refusal = created[key]
            followed = _in_replay(case.followed)
            event = writes.get((_resource(followed), _host_name(followed))) or {}
            status = event.get("responseStatus") or {}
            sent, code, message = event.get("requestObject"), status.get("code", 0), status.get("message", "")
            answers[key] = Replayed(stored_object, refusal, sent, code, message)
        return Replay(answers, _real_syncer(lab))
    finally:
        _kai_serves_team_nlp(lab, serving=False)
        kubectl(lab, "team-nlp", "delete", "namespace", REPLAY, "--wait=false")
        kubectl(lab, "team-nlp", "delete", "pod", "network-coredns", "-n", "kube-system", "--force", "--grace-period=0")

        def gone() -> bool:
            pods = [p["metadata"]["name"] for p in lab.admin.list("v1", "Pod", "vcluster-team-nlp")]
            secrets = [p["metadata"]["name"] for p in lab.admin.list("v1", "Secret", "vcluster-team-nlp")]
            left = [n for n in pods + secrets if f"-x-{REPLAY}-x-" in n or n.startswith("network-coredns")]
            return not left

        eventually(gone, within=120)


def _create_every_case(lab: Lab, offset: int) -> dict[str, tuple[Json | None, str]]:
    """Each case's objects, created in the replay namespace: the Services first (the syncer gives a pod links to its
    namespace's Services as they are when it writes it), then the cases decided without KAI's webhook, then with
    it; each phase waits until the syncer has sent every case the tenant stored."""
    created: dict[str, tuple[Json | None, str]] = {}
    services = [key for key, case in CASES.items() if case.followed["kind"] == "Service"]
    for key in services:
        created[key] = _create(lab, _in_replay(CASES[key].followed))
    for kai_serves in (False, True):
        _kai_serves_team_nlp(lab, serving=kai_serves)
        phase = [key for key, case in CASES.items() if case.kai_serves is kai_serves and key not in services]
        for key in phase:
            case = CASES[key]
            for obj in case.cluster_objects:
                kubectl(lab, "team-nlp", "apply", "-f", "-", stdin=json.dumps(obj))
            created[key] = [_create(lab, _in_replay(obj)) for obj in case.objects][case.follow]

        def answered(keys: list[str] = phase) -> bool:
            writes = _syncer_writes(lab, offset)
            followed = [_in_replay(CASES[key].followed) for key in keys if created[key][0] is not None]
            return all((_resource(obj), _host_name(obj)) in writes for obj in followed)

        eventually(answered, within=180)
    return created


def _resource(obj: Json) -> str:
    return {"Pod": "pods", "Service": "services", "ConfigMap": "configmaps", "Secret": "secrets"}[obj["kind"]]


def _virtual_namespace_labels(lab: Lab, namespace: str) -> Json:
    listed = kubectl(lab, "team-nlp", "get", "namespace", namespace, "-o", "json")
    return json.loads(listed.stdout)["metadata"].get("labels") or {} if listed.returncode == 0 else {}


def _kai_serves_team_nlp(lab: Lab, *, serving: bool) -> None:
    """KAI's webhook (its stand-in) serves a namespace by its label, as KAI's serves every namespace once it runs."""
    label = {KAI_SERVING_LABEL: "serving" if serving else None}
    lab.admin.patch(lab.admin.get("v1", "Namespace", "vcluster-team-nlp"), {"metadata": {"labels": label}})


def _real_syncer(lab: Lab) -> Syncer:
    """The model with what team-nlp's real syncer reads: its API's and CoreDNS's host Services, its Services."""
    where = "vcluster-team-nlp"
    kube_ip = lab.admin.get("v1", "Service", "team-nlp", where)["spec"]["clusterIP"]
    dns_ip = lab.admin.get("v1", "Service", "kube-dns-x-kube-system-x-team-nlp", where)["spec"]["clusterIP"]
    services = {}
    for namespace in (REPLAY, "kube-system"):
        listed = json.loads(kubectl(lab, "team-nlp", "get", "services", "-n", namespace, "-o", "json").stdout)
        services[namespace] = listed["items"]
    return Syncer("team-nlp", kube_ip=kube_ip, dns_ip=dns_ip, services=services)


@pytest.mark.parametrize("key", CASES)
def test_each_case_of_the_suite_meets_the_same_answer_through_the_real_syncer(replay: Replay, key: str) -> None:
    """Created inside a real tenant with kubectl: what the fast tests' model says the host answers, the host answers
    to what the real syncer sent. A quota's refusal is the fence's consent: the API server runs ResourceQuota after
    every admission policy and webhook (kubernetes pkg/kubeapiserver/options/plugins.go AllOrderedPlugins
    @v1.36.3), and the replay's admitted pods share one team's quota."""
    expected = LAB_ANSWERS[key] if key in LAB_ANSWERS else CASES[key].refusal
    got = replay.results[key]
    if key in REFUSED_INSIDE:
        assert got.sent is None, "the syncer sent it"
        assert expected is not None
        assert any(reason in got.tenant_refusal for reason in expected), got.tenant_refusal
        return
    assert got.sent is not None, got.tenant_refusal or "the syncer sent nothing"
    if expected is None:
        assert got.code in (200, 201) or "exceeded quota" in got.message, (got.code, got.message)
    else:
        assert got.code >= 400, "admitted"
        assert any(reason in got.message for reason in expected), got.message


def _generated_removed(obj: Json) -> Json:
    clean = copy.deepcopy(obj)
    for key in GENERATED:
        clean["metadata"].pop(key, None)
    clean.pop("status", None)
    return clean


@pytest.mark.parametrize("key", [key for key in CASES if key not in REFUSED_INSIDE])
def test_the_model_of_the_syncer_sends_what_the_real_one_sends(replay: Replay, key: str) -> None:
    """tests/vcluster_syncer.py, which every fast test of the fence uses, field by field against the real programs:
    a pod as the tenant's API server stored it, and what the real syncer sent the host for it, a pod, a Service, a
    ConfigMap or a Secret."""
    got = replay.results[key]
    assert got.sent is not None, got.tenant_refusal or "the syncer sent nothing"
    sent = {k: v for k, v in got.sent.items() if k != "status"}
    written = _in_replay(CASES[key].followed)
    if written["kind"] == "Service":
        _same(replay.syncer.host_service(written), sent)
        return
    assert got.stored is not None, got.tenant_refusal
    if written["kind"] != "Pod":
        _same(replay.syncer.host_config(got.stored), sent)
        return
    real = _generated_removed(got.stored)
    written["metadata"]["uid"] = got.stored["metadata"]["uid"]
    # The ServiceAccount admission plugin names the token's volume at random; the model picks one name.
    access = [v["name"] for v in real["spec"].get("volumes") or [] if v["name"].startswith("kube-api-access-")]
    modelled = json.dumps(stored(written)).replace(ACCESS_VOLUME, access[0] if access else ACCESS_VOLUME)
    _same(_generated_removed(json.loads(modelled)), real, "the tenant's API server")
    _same(replay.syncer.host_pod(got.stored), _with_the_models_token(sent), "the syncer")


def _with_the_models_token(sent: Json) -> Json:
    """The real pod with the model's token: the syncer names its annotation at random, and the token is the tenant
    API's; its size, which counts against the annotation bound, is the model's within a few hundred bytes."""
    annotations = sent["metadata"]["annotations"]
    (key,) = [key for key in annotations if key.startswith(TOKEN_PREFIX)]
    assert abs(len(annotations[key]) - len(TOKEN)) < 200, len(annotations[key])
    text = json.dumps(sent).replace(key, TOKEN_ANNOTATION).replace(annotations[key], TOKEN)
    renamed: Json = json.loads(text)
    return renamed


def _same(model: Json, real: Json, what: str = "the syncer") -> None:
    differences = _differences(model, real)
    assert not differences, f"{what}: " + "; ".join(differences)


def _differences(model: Any, real: Any, path: str = "") -> list[str]:
    """Where the model and the real object differ, path by path."""
    if isinstance(model, dict) and isinstance(real, dict):
        return [
            line
            for key in sorted(model.keys() | real.keys())
            for line in (
                [f"{path}/{key}: only the real one has {json.dumps(real[key])[:300]}"]
                if key not in model
                else [f"{path}/{key}: only the model has {json.dumps(model[key])[:300]}"]
                if key not in real
                else _differences(model[key], real[key], f"{path}/{key}")
            )
        ]
    if isinstance(model, list) and isinstance(real, list) and len(model) == len(real):
        return [
            line
            for i, (m, r) in enumerate(zip(model, real, strict=True))
            for line in _differences(m, r, f"{path}[{i}]")
        ]
    return [] if model == real else [f"{path}: model {json.dumps(model)[:300]}, real {json.dumps(real)[:300]}"]


EDITING = "edits"
"""The namespace of team-nlp's cluster the suite's edits are replayed in (tests/syncer_cases.py EDITS)."""
KAI_GROUP = "0a3c5b58-52d0-4c6e-a4be-2c54e8a1b3f0"


class EditAnswer(NamedTuple):
    host_before: Json
    """The host pod just before the team's change, KAI's keys on it."""
    before: Json
    """The team's pod just before, KAI's keys copied in."""
    after: Json
    """The team's pod as it wrote it back."""
    sent: Json | None
    """The syncer's first write of the host pod after the change (the lab's audit log)."""
    code: int
    message: str


def _edited_pod(name: str) -> Json:
    """EDITED, small enough that every edit's pod fits team-nlp's quota at once."""
    pod = _named_in(EDITED, name, EDITING)
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "50m", "memory": "64Mi", "ephemeral-storage": "1Gi"}}
    return pod


def _named_in(pod: Json, name: str, namespace: str) -> Json:
    named = copy.deepcopy(pod)
    named.update({"apiVersion": "v1", "kind": "Pod"})
    named["metadata"].update({"name": name, "namespace": namespace})
    return named


def _kai_books(lab: Lab, host: Json) -> None:
    """What KAI's pod-grouper and binder write on a fraction's pod they group and bind (tests/test_kai_bookkeeping.py
    _grouped and _bound), each as itself, so the fence decides it as KAI's own write."""
    meta = host["metadata"]
    grouped = {"annotations": {"pod-group-name": f"pg-{meta['name']}-{meta['uid']}"}}
    lab.as_user(POD_GROUPER).patch(host, {"metadata": grouped})
    bound = {"labels": {"runai-gpu-group": KAI_GROUP}, "annotations": {"received-resource-type": "Fraction"}}
    lab.as_user(BINDER).patch(host, {"metadata": bound})


def _syncer_updates(lab: Lab, offset: int) -> dict[tuple[str, str], Json]:
    """team-nlp's syncer's first update of each (subresource, host pod) past `offset`."""
    first: dict[tuple[str, str], Json] = {}
    with open(LabPaths(lab.state).writes, "rb") as log:
        log.seek(offset)
        for line in log:
            event = json.loads(line)
            reference = event["objectRef"]
            mine = event["user"]["username"] == SYNCER_USER and reference["resource"] == "pods"
            if mine and event["verb"] == "update" and reference.get("subresource", "") in ("", "ephemeralcontainers"):
                first.setdefault((reference.get("subresource", ""), reference["name"]), event)
    return first


def _get_team_pod(lab: Lab, name: str) -> Json:
    read = kubectl(lab, "team-nlp", "get", "pod", name, "-n", EDITING, "-o", "json")
    assert read.returncode == 0, read.stderr
    pod: Json = json.loads(read.stdout)
    return pod


def _kai_booked(lab: Lab, names: dict[str, str], hosts: dict[str, str]) -> bool:
    """The syncer copied KAI's keys into each team pod and wrote the host pod's labels annotation again."""
    for key, name in names.items():
        team, host = _get_team_pod(lab, name), host_pod_in(lab, hosts[key]) or {"metadata": {"annotations": {}}}
        if "runai-gpu-group" not in team["metadata"].get("labels", {}):
            return False
        if "runai-gpu-group=" not in host["metadata"]["annotations"].get("vcluster.loft.sh/labels", ""):
            return False
    return True


def _make_the_edit(lab: Lab, name: str, edit: Edit, before: Json) -> Json:
    """The team's change, with kubectl: a `replace` of its pod as it read it, or a `kubectl debug`."""
    after = copy.deepcopy(before)
    if edit.change is None:
        # kubectl's default profile (general) adds SYS_PTRACE, which the tenant's own Pod Security baseline refuses.
        debug = ["debug", f"pod/{name}", "-n", EDITING, "--profile=baseline", f"--image={CUDA}", "-c", "debug"]
        done = kubectl(lab, "team-nlp", *debug, *[f"--env={e['name']}={e['value']}" for e in edit.debug_env or []])
    else:
        edit.change(after)
        done = kubectl(lab, "team-nlp", "replace", "-f", "-", stdin=json.dumps(after))
    assert done.returncode == 0, done.stderr
    return after


def _subresource(edit: Edit) -> str:
    return "" if edit.change is not None else "ephemeralcontainers"


@pytest.fixture(scope="module")
def edited(lab: Lab, kai_webhook: None) -> dict[str, EditAnswer]:
    """Each edit on a pod of its own in team-nlp's cluster: the pod made, KAI's keys written on the host and copied
    back by the syncer, then the team's change (or `kubectl debug`) and what the syncer sent the host for it; then
    it all goes, so the module's later tests meet team-nlp's quota as the stack sets it."""
    made = kubectl(lab, "team-nlp", "create", "namespace", EDITING)
    assert made.returncode == 0, made.stderr
    eventually(lambda: "pod-security.kubernetes.io/enforce" in _virtual_namespace_labels(lab, EDITING))
    _kai_serves_team_nlp(lab, serving=True)
    names = {key: f"edit-{index:02d}" for index, key in enumerate(EDITS)}
    hosts = {key: Syncer("team-nlp").host_name(name, EDITING) for key, name in names.items()}
    try:
        for name in names.values():
            stored_pod, refusal = _create(lab, _edited_pod(name))
            assert stored_pod is not None, refusal
        for host in eventually(lambda: all(pods := [host_pod_in(lab, h) for h in hosts.values()]) and pods, 120):
            _kai_books(lab, host)
        eventually(lambda: _kai_booked(lab, names, hosts), within=120)
        offset = LabPaths(lab.state).writes.stat().st_size
        before = {key: (host_pod_in(lab, hosts[key]), _get_team_pod(lab, name)) for key, name in names.items()}
        afters = {key: _make_the_edit(lab, name, EDITS[key], before[key][1]) for key, name in names.items()}
        wanted = {(_subresource(EDITS[key]), host) for key, host in hosts.items()}
        eventually(lambda: wanted <= set(_syncer_updates(lab, offset)), within=120)
        updates = _syncer_updates(lab, offset)
        answers = {}
        for key, host in hosts.items():
            event = updates[(_subresource(EDITS[key]), host)]
            status, (host_before, team_before) = event["responseStatus"], before[key]
            assert host_before is not None
            sent, code, message = event.get("requestObject"), status["code"], status.get("message", "")
            answers[key] = EditAnswer(host_before, team_before, afters[key], sent, code, message)
        return answers
    finally:
        _kai_serves_team_nlp(lab, serving=False)
        kubectl(lab, "team-nlp", "delete", "namespace", EDITING, "--wait=false")
        eventually(lambda: not [h for h in hosts.values() if host_pod_in(lab, h)], within=120)


def host_pod_in(lab: Lab, host_name: str) -> Json | None:
    return lab.admin.find("v1", "Pod", host_name, "vcluster-team-nlp")


@pytest.mark.parametrize("key", EDITS)
def test_each_edit_of_the_suite_meets_the_same_answer_through_the_real_syncer(
    edited: dict[str, EditAnswer], key: str
) -> None:
    """A team's change to its running pod, made with kubectl inside its cluster: the host answers what the real
    syncer sent as the fast tests say it does."""
    got, expected = edited[key], EDITS[key].refusal
    if expected is None:
        assert got.code == 200, got.message
    else:
        assert got.code >= 400, "admitted"
        assert any(reason in got.message for reason in expected), got.message


@pytest.mark.parametrize("key", [key for key, edit in EDITS.items() if edit.change is not None])
def test_the_model_of_the_syncer_carries_an_edit_as_the_real_one_does(edited: dict[str, EditAnswer], key: str) -> None:
    """tests/vcluster_syncer.py Syncer.edit against the real syncer's update: the labels and annotations it sends."""
    got = edited[key]
    assert got.sent is not None
    modelled = Syncer("team-nlp").edit(got.host_before, got.before, got.after)["metadata"]
    for part in ("labels", "annotations"):
        _same(modelled.get(part) or {}, got.sent["metadata"].get(part) or {}, f"the syncer's {part}")


def test_the_lab_lists_its_tenants_with_their_kubeconfigs(lab: Lab) -> None:
    listed = {t.name: t for t in tenants(lab.admin, lab.state)}
    assert set(listed) == set(TEAMS)
    for team, tenant in listed.items():
        assert tenant.kubeconfig == lab.state / "tenants" / team / "kubeconfig"
        assert Path(tenant.kubeconfig).stat().st_mode & 0o077 == 0, "a credential, readable by its owner alone"


def _queue_view(lab: Lab, team: str) -> str:
    """What a member reads: the view's text, with kubectl alone (docs/teams.md)."""
    namespace, name = QUEUE_VIEW_IN_TENANT.split("/")
    shown = kubectl(lab, team, "get", "configmap", name, "-n", namespace, "-o", "jsonpath={.data.summary}")
    return shown.stdout if shown.returncode == 0 else ""


def _syncer_may(lab: Lab, team: str, verb: str, namespace: str = "") -> bool:
    """The host API server's own answer for the team's syncer (its ServiceAccount vc-<team>)."""
    attributes = {"verb": verb, "resource": "configmaps", "namespace": namespace}
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": f"system:serviceaccount:vcluster-{team}:vc-{team}", "resourceAttributes": attributes},
    }
    answer = lab.admin.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    return bool(answer["status"].get("allowed"))


def test_a_member_reads_the_teams_queue_inside_its_vcluster_kept_current_and_unchangeable(lab: Lab) -> None:
    """The gang controller's view, copied in by the real syncer: the queue's figures as the stack sets them, KAI's
    use once KAI's queue controller writes it (the lab runs no KAI: the test writes the status as it does), a
    member's edit undone, and no syncer able to read another team's ConfigMaps for it."""
    gpu = next(q for q in parse_stack_config(dev_settings()).queues if q.name == "team-nlp").resources.gpu
    # Until the controller's first resync after the stack's queues exist (every 30 s), the view says there is none.
    header = "Your queue team-nlp, in GPUs:\n"
    text = eventually(lambda: (view := _queue_view(lab, "team-nlp")) and view.startswith(header) and view, within=120)
    assert f"  guaranteed (quota)   {gpu.quota:g}" in text.splitlines()
    assert "Its parent ml-org, in GPUs:" in text.splitlines()
    assert "fair share now       unknown (KAI's scheduler did not answer" in text, "the lab runs no KAI scheduler"
    assert _queue_view(lab, "team-vision").startswith("Your queue team-vision, in GPUs:")

    queue = lab.admin.get("scheduling.run.ai/v2", "Queue", "team-nlp")
    lab.admin.patch(queue, {"status": {"allocated": {"nvidia.com/gpu": "750m"}}}, subresource="status")
    eventually(lambda: "  in use               0.75 (non-preemptible 0)" in _queue_view(lab, "team-nlp"), within=120)

    namespace, name = QUEUE_VIEW_IN_TENANT.split("/")
    edit = json.dumps({"data": {"summary": "Your queue team-nlp: unlimited"}})
    edited = kubectl(lab, "team-nlp", "patch", "configmap", name, "-n", namespace, "--type=merge", "-p", edit)
    assert edited.returncode == 0, edited.stderr
    eventually(lambda: _queue_view(lab, "team-nlp").startswith("Your queue team-nlp, in GPUs:"), within=60)

    assert _syncer_may(lab, "team-nlp", "list", "vcluster-team-nlp"), "its own namespace, through the chart's Role"
    for verb, where in (("list", ""), ("watch", ""), ("list", "vcluster-team-vision"), ("get", "vcluster-team-vision")):
        assert not _syncer_may(lab, "team-nlp", verb, where), (verb, where or "every namespace")


def _inside(run: ProgramRun, team: str) -> dict[str, Json]:
    """What the program registers through the team's own API server (its vCluster provider), by resource name."""
    provider = f"::{team}-vcluster::"
    return {
        r.name: obj
        for r in run.registrations
        if r.provider and provider in r.provider and (obj := manifest(r)) is not None
    }


def _with_members(members: list[str]) -> ProgramRun:
    config = dev_settings()
    config["tenants"][0]["members"] = members
    return run_main(config)


def _members_inside(run: ProgramRun, team: str) -> tuple[Registration, dict[str, Json]]:
    """The team's release of its members' accounts, and its token Secrets by member."""
    provider = f"::{team}-vcluster::"
    inside = [r for r in run.registrations if r.provider and provider in r.provider]
    (release,) = (r for r in inside if r.type == RELEASE)
    tokens = {
        obj["metadata"]["annotations"][SERVICE_ACCOUNT_ANNOTATION]: obj
        for r in inside
        if r.type != RELEASE and (obj := manifest(r)) is not None
    }
    assert len(tokens) == len(inside) - 1, "inside the vCluster: the release and a token Secret per member"
    return release, tokens


def _member_kubectl(lab: Lab, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(lab.kubectl()), f"--kubeconfig={kubeconfig}", "--request-timeout=20s", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def _install_inside(lab: Lab, team: str, release: Registration, folder: Path) -> None:
    """The release as pulumi-kubernetes installs it (Helm's client-side apply, waiting), with the real Helm, the
    chart from where the program names it, and the team's kubeconfig."""
    helm = helm_path()
    assert helm is not None, "no Helm: venv/bin/python -m harness.tools install-helm"
    values = folder / "values.json"
    values.write_text(json.dumps(release.inputs["values"]))
    inputs = release.inputs
    installed = subprocess.run(
        [
            str(helm),
            "upgrade",
            "--install",
            inputs["name"],
            str(ROOT / inputs["chart"]),
            "--namespace",
            inputs["namespace"],
            "--kubeconfig",
            str(lab.state / "tenants" / team / "kubeconfig"),
            "--values",
            str(values),
            "--history-max",
            str(int(inputs["maxHistory"])),
            "--server-side=false",
            "--wait=legacy",
            "--timeout=60s",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr


def _apply_inside(lab: Lab, team: str, obj: Json) -> None:
    """Server-side, as pulumi-kubernetes applies."""
    applied = kubectl(
        lab, team, "apply", "--server-side", "--field-manager=pulumi-kubernetes", "-f", "-", stdin=json.dumps(obj)
    )
    assert applied.returncode == 0, applied.stderr


def _token_data(lab: Lab, team: str, secret: Json) -> Json | None:
    """The token Secret's data once the vCluster's token controller has filled it (pulumi-kubernetes waits so)."""
    meta = secret["metadata"]
    shown = kubectl(lab, team, "get", "secret", meta["name"], "-n", meta["namespace"], "-o", "json")
    data: Json | None = json.loads(shown.stdout or "{}").get("data")
    return data


def _username(lab: Lab, kubeconfig: Path) -> str:
    return _member_kubectl(lab, kubeconfig, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}").stdout


def test_each_member_acts_as_themselves_and_a_removed_members_credential_is_refused(lab: Lab, tmp_path: Path) -> None:
    """Inside team-nlp's real vCluster: the team's release of its members' accounts, installed by the real Helm
    from the program's chart with the team's kubeconfig; each token Secret applied after it as the engine applies
    it; each member's kubeconfig made from their token as the program makes it. Then alice leaves the stack: Helm
    upgrades the release without her account, and the engine deletes her token Secret."""
    release, tokens = _members_inside(_with_members(["alice", "bob"]), "team-nlp")
    after, kept = _members_inside(_with_members(["bob"]), "team-nlp")
    assert sorted(kept) == ["bob"]
    _install_inside(lab, "team-nlp", release, tmp_path)
    for token in tokens.values():
        _apply_inside(lab, "team-nlp", token)
    team = (lab.state / "tenants" / "team-nlp" / "kubeconfig").read_text()
    configs = {}
    for member in ("alice", "bob"):
        data = eventually(functools.partial(_token_data, lab, "team-nlp", tokens[member]))
        configs[member] = tmp_path / member
        configs[member].write_text(member_kubeconfig(f"team-nlp-{member}", team, member_token(data)))
        assert _username(lab, configs[member]) == member_user(member)
        assert _member_kubectl(lab, configs[member], "auth", "can-i", "*", "*").stdout.strip() == "yes"

    _install_inside(lab, "team-nlp", after, tmp_path)
    meta = tokens["alice"]["metadata"]
    # The token controller may have deleted it with its ServiceAccount already; the engine's delete is then done.
    removed = kubectl(lab, "team-nlp", "delete", "secret", meta["name"], "-n", meta["namespace"], "--ignore-not-found")
    assert removed.returncode == 0, removed.stderr

    # The API server keeps a token it accepted for 10 s (members.py): refused within that, not at once.
    def refused() -> bool:
        answer = _member_kubectl(lab, configs["alice"], "get", "namespaces")
        return answer.returncode != 0 and ("Unauthorized" in answer.stderr or "must be logged in" in answer.stderr)

    eventually(refused, within=30)
    assert _username(lab, configs["bob"]) == member_user("bob")
    assert kubectl(lab, "team-nlp", "auth", "can-i", "*", "*").stdout.strip() == "yes", "the team kubeconfig stays"


def _signed_in(lab: Lab, provider: IdentityProvider, team: str, token: str, folder: Path) -> Path:
    """The team's sign-in kubeconfig as the program writes it (its cluster: endpoint and CA), with the ID token
    kubelogin would hand kubectl in place of the exec plugin, which needs a browser."""
    oidc = OidcConfig.model_validate(_oidc(provider))
    team_kubeconfig = (lab.state / "tenants" / team / "kubeconfig").read_text()
    document = yaml.safe_load(sign_in_kubeconfig(f"{team}-oidc", oidc, team_kubeconfig))
    assert document["users"][0]["user"]["exec"]["args"][:2] == ["oidc-login", "get-token"]
    document["users"][0]["user"] = {"token": token}
    path = folder / f"{team}-{hashlib.sha256(token.encode()).hexdigest()[:12]}"
    path.write_text(yaml.safe_dump(document))
    return path


def _who(lab: Lab, kubeconfig: Path) -> Json:
    shown = _member_kubectl(lab, kubeconfig, "auth", "whoami", "-o", "json")
    return json.loads(shown.stdout)["status"]["userInfo"] if shown.returncode == 0 else {"refused": shown.stderr}


def test_a_member_signs_in_through_the_identity_provider_as_themselves_and_only_their_groups_team_admits_them(
    lab: Lab, identity_provider: IdentityProvider, tmp_path: Path
) -> None:
    """The real kube-apiserver inside each real vCluster checks the provider's ID tokens (vcluster.oidc, with the
    provider's CA mounted from the host): a member of team-nlp's group is cluster-admin there as
    oidc:<email>, and nowhere else; a token the provider did not sign, for another client, or expired, is
    refused; a groups claim cannot name a Kubernetes group."""
    provider = identity_provider
    # What the program registers inside team-nlp's vCluster, applied as the engine applies it (the lab's apply
    # leaves what goes through a tenant's own API to the engine: SKIPPED).
    config = dev_settings()
    config["vcluster"] = {**config.get("vcluster", {}), "oidc": _oidc(provider)}
    config["tenants"][0]["groups"] = [NLP_GROUP]
    inside = _inside(run_main(config), "team-nlp")
    assert sorted(inside) == ["team-nlp-oidc-groups"]
    _apply_inside(lab, "team-nlp", inside["team-nlp-oidc-groups"])

    def member(email: str, groups: list[str], **claims: Any) -> str:
        return provider.token(OIDC_CLIENT, sub=email, email=email, email_verified=True, groups=groups, **claims)

    alice = _signed_in(lab, provider, "team-nlp", member("alice@example.com", [NLP_GROUP, "staff"]), tmp_path)
    assert {k: v for k, v in _who(lab, alice).items() if k in ("username", "groups")} == {
        "username": "oidc:alice@example.com",
        "groups": ["oidc:ml-nlp", "oidc:staff", "system:authenticated"],
    }
    assert _member_kubectl(lab, alice, "auth", "can-i", "*", "*").stdout.strip() == "yes"
    in_vision = _signed_in(lab, provider, "team-vision", member("alice@example.com", [NLP_GROUP]), tmp_path)
    assert _who(lab, in_vision)["username"] == "oidc:alice@example.com", "every tenant trusts the provider"
    assert _member_kubectl(lab, in_vision, "auth", "can-i", "get", "pods").stdout.strip() == "no", "not her team"

    masters = _signed_in(lab, provider, "team-nlp", member("mallory@example.com", ["system:masters"]), tmp_path)
    assert _who(lab, masters)["groups"] == ["oidc:system:masters", "system:authenticated"]
    assert _member_kubectl(lab, masters, "auth", "can-i", "get", "pods").stdout.strip() == "no"

    refused = {
        "signed with another key": member("alice@example.com", [NLP_GROUP], key=new_key()),
        "for another client": provider.token("another-client", email="alice@example.com", groups=[NLP_GROUP]),
        "expired": member("alice@example.com", [NLP_GROUP], lifetime=-60),
        "unverified email": provider.token(OIDC_CLIENT, email="alice@example.com", email_verified=False),
    }
    for why, token in refused.items():
        answer = _member_kubectl(lab, _signed_in(lab, provider, "team-nlp", token, tmp_path), "get", "namespaces")
        assert answer.returncode != 0, why
        assert "Unauthorized" in answer.stderr, (why, answer.stderr)
    assert kubectl(lab, "team-nlp", "auth", "can-i", "*", "*").stdout.strip() == "yes", "the team kubeconfig stays"


def _resize(lab: Lab, team: str, name: str, resources: Json) -> subprocess.CompletedProcess[str]:
    patch = {"spec": {"containers": [{"name": "main", "resources": resources}]}}
    return kubectl(lab, team, "patch", "pod", name, "--subresource=resize", "-p", json.dumps(patch))


def _host_limits(lab: Lab, team: str, name: str) -> Json:
    host = host_pod(lab, team, name)
    assert host is not None
    limits: Json = host["spec"]["containers"][0]["resources"]["limits"]
    return limits


@pytest.mark.usefixtures("team_nlp_pods_go")
def test_a_pod_resized_inside_a_tenant_takes_no_gpu_and_nothing_past_the_hosts_quota(lab: Lab) -> None:
    """The real syncer resizes a host pod whose resources its tenant's pod changed (the `resize` subresource), so
    a resize is a path to the host. Kubernetes resizes only CPU and memory (ValidatePodResize, kubernetes
    pkg/apis/core/validation/validation.go @v1.36.3), and the host's ResourceQuota holds the rest."""
    pod = team_pod("resized")
    pod["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1", "memory": "1Gi"},
        "limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
    }
    apply(lab, "team-nlp", pod)
    eventually(lambda: host_pod(lab, "team-nlp", "resized"))
    more_gpus = _resize(
        lab, "team-nlp", "resized", {"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "2"}}
    )
    assert more_gpus.returncode != 0
    assert "only cpu and memory resources are mutable" in more_gpus.stderr, more_gpus.stderr
    past_quota = _resize(lab, "team-nlp", "resized", {"limits": {"cpu": "64"}, "requests": {"cpu": "64"}})
    # The tenant's own API server holds no quota of the host's and takes it; the host's quota refuses the syncer's
    # resize, and the team is told so.
    assert past_quota.returncode == 0, past_quota.stderr
    errors = eventually(lambda: [e for e in sync_errors(lab, "team-nlp", "resized") if "exceeded quota" in e])
    assert "limits.cpu" in errors[0], errors
    limits = _host_limits(lab, "team-nlp", "resized")
    assert (limits["cpu"], limits["nvidia.com/gpu"]) == ("1", "1"), limits


# A team's first day: every manifest of docs/teams.md, applied inside a tenant as the page gives it, followed to
# the host. Jobs, Pods and Deployments become pods through the tenant's own controller manager (real); a PyTorchJob
# and a RayCluster through the real training operator and KubeRay, installed in the tenant and run by the lab
# (harness/lab/operators.py); a JobSet and a LeaderWorkerSet become the pods their operators would make
# (tests/workload_operators.py, read in each operator's source): both operators need their own admission webhooks
# (LWS labels each pod in one), which the tenant's API server would call through a Service whose pod nothing binds
# here. KAI cannot be built (docs/lab.md): its webhook is the stand-in served to the API server
# (tests/kai_webhook.py), its pod-grouper the model (tests/kai_podgrouper.py), applied to what the real syncer and
# fence left on the host; nothing binds a pod.
FIRST_DAY = "team-vision"
PAGE = page_manifests()
BUILT_IN = {"Job", "Pod", "Deployment"}
RUN_BY_AN_OPERATOR = frozenset().union(*(operator.kinds for operator in OPERATORS))


@pytest.fixture(scope="module")
def first_day(lab: Lab, kai_webhook: None) -> Iterator[Lab]:
    """KAI's webhook (its stand-in) serves FIRST_DAY's host namespace, as KAI's own serves every namespace, and the
    team has installed the training operator and KubeRay (the lab's command line runs each until Ctrl-C)."""
    metadata = {"name": f"vcluster-{FIRST_DAY}", "labels": {KAI_SERVING_LABEL: "serving"}}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}
    lab.admin.apply(namespace, manager="lab-kai-webhook")
    running = [_run_operator(lab, operator) for operator in OPERATORS]
    yield lab
    for command in running:
        command.send_signal(signal.SIGINT)
        assert command.wait(timeout=30) == 0
    # Each operator dies with the command that ran it.
    assert not [o.binary for o in OPERATORS if subprocess.run(["pgrep", "-x", o.binary], check=False).returncode == 0]


def _run_operator(lab: Lab, operator: Operator) -> subprocess.Popen[str]:
    arguments = ["operator", operator.name, "--tenant", FIRST_DAY, "--state", str(lab.state)]
    command = subprocess.Popen(
        [sys.executable, "-m", "harness.lab", *arguments], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert command.stdout is not None
    line = command.stdout.readline()
    assert f"{operator.name} {operator.version} runs for {FIRST_DAY}" in line, line
    return command


def _expected_pods(manifest: Json) -> int:
    kind, spec = manifest["kind"], manifest.get("spec") or {}
    if kind == "Job":
        return int(spec.get("parallelism", 1))
    if kind == "Deployment":
        return int(spec.get("replicas", 1))
    return 1 if kind == "Pod" else len(pods_of(manifest))


def _host_pods_of(lab: Lab, name: str) -> list[Json]:
    """The host's pods of a workload named `name` in FIRST_DAY's default namespace (the syncer names a pod
    <name>-x-<namespace>-x-<vcluster>; no name on the page is the start of another's)."""
    suffix = f"-x-default-x-{FIRST_DAY}"
    listed = lab.admin.list("v1", "Pod", f"vcluster-{FIRST_DAY}")
    return [
        p
        for p in listed
        if p["metadata"]["name"].endswith(suffix)
        and (p["metadata"]["name"] == name + suffix or p["metadata"]["name"].startswith(f"{name}-"))
    ]


def _team_objects(manifest: Json) -> list[Json]:
    """What reaches the tenant's API: the manifest itself, or the pods its operator would make of it."""
    if manifest["kind"] in BUILT_IN | RUN_BY_AN_OPERATOR:
        return [manifest]
    return [{"apiVersion": "v1", "kind": "Pod", **pod} for pod in pods_of(manifest)]


@pytest.mark.parametrize("key", PAGE)
def test_each_manifest_of_the_teams_page_reaches_the_host_in_the_teams_queue(first_day: Lab, key: str) -> None:
    manifest = PAGE[key]
    name = manifest["metadata"]["name"]
    objects = _team_objects(manifest)
    for obj in objects:
        apply(first_day, FIRST_DAY, obj)
    try:
        expected = _expected_pods(manifest)
        pods = eventually(lambda: len(_host_pods_of(first_day, name)) == expected and _host_pods_of(first_day, name))
        errors = [e for pod in pods for e in sync_errors(first_day, FIRST_DAY, pod["metadata"]["name"].split("-x-")[0])]
        assert not [e for e in errors if "the object has been modified" not in e]
        for pod in pods:
            assert pod["metadata"]["labels"]["kai.scheduler/queue"] == FIRST_DAY
            assert pod["spec"]["schedulerName"] == "kai-scheduler"
        gang = "gpu-tenancy/gang-size" in json.dumps(manifest) or manifest["kind"] == "LeaderWorkerSet"
        if gang:
            # The gang controller's PodGroup: the whole gang, in the team's queue, at its chosen priority.
            (group_name,) = {p["metadata"]["annotations"]["pod-group-name"] for p in pods}
            assert group_name.startswith(f"{FIRST_DAY}.default.")
            where = f"vcluster-{FIRST_DAY}"
            group = eventually(
                lambda: first_day.admin.find("scheduling.run.ai/v2alpha2", "PodGroup", group_name, where)
            )
            chosen = {p["metadata"]["labels"].get("priorityClassName", "train") for p in pods}
            assert group["spec"]["minMember"] == expected
            assert (group["spec"]["queue"], {group["spec"]["priorityClassName"]}) == (FIRST_DAY, chosen)
        else:
            # KAI's pod-grouper (its model) on the real host pod: one PodGroup per pod, in the team's queue.
            for pod in pods:
                grouped = pod_group(pod)
                assert grouped is not None
                assert grouped.queue == FIRST_DAY
                serving = pod["metadata"]["labels"].get("priorityClassName") == "inference"
                assert grouped.preemptible is not serving, "serving comes out non-preemptible, the rest not"
        for pod in pods:
            if {"gpu-fraction", "gpu-memory"} & set(pod["metadata"].get("annotations") or {}):
                # Admitted, and mutated by KAI's webhook: the device and its share come from KAI's ConfigMaps.
                (container,) = pod["spec"]["containers"]
                devices = next(e for e in container["env"] if e["name"] == "NVIDIA_VISIBLE_DEVICES")
                assert "configMapKeyRef" in devices["valueFrom"]
                assert pod["spec"]["runtimeClassName"] == "nvidia"
        # The team sees its pods back, as many as the host holds.
        listed = json.loads(kubectl(first_day, FIRST_DAY, "get", "pods", "-o", "json").stdout)["items"]
        assert len([p for p in listed if p["metadata"]["name"].startswith(name)]) == expected
    finally:
        for obj in objects:
            kubectl(first_day, FIRST_DAY, "delete", "--wait=true", "--timeout=60s", "-f", "-", stdin=json.dumps(obj))
        eventually(lambda: not _host_pods_of(first_day, name), within=90)


def _gang_view(pod: Json, keys: set[str]) -> Json:
    metadata = pod["metadata"]
    return {key: {**(metadata.get("labels") or {}), **(metadata.get("annotations") or {})}.get(key) for key in keys}


@pytest.mark.parametrize("key", [key for key in PAGE if PAGE[key]["kind"] in RUN_BY_AN_OPERATOR])
def test_the_model_of_an_operator_makes_the_pods_the_real_operator_makes(first_day: Lab, key: str) -> None:
    """tests/workload_operators.py serves the fence's and the gangs' unit tests; here it meets the real operator on
    every label and annotation it models, pod for pod."""
    manifest = PAGE[key]
    name = manifest["metadata"]["name"]
    modelled = pods_of(manifest)
    keys = {k for pod in modelled for part in ("labels", "annotations") for k in pod["metadata"].get(part) or {}}
    apply(first_day, FIRST_DAY, manifest)
    try:

        def made() -> list[Json]:
            listed = json.loads(kubectl(first_day, FIRST_DAY, "get", "pods", "-o", "json").stdout)["items"]
            mine = [p for p in listed if name in {(p["metadata"].get("labels") or {}).get(k) for k in GANG_KEY_LABELS}]
            return mine if len(mine) >= len(modelled) else []

        real = eventually(made)

        def ordered(pods: list[Json]) -> list[Json]:
            return sorted((_gang_view(pod, keys) for pod in pods), key=lambda view: json.dumps(view, sort_keys=True))

        assert ordered(real) == ordered(modelled)
    finally:
        kubectl(first_day, FIRST_DAY, "delete", "--wait=true", "--timeout=60s", "-f", "-", stdin=json.dumps(manifest))
        eventually(lambda: not _host_pods_of(first_day, name), within=90)


UPGRADED = "team-recommender"


def test_a_tenant_upgraded_to_the_next_vcluster_keeps_its_workloads_and_its_kubeconfig(
    lab: Lab, tmp_path: Path
) -> None:
    """docs/operations.md "Upgrading a component": `tenants[].vclusterVersion` for one team, then `pulumi up`. The
    lab builds the next minor's real vcluster (harness/lab/build.py VCLUSTER_VERSIONS); the team's control plane
    restarts on it over the same data. Last in this module: it changes the tenant the others use."""
    before = {t.name: t for t in tenants(lab.admin, lab.state)}[UPGRADED]
    assert before.version == "0.35.1"
    assert before.kubeconfig is not None
    kubeconfig = before.kubeconfig.read_text()
    apply(lab, UPGRADED, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "notes"}, "data": {"a": "b"}})
    pod = team_pod("stays")
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    apply(lab, UPGRADED, pod)
    running = eventually(lambda: (host_pod(lab, UPGRADED, "stays") or {}).get("status", {}).get("phase"))
    host_uid = host_pod(lab, UPGRADED, "stays")["metadata"]["uid"]  # type: ignore[index]

    stack = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    team = next(t for t in stack["config"]["gpu-tenancy:tenants"] if t["name"] == UPGRADED)
    team["vclusterVersion"] = "0.36.1"
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack))
    assert apply_stack(str(tmp_path / "Pulumi.dev.yaml"), lab.state) == 0

    after = {t.name: t for t in tenants(lab.admin, lab.state)}
    assert after[UPGRADED].version == "0.36.1"
    assert {name: t.version for name, t in after.items() if name != UPGRADED} == dict.fromkeys(
        set(TEAMS) - {UPGRADED}, "0.35.1"
    ), "the other teams stay where they were"
    control_plane = lab.admin.find("v1", "Pod", f"{UPGRADED}-0", f"vcluster-{UPGRADED}")
    assert control_plane is not None
    assert control_plane["spec"]["containers"][0]["image"].endswith(":0.36.1")
    eventually(lambda: all(t.ready for t in tenants(lab.admin, lab.state)), within=180)
    # The kubeconfig the team was given before the upgrade still works, as the team gave it out.
    (tmp_path / "kubeconfig").write_text(kubeconfig)
    (tmp_path / "kubeconfig").chmod(0o600)
    command = [str(lab.kubectl()), f"--kubeconfig={tmp_path / 'kubeconfig'}", "--request-timeout=20s"]

    def notes() -> str | None:
        done = subprocess.run(
            [*command, "get", "configmap", "notes", "-o", "json"], capture_output=True, text=True, check=False
        )
        return done.stdout if done.returncode == 0 else None

    assert json.loads(eventually(notes, within=120))["data"] == {"a": "b"}
    # The team's pod stays through the upgrade: the same host pod, in the same phase (Pending: nothing binds here).
    kept = host_pod(lab, UPGRADED, "stays")
    assert kept is not None
    assert kept["metadata"]["uid"] == host_uid
    assert kept["status"]["phase"] == running
    listed = kubectl(lab, UPGRADED, "get", "pod", "stays", "-o", "json")
    assert json.loads(listed.stdout)["status"]["phase"] == running, listed.stderr
    # And the upgraded syncer still syncs through the fence: a new pod arrives pinned to the team's queue.
    apply(lab, UPGRADED, team_pod("after-upgrade", labels={"kai.scheduler/queue": "team-nlp"}))
    arrived = eventually(lambda: host_pod(lab, UPGRADED, "after-upgrade"), within=120)
    assert arrived["metadata"]["labels"]["kai.scheduler/queue"] == UPGRADED

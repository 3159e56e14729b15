"""The real vCluster in the lab: a team's `kubectl apply` inside its tenant, followed to the host.

The dev stack is applied to a lab of this module's own (harness.lab apply); each tenant's
control plane is the chart's StatefulSet pod, run by the lab's kubelet as processes (the
open-source vcluster 0.35.1, kine and the lab's 1.36 binaries, built from the Go module proxy).
A team uses the kubeconfig its vCluster wrote, through the node port the stack exposes. What
the host receives is what the real syncer writes, through the program's real admission
policies; what the team sees back is what the syncer tells it.
"""

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

from components.vcluster_tenant.members import member_kubeconfig, member_user
from components.vcluster_tenant.oidc import sign_in_kubeconfig
from config.names import QUEUE_VIEW_IN_TENANT
from config.stack import parse_stack_config
from config.upstream import GANG_KEY_LABELS
from config.vcluster_tenant.oidc import OidcConfig
from harness import ROOT, ProgramRun, dev_settings, run_main
from harness.lab.apply import apply_stack, manifest
from harness.lab.cluster import read_lab
from harness.lab.operators import OPERATORS, Operator
from harness.lab.tenants import tenants
from tests.kai_podgrouper import pod_group
from tests.kai_webhook import KAI_SERVING_LABEL
from tests.lab import Lab, lab_command, private_lab, serve_kai_webhook
from tests.lab import kubectl as host_kubectl
from tests.oidc_provider import IdentityProvider, new_key
from tests.teams_page import page_manifests
from tests.vcluster_syncer import TOKEN_ANNOTATION, to_host
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


REFUSED: dict[str, tuple[Json, str]] = {
    # name: (the team's pod, what the team is told)
    "holds-a-gpu-for-a-year": (team_pod("holds", terminationGracePeriodSeconds=31536000), "terminationGrace"),
    "carries-kais-bookkeeping": (
        team_pod("books", annotations={"pod-group-name": "pg-someone-elses"}),
        "pod-group-name",
    ),
    "piles-up-annotations": (team_pod("piles", annotations={"notes": "n" * 40000}), "annotations hold"),
}


def _container(**fields: Any) -> list[Json]:
    return [{"name": "main", "image": CUDA, "command": ["sleep", "infinity"], **fields}]


REFUSED.update(
    {
        # The suite's other attack tables, replayed from inside (tests/test_tenant_admission.py ATTACKS,
        # tests/test_kai_bookkeeping.py ROUND_THREE and SIZES).
        "visible-devices-all": (
            team_pod("visible", containers=_container(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])),
            "NVIDIA_VISIBLE_DEVICES may only be",
        ),
        "cdi-annotation": (team_pod("cdi", annotations={"cdi.k8s.io/gpu": "nvidia.com/gpu=all"}), "CDI device"),
        "trains-in-an-init-container": (
            team_pod(
                "init-gpu",
                initContainers=[{"name": "warm-up", "image": CUDA, "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            ),
            "init containers",
        ),
        "poses-as-part-of-the-platform": (
            team_pod("platform", labels={"app.kubernetes.io/part-of": "gpu-tenancy"}),
            "mark the platform's own objects",
        ),
        "writes-the-platforms-annotation": (
            team_pod("empty-mark", annotations={"gpu-tenancy/gang-empty": "true"}),
            "gpu-tenancy/* are the platform's own",
        ),
        # kubectl's client-side apply copies the whole manifest into an annotation, so its env counts there first
        # (the API server gives the first refusal); a server-side apply adds none.
        "carries-a-dataset-in-env": (
            team_pod("dataset", containers=_container(env=[{"name": "DATA", "value": "d" * 70000}])),
            "annotations hold",
        ),
        "carries-a-dataset-in-env-applied-server-side": (
            team_pod("dataset-ssa", containers=_container(env=[{"name": "DATA", "value": "d" * 70000}])),
            "command, args and env",
        ),
        "counts-characters-not-bytes": (team_pod("euro", annotations={"notes": "€" * 11000}), "annotations hold"),
        "cuda-image-under-the-nvidia-runtime": (
            team_pod("runtime", runtimeClassName="nvidia"),
            "runtimeClassName nvidia",
        ),
        "visible-devices-in-an-init-container": (
            team_pod(
                "init-visible",
                initContainers=[
                    {"name": "init", "image": CUDA, "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "GPU-0"}]}
                ],
            ),
            "NVIDIA_VISIBLE_DEVICES may only be",
        ),
        # The team names its own ConfigMap; the syncer rewrites the reference to the host's copy.
        "visible-devices-from-a-teams-configmap": (
            team_pod(
                "configmap-visible",
                containers=_container(
                    env=[
                        {
                            "name": "NVIDIA_VISIBLE_DEVICES",
                            "valueFrom": {"configMapKeyRef": {"name": "gpus", "key": "all", "optional": True}},
                        }
                    ]
                ),
            ),
            "NVIDIA_VISIBLE_DEVICES may only be",
        ),
        "trains-in-a-native-sidecar": (
            team_pod(
                "sidecar-gpu",
                initContainers=[
                    {
                        "name": "trainer",
                        "image": CUDA,
                        "restartPolicy": "Always",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    }
                ],
            ),
            "init containers",
        ),
        "labels-its-group-as-the-controllers": (
            team_pod("controllers", labels={"app.kubernetes.io/managed-by": "gpu-tenancy-gang-controller"}),
            "mark the platform's own objects",
        ),
        "claims-another-teams-gang": (
            team_pod("other-gang", labels={"gpu-tenancy/gang-of": "team-vision"}),
            "gpu-tenancy/* are the platform's own",
        ),
    }
)


FIRST: dict[str, list[Json]] = {
    # The tenant's own API server refuses a pod of a RuntimeClass it does not hold (the RuntimeClass admission
    # plugin), and the syncer brings none from the host; its cluster-admin makes one of that name first.
    "cuda-image-under-the-nvidia-runtime": [
        {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"}, "handler": "nvidia"}
    ],
}
"""What a team writes in its own cluster before the attack."""


@pytest.mark.parametrize("name", REFUSED)
@pytest.mark.usefixtures("team_nlp_pods_go")
def test_a_pod_the_fence_refuses_never_reaches_the_host_and_the_team_is_told_why(lab: Lab, name: str) -> None:
    """Applied with kubectl inside the tenant; the host refuses what the real syncer sends, and the syncer tells
    the team with a SyncError event on its pod."""
    pod, told = REFUSED[name]
    for prepared in FIRST.get(name, []):
        apply(lab, "team-nlp", prepared)
    apply(lab, "team-nlp", pod, server_side=name.endswith("-server-side"))
    pod_name = pod["metadata"]["name"]
    errors = eventually(lambda: sync_errors(lab, "team-nlp", pod_name), within=30)
    assert any(told in error for error in errors), errors
    assert host_pod(lab, "team-nlp", pod_name) is None


ORDINARY = {
    "ddp-worker": team_pod(
        "bert-worker-1",
        labels={"training.kubeflow.org/job-name": "bert", "training.kubeflow.org/replica-type": "worker"},
        containers=_container(
            env=[{"name": "MASTER_ADDR", "value": "bert-master-0"}, {"name": "WORLD_SIZE", "value": "4"}],
            resources={"limits": {"nvidia.com/gpu": "1"}},
        ),
    ),
    "vllm-inference": team_pod(
        "vllm-7d9f8-x2k4p",
        labels={"priorityClassName": "inference", "pod-template-hash": "7d9f8"},
        containers=_container(args=["--model", "Qwen/Qwen3-8B"], resources={"limits": {"nvidia.com/gpu": "1"}}),
    ),
    "ray-head": team_pod("rc-head-abcde", labels={"ray.io/cluster": "rc", "ray.io/node-type": "head"}),
    "checkpoints-within-the-maximum": team_pod("checkpoints", terminationGracePeriodSeconds=300),
    "kubectl-applied-with-its-configuration": team_pod(
        "applied", annotations={"kubectl.kubernetes.io/last-applied-configuration": '{"kind":"Pod"}' * 300}
    ),
}


@pytest.mark.parametrize("name", ORDINARY)
@pytest.mark.usefixtures("team_nlp_pods_go")
def test_ordinary_workloads_reach_the_host_through_the_real_syncer(lab: Lab, name: str) -> None:
    pod = ORDINARY[name]
    apply(lab, "team-nlp", pod)
    pod_name = pod["metadata"]["name"]
    host = eventually(lambda: host_pod(lab, "team-nlp", pod_name), within=30)
    assert host["metadata"]["labels"]["kai.scheduler/queue"] == "team-nlp"
    # A write that lost a race with another is retried (optimistic concurrency); any other error is a failure.
    assert not [e for e in sync_errors(lab, "team-nlp", pod_name) if "the object has been modified" not in e]


@pytest.mark.usefixtures("team_nlp_pods_go")
def test_a_pod_that_names_a_system_priority_class_gets_none_on_the_host(lab: Lab) -> None:
    """The virtual cluster has system-node-critical too; with no PriorityClass sync the syncer drops the field
    (pods/translate/translator.go @v0.35.1), and the pod runs at KAI's class from its label."""
    apply(lab, "team-nlp", team_pod("outranks", priorityClassName="system-node-critical"))
    host = eventually(lambda: host_pod(lab, "team-nlp", "outranks"))
    assert not host["spec"].get("priorityClassName")
    assert not host["spec"].get("priority")


MODELLED = {
    "plain": team_pod("plain-model"),
    "labelled": team_pod("labelled-model", labels={"training.kubeflow.org/job-name": "bert", "release": "r1"}),
    "annotated": team_pod("annotated-model", annotations={"prometheus.io/scrape": "true", "note": "x"}),
}
MUTATED = {"kai.scheduler/queue"}
"""What the fence's pinning policy sets on the host pod; the syncer brings it back into the team's pod."""
ADDED_BY_THE_HOST = {"kubernetes.io/limit-ranger"}
"""What the host's admission adds (its LimitRanger, for the tenant's LimitRange), not the syncer."""


@pytest.mark.parametrize("name", MODELLED)
@pytest.mark.usefixtures("team_nlp_pods_go")
def test_the_model_of_the_syncer_writes_what_the_real_one_writes(lab: Lab, name: str) -> None:
    """tests/vcluster_syncer.py, which the admission tests use, against the real syncer: every label and annotation
    it predicts is there with its value (the token: its prefix and size), and the host adds only its LimitRanger's."""
    pod = MODELLED[name]
    apply(lab, "team-nlp", pod)
    real = eventually(lambda: host_pod(lab, "team-nlp", pod["metadata"]["name"]))
    read = json.loads(kubectl(lab, "team-nlp", "get", "pod", pod["metadata"]["name"], "-o", "json").stdout)
    keep = ("name", "namespace", "uid", "labels", "annotations", "ownerReferences")
    virtual = {"metadata": {k: v for k, v in read["metadata"].items() if k in keep}, "spec": read["spec"]}
    # What the host added comes back into the team's pod; it is not the team's.
    for key in ADDED_BY_THE_HOST:
        virtual["metadata"].get("annotations", {}).pop(key, None)
    for key in MUTATED:
        virtual["metadata"].get("labels", {}).pop(key, None)
    model = to_host(virtual, vcluster="team-nlp", namespace_labels=virtual_namespace_labels(lab, "team-nlp"))
    mutated = MUTATED
    real_labels = real["metadata"]["labels"]
    for key, value in model["metadata"]["labels"].items():
        if key not in mutated:
            assert real_labels.get(key) == value, (key, value, real_labels)
    assert set(real_labels) - set(model["metadata"]["labels"]) <= mutated
    real_annotations = real["metadata"]["annotations"]
    for key, value in model["metadata"]["annotations"].items():
        if key.startswith(TOKEN_ANNOTATION):
            (token,) = [v for k, v in real_annotations.items() if k.startswith(TOKEN_ANNOTATION)]
            assert abs(len(token) - len(value)) < 200, len(token)
        elif key == LABELS_ANNOTATION:
            # The syncer rewrites it once the pinning has come back into the team's pod, whenever that is.
            assert _team_labels(real_annotations[key]) == _team_labels(value), (real_annotations[key], value)
        else:
            assert real_annotations.get(key) == value, (key, value, real_annotations.get(key))
    extra = {k for k in real_annotations if k not in model["metadata"]["annotations"]}
    assert {k for k in extra if not k.startswith(TOKEN_ANNOTATION)} <= ADDED_BY_THE_HOST


LABELS_ANNOTATION = "vcluster.loft.sh/labels"


def _team_labels(annotation: str) -> set[str]:
    return {line for line in annotation.splitlines() if line.split("=", 1)[0] not in MUTATED}


def virtual_namespace_labels(lab: Lab, team: str) -> Json:
    listed = kubectl(lab, team, "get", "namespace", "default", "-o", "json")
    labels: Json = json.loads(listed.stdout)["metadata"]["labels"]
    return labels


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


def _member_kubectl(lab: Lab, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(lab.kubectl()), f"--kubeconfig={kubeconfig}", "--request-timeout=20s", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def _apply_inside(lab: Lab, team: str, objects: list[Json]) -> None:
    """Server-side, as pulumi-kubernetes applies: namespaces first, then accounts, then the rest."""
    first = {"Namespace": 0, "ServiceAccount": 1}
    for obj in sorted(objects, key=lambda o: first.get(o["kind"], 2)):
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
    """Inside team-nlp's real vCluster: what the program registers for alice and bob, applied with the team's
    kubeconfig as the engine applies it; each member's kubeconfig made from their token as the program makes it.
    Then alice leaves the stack: the engine deletes what is no longer registered, and updates the rest."""
    before = _inside(_with_members(["alice", "bob"]), "team-nlp")
    after = _inside(_with_members(["bob"]), "team-nlp")
    _apply_inside(lab, "team-nlp", list(before.values()))
    team = (lab.state / "tenants" / "team-nlp" / "kubeconfig").read_text()
    configs = {}
    for member in ("alice", "bob"):
        secret = before[f"team-nlp-member-{member}-token"]
        data = eventually(functools.partial(_token_data, lab, "team-nlp", secret))
        configs[member] = tmp_path / member
        configs[member].write_text(member_kubeconfig(f"team-nlp-{member}", [team, data]))
        assert _username(lab, configs[member]) == member_user(member)
        assert _member_kubectl(lab, configs[member], "auth", "can-i", "*", "*").stdout.strip() == "yes"

    assert sorted(set(before) - set(after)) == ["team-nlp-member-alice", "team-nlp-member-alice-token"]
    # The engine deletes a resource before what it depends on: the token, then its ServiceAccount.
    for name in sorted(set(before) - set(after), reverse=True):
        meta = before[name]["metadata"]
        removed = kubectl(
            lab, "team-nlp", "delete", before[name]["kind"].lower(), meta["name"], "-n", meta["namespace"]
        )
        assert removed.returncode == 0, removed.stderr
    _apply_inside(lab, "team-nlp", list(after.values()))

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
    _apply_inside(lab, "team-nlp", list(inside.values()))

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
def first_day(lab: Lab) -> Iterator[Lab]:
    """KAI's webhook (its stand-in) serves FIRST_DAY's host namespace, as KAI's own serves every namespace, and the
    team has installed the training operator and KubeRay (the lab's command line runs each until Ctrl-C)."""
    serve_kai_webhook(lab.state, lab.admin)
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

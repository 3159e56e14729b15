"""The real vCluster in the lab: a team's `kubectl apply` inside its tenant, followed to the host.

The dev stack is applied to a lab of this module's own (harness.lab apply); each tenant's
control plane is the chart's StatefulSet pod, run by the lab's kubelet as processes (the
open-source vcluster 0.35.1, kine and the lab's 1.36 binaries, built from the Go module proxy).
A team uses the kubeconfig its vCluster wrote, through the node port the stack exposes. What
the host receives is what the real syncer writes, through the program's real admission
policies; what the team sees back is what the syncer tells it.
"""

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.lab.apply import apply_stack
from harness.lab.tenants import tenants
from tests.lab import Lab, private_lab
from tests.vcluster_syncer import TOKEN_ANNOTATION, to_host

Json = dict[str, Any]
TEAMS = ("team-nlp", "team-recommender", "team-vision")
CUDA = "nvcr.io/nvidia/cuda:13.0.1-base-ubuntu24.04"


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    with private_lab("tenants") as lab:
        assert apply_stack("dev", lab.state) == 0
        eventually(lambda: all(t.ready and t.kubeconfig for t in tenants(lab.admin, lab.state)), within=180)
        yield lab


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


def sync_errors(lab: Lab, team: str, name: str) -> list[str]:
    listed = kubectl(lab, team, "get", "events", "-n", "default", "-o", "json")
    events = json.loads(listed.stdout or '{"items": []}')["items"]
    return [
        e["message"]
        for e in events
        if e.get("reason") == "SyncError" and e.get("involvedObject", {}).get("name") == name
    ]


@pytest.mark.parametrize("team", TEAMS)
def test_each_team_reaches_its_own_vcluster_as_cluster_admin(lab: Lab, team: str) -> None:
    version = kubectl(lab, team, "version", "-o", "json")
    assert version.returncode == 0, version.stderr
    assert json.loads(version.stdout)["serverVersion"]["gitVersion"].startswith("v1.36.")
    assert kubectl(lab, team, "auth", "can-i", "*", "*").stdout.strip() == "yes"
    namespaces = kubectl(lab, team, "get", "namespaces", "-o", "name").stdout.split()
    assert "namespace/default" in namespaces
    assert not [n for n in namespaces if n.startswith("namespace/vcluster-")], "no host namespace is visible"


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
    }
)


@pytest.mark.parametrize("name", REFUSED)
def test_a_pod_the_fence_refuses_never_reaches_the_host_and_the_team_is_told_why(lab: Lab, name: str) -> None:
    """Applied with kubectl inside the tenant; the host refuses what the real syncer sends, and the syncer tells
    the team with a SyncError event on its pod."""
    pod, told = REFUSED[name]
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
def test_ordinary_workloads_reach_the_host_through_the_real_syncer(lab: Lab, name: str) -> None:
    pod = ORDINARY[name]
    apply(lab, "team-nlp", pod)
    pod_name = pod["metadata"]["name"]
    host = eventually(lambda: host_pod(lab, "team-nlp", pod_name), within=30)
    assert host["metadata"]["labels"]["kai.scheduler/queue"] == "team-nlp"
    # A write that lost a race with another is retried (optimistic concurrency); any other error is a failure.
    assert not [e for e in sync_errors(lab, "team-nlp", pod_name) if "the object has been modified" not in e]


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

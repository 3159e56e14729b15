"""The pods each workload operator makes from what a team writes: stand-ins for the labels they set.

Only what matters to gangs is modelled: how many pods, with which labels and annotations,
from which template. Each is read in the operator's source (config/upstream.py
GANG_KEY_LABELS cites the files):

- kubeflow/training-operator @v1.9.0, PyTorchJob: the template's labels and annotations, plus
  training.kubeflow.org/job-name, replica-type (lowercase) and replica-index;
- kubernetes-sigs/jobset @v0.12.0: jobset-name, jobset-uid, replicatedjob-name and job-index as
  labels (and annotations), plus the batch Job's own labels;
- kubernetes-sigs/lws @v0.10.0: name, group-index, worker-index and group-key (sha1 of
  <namespace>/<lws>-<group>) labels, and the size annotation;
- ray-project/kuberay @v1.7.0: ray.io/cluster, node-type and group labels;
- kubernetes batch/v1 Job (kubernetes/api @v0.36.3): batch.kubernetes.io/controller-uid and
  job-name labels, added by the API server to the Job's template;
- apps/v1 Deployment: the template's labels plus pod-template-hash.

For a PyTorchJob and a RayCluster the lab runs the real operators (harness/lab/operators.py: the
newest releases the module proxy serves, training-operator v1.8.1 and KubeRay v1.5.0), and
tests/test_lab_tenants.py shows this model equal to them on every label and annotation it sets.
"""

import copy
import hashlib
from typing import Any

Json = dict[str, Any]


def _pod(template: Json, name: str, namespace: str, labels: Json, annotations: Json | None = None) -> Json:
    meta = template.get("metadata") or {}
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**(meta.get("labels") or {}), **labels},
            "annotations": {**(meta.get("annotations") or {}), **(annotations or {})},
        },
        "spec": copy.deepcopy(template["spec"]),
    }


def _ns(manifest: Json) -> str:
    return str(manifest["metadata"].get("namespace", "default"))


def pytorch_job(manifest: Json) -> list[Json]:
    name = manifest["metadata"]["name"]
    pods = []
    for replica_type, replica in manifest["spec"]["pytorchReplicaSpecs"].items():
        for index in range(replica.get("replicas", 1)):
            labels = {
                "training.kubeflow.org/operator-name": "pytorchjob-controller",
                "training.kubeflow.org/job-name": name,
                "training.kubeflow.org/replica-type": replica_type.lower(),
                "training.kubeflow.org/replica-index": str(index),
            }
            pod_name = f"{name}-{replica_type.lower()}-{index}"
            pods.append(_pod(replica["template"], pod_name, _ns(manifest), labels))
    return pods


def batch_job(manifest: Json, uid: str = "8c1d5e0a-7f7a-4b57-9e1b-35a9f0c2d6a1") -> list[Json]:
    name = manifest["metadata"]["name"]
    labels = {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": uid,
        "job-name": name,
    }
    count = manifest["spec"].get("parallelism", 1)
    return [_pod(manifest["spec"]["template"], f"{name}-{i}abcd", _ns(manifest), labels) for i in range(count)]


def jobset(manifest: Json, uid: str = "4b1e7c9d-2a3f-4c5b-8d6e-7f8091a2b3c4") -> list[Json]:
    name = manifest["metadata"]["name"]
    pods = []
    for replicated in manifest["spec"]["replicatedJobs"]:
        for job_index in range(replicated.get("replicas", 1)):
            job = copy.deepcopy(replicated["template"])
            job["metadata"] = {"name": f"{name}-{replicated['name']}-{job_index}"}
            keys = {
                "jobset.sigs.k8s.io/jobset-name": name,
                "jobset.sigs.k8s.io/jobset-uid": uid,
                "jobset.sigs.k8s.io/replicatedjob-name": replicated["name"],
                "jobset.sigs.k8s.io/job-index": str(job_index),
            }
            job["spec"]["template"].setdefault("metadata", {}).setdefault("labels", {}).update(keys)
            job_uid = f"{uid[:-2]}{job_index:02d}"
            pods += batch_job(job, uid=job_uid)
    return pods


def leader_worker_set(manifest: Json) -> list[Json]:
    name = manifest["metadata"]["name"]
    namespace = _ns(manifest)
    spec = manifest["spec"]["leaderWorkerTemplate"]
    size = spec["size"]
    pods = []
    for group in range(manifest["spec"].get("replicas", 1)):
        leader = f"{name}-{group}"
        key = hashlib.sha1(f"{namespace}/{leader}".encode()).hexdigest()
        for worker in range(size):
            template = spec.get("leaderTemplate", spec["workerTemplate"]) if worker == 0 else spec["workerTemplate"]
            labels = {
                "leaderworkerset.sigs.k8s.io/name": name,
                "leaderworkerset.sigs.k8s.io/group-index": str(group),
                "leaderworkerset.sigs.k8s.io/worker-index": str(worker),
                "leaderworkerset.sigs.k8s.io/group-key": key,
            }
            pod_name = leader if worker == 0 else f"{leader}-{worker}"
            pods.append(_pod(template, pod_name, namespace, labels, {"leaderworkerset.sigs.k8s.io/size": str(size)}))
    return pods


def ray_cluster(manifest: Json) -> list[Json]:
    name = manifest["metadata"]["name"]
    namespace = _ns(manifest)
    head = manifest["spec"]["headGroupSpec"]["template"]
    pods = [
        _pod(
            head,
            f"{name}-head-x7k2p",
            namespace,
            {"ray.io/cluster": name, "ray.io/node-type": "head", "ray.io/group": "headgroup"},
        )
    ]
    for group in manifest["spec"].get("workerGroupSpecs", []):
        for index in range(group.get("replicas", 1)):
            labels = {"ray.io/cluster": name, "ray.io/node-type": "worker", "ray.io/group": group["groupName"]}
            pods.append(_pod(group["template"], f"{name}-{group['groupName']}-worker-{index}q", namespace, labels))
    return pods


def deployment(manifest: Json) -> list[Json]:
    name = manifest["metadata"]["name"]
    template = manifest["spec"]["template"]
    labels = {"pod-template-hash": "7d9f8c6b5"}
    count = manifest["spec"].get("replicas", 1)
    return [_pod(template, f"{name}-7d9f8c6b5-{i}x2k4", _ns(manifest), labels) for i in range(count)]


OPERATORS = {
    ("apps/v1", "Deployment"): deployment,
    ("kubeflow.org/v1", "PyTorchJob"): pytorch_job,
    ("batch/v1", "Job"): batch_job,
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): jobset,
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): leader_worker_set,
    ("ray.io/v1", "RayCluster"): ray_cluster,
}


def pods_of(manifest: Json) -> list[Json]:
    """The pods a team's object becomes inside its vCluster; a Pod is itself."""
    if manifest["kind"] == "Pod":
        return [copy.deepcopy(manifest)]
    return OPERATORS[(manifest["apiVersion"], manifest["kind"])](manifest)

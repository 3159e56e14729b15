"""A team's pods on their way to the host: built, synced, and decided by the lab's real API server.

The policies and bindings are those the real program registers, installed in the lab
(tests/lab_admission.py). A pod the syncer creates goes through the API server's own
admission chain: the pinning policy (mutate mode), KAI's webhook (its stand-in, while KAI
serves), the validating policies, Pod Security, in the API server's order.
"""

import copy
from typing import Any

from harness import ProgramRun
from tests.lab import shared_lab
from tests.lab_admission import Request, decide
from tests.vcluster_syncer import to_host

VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
VAPB = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
MAP = "kubernetes:admissionregistration.k8s.io/v1:MutatingAdmissionPolicy"
MAPB = "kubernetes:admissionregistration.k8s.io/v1:MutatingAdmissionPolicyBinding"
NAMESPACE = "kubernetes:core/v1:Namespace"

SYNCER = "system:serviceaccount:vcluster-team-nlp:vc-team-nlp"
"""The syncer's host identity: the control plane's ServiceAccount vc-<release> (loft-sh/vcluster
chart/templates/serviceaccount.yaml, statefulset.yaml @v0.35.1)."""
BINDER = "system:serviceaccount:kai-scheduler:binder"
POD_GROUPER = "system:serviceaccount:kai-scheduler:pod-grouper"
CUDA = "nvcr.io/nvidia/cuda:13.0.1-base-ubuntu24.04"
SYNCED = {"vcluster.loft.sh/managed-by": "team-nlp", "vcluster.loft.sh/namespace": "default"}
FRACTION = {"gpu-fraction": "0.5"}

Json = dict[str, Any]


def policies(run: ProgramRun) -> dict[str, tuple[Json, Json]]:
    """Policy name -> (spec, binding spec), validating and mutating."""
    found = {}
    for policy_type, binding_type in ((VAP, VAPB), (MAP, MAPB)):
        bindings = {b.inputs["spec"]["policyName"]: b.inputs["spec"] for b in run.of_type(binding_type)}
        for policy in run.of_type(policy_type):
            name = policy.inputs["metadata"]["name"]
            found[f"{policy_type.rsplit(':', 1)[1]}/{name}"] = (policy.inputs["spec"], bindings[name])
    return found


def validating(run: ProgramRun) -> list[tuple[Json, Json]]:
    return [v for k, v in policies(run).items() if k.startswith("ValidatingAdmissionPolicy/")]


def namespace(run: ProgramRun, team: str) -> Json:
    """The tenant's namespace as the API server holds it once the run is done: with the kubernetes.io/metadata.name
    label it adds."""
    (registered,) = [r for r in run.of_type(NAMESPACE) if r.name == f"{team}-namespace"]
    metadata = copy.deepcopy(registered.inputs["metadata"])
    metadata["labels"]["kubernetes.io/metadata.name"] = metadata["name"]
    return {"metadata": metadata}


def admitted(
    run: ProgramRun, request: Request, *, kai_serves: bool = True, pod_groups: list[Json] | None = None
) -> tuple[Json, list[str]]:
    """The request decided by the lab's API server with the stack's policies (and KAI's webhook, when it
    serves): the object as stored (the request's own when refused), and the refusal, if any (the API server
    gives only the first). `pod_groups` are the gang controller's PodGroups in the namespace (the consistency
    policy's params); by default none exist yet, or, without KAI, the policy does not exist yet."""
    stored, denials = decide(shared_lab(), run, request, kai_serves=kai_serves, pod_groups=pod_groups)
    return (stored if stored is not None else request.object), denials


def admit(
    run: ProgramRun, request: Request, *, kai_serves: bool = True, pod_groups: list[Json] | None = None
) -> list[str]:
    return admitted(run, request, kai_serves=kai_serves, pod_groups=pod_groups)[1]


def pod(
    *,
    containers: list[Json] | None = None,
    labels: Json | None = None,
    annotations: Json | None = None,
    **spec: Any,
) -> Json:
    """A pod as the syncer writes it to team-nlp's host namespace."""
    metadata: Json = {"name": "train-x-default-x-team-nlp", "namespace": "vcluster-team-nlp"}
    metadata["labels"] = {**SYNCED, **(labels or {})}
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": containers or [{"name": "main", "image": "busybox"}], **spec},
    }


def team_pod(
    name: str = "train",
    *,
    containers: list[Json] | None = None,
    labels: Json | None = None,
    annotations: Json | None = None,
    **spec: Any,
) -> Json:
    """A pod as a team writes it in its vCluster's default namespace."""
    metadata: Json = {"name": name, "namespace": "default", "labels": dict(labels or {})}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": containers or [{"name": "main", "image": "busybox"}], **spec},
    }


def synced(run: ProgramRun, virtual: Json, team: str = "team-nlp") -> Json:
    """The host pod team-nlp's syncer writes for `virtual` (tests/vcluster_syncer.py), as a team of the run's
    admission mode writes it."""
    return as_team(mode(run), to_host(virtual, vcluster=team))


def container(name: str = "main", image: str = CUDA, **fields: Any) -> Json:
    return {"name": name, "image": image, **fields}


def gpus(count: int = 1) -> Json:
    return {"limits": {"nvidia.com/gpu": str(count)}}


def env(name: str, value: str) -> list[Json]:
    return [{"name": name, "value": value}]


def mode(run: ProgramRun) -> str:
    return "mutate" if run.of_type(MAP) else "validate"


def as_team(mode: str, p: Json) -> Json:
    """In validate mode there is no pinning policy: a well-behaved team sets KAI's fields itself."""
    if mode == "validate":
        p = copy.deepcopy(p)
        p["metadata"]["labels"].setdefault("kai.scheduler/queue", "team-nlp")
        if p["spec"].get("schedulerName", "default-scheduler") == "default-scheduler":
            p["spec"]["schedulerName"] = "kai-scheduler"
    return p


def create(
    run: ProgramRun,
    p: Json,
    ns: Json | None = None,
    *,
    kai_serves: bool = True,
    pod_groups: list[Json] | None = None,
) -> list[str]:
    """The denials the syncer's CREATE of `p` in team-nlp's namespace (or `ns`) meets."""
    request = Request(object=p, namespace=ns or namespace(run, "team-nlp"), user=SYNCER)
    return admit(run, request, kai_serves=kai_serves, pod_groups=pod_groups)


def stored(run: ProgramRun, p: Json) -> Json:
    """`p` as the host holds it once the syncer's CREATE is admitted (KAI serving)."""
    obj, denials = admitted(run, Request(object=p, namespace=namespace(run, "team-nlp"), user=SYNCER))
    assert denials == [], denials
    return obj


def update(run: ProgramRun, old: Json, new: Json, user: str = SYNCER, sub_resource: str = "") -> list[str]:
    request = Request(
        object=new,
        old_object=old,
        operation="UPDATE",
        sub_resource=sub_resource,
        namespace=namespace(run, "team-nlp"),
        user=user,
    )
    return admit(run, request)

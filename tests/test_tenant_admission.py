"""Tenant admission, as the host's API server runs it: every attack a team could copy from a blog is refused.

The policies and bindings are taken from what the real program registers. A pod
arriving from a tenant's syncer goes through the pinning policy (mutate mode),
then KAI's webhook (tests/kai_admission.py), then the validating policies;
`kubectl debug` arrives as an update of the pods/ephemeralcontainers subresource.
"""

import copy
from collections.abc import Callable
from typing import Any

import pytest

from harness import ProgramRun, dev_settings, run_main
from tests.admission import Request, mutate, validate
from tests.kai_admission import kai_mutate

VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
VAPB = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
MAP = "kubernetes:admissionregistration.k8s.io/v1:MutatingAdmissionPolicy"
MAPB = "kubernetes:admissionregistration.k8s.io/v1:MutatingAdmissionPolicyBinding"
NAMESPACE = "kubernetes:core/v1:Namespace"

SYNCER = "system:serviceaccount:vcluster-team-nlp:vc-team-nlp"
BINDER = "system:serviceaccount:kai-scheduler:binder"
CUDA = "nvcr.io/nvidia/cuda:13.0.1-base-ubuntu24.04"
SYNCED = {"vcluster.loft.sh/managed-by": "team-nlp", "vcluster.loft.sh/namespace": "default"}

Json = dict[str, Any]


@pytest.fixture(scope="module", params=["mutate", "validate"])
def program(request: pytest.FixtureRequest) -> ProgramRun:
    config = dev_settings()
    config["vcluster"] = {"admission": request.param}
    return run_main(config)


@pytest.fixture(scope="module")
def dev_run() -> ProgramRun:
    return run_main(dev_settings())


def _policies(run: ProgramRun) -> dict[str, tuple[Json, Json]]:
    """Policy name -> (spec, binding spec), validating and mutating."""
    found = {}
    for policy_type, binding_type in ((VAP, VAPB), (MAP, MAPB)):
        bindings = {b.inputs["spec"]["policyName"]: b.inputs["spec"] for b in run.of_type(binding_type)}
        for policy in run.of_type(policy_type):
            name = policy.inputs["metadata"]["name"]
            found[f"{policy_type.rsplit(':', 1)[1]}/{name}"] = (policy.inputs["spec"], bindings[name])
    return found


def _namespace(run: ProgramRun, team: str) -> Json:
    """The tenant's namespace as the API server holds it: with the kubernetes.io/metadata.name label it adds."""
    (registered,) = [r for r in run.of_type(NAMESPACE) if r.name == f"{team}-namespace"]
    metadata = copy.deepcopy(registered.inputs["metadata"])
    metadata["labels"]["kubernetes.io/metadata.name"] = metadata["name"]
    return {"metadata": metadata}


def admitted(run: ProgramRun, request: Request) -> tuple[Json, list[str]]:
    """Run the request through the stack's policies (and KAI's webhook): the object as stored, and every denial."""
    policies = _policies(run)
    obj = request.object
    if request.operation == "CREATE" and request.resource == "pods":
        for spec, binding in (v for k, v in policies.items() if k.startswith("MutatingAdmissionPolicy/")):
            obj = mutate(spec, binding, Request(**{**request.__dict__, "object": obj})) or obj
        obj = kai_mutate(obj)
    final = Request(**{**request.__dict__, "object": obj})
    denials: list[str] = []
    for key, (spec, binding) in policies.items():
        if key.startswith("ValidatingAdmissionPolicy/"):
            denials += validate(spec, binding, final) or []
    return obj, denials


def admit(run: ProgramRun, request: Request) -> list[str]:
    return admitted(run, request)[1]


def pod(
    *,
    containers: list[Json] | None = None,
    labels: Json | None = None,
    annotations: Json | None = None,
    **spec: Any,
) -> Json:
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


def container(name: str = "main", image: str = CUDA, **fields: Any) -> Json:
    return {"name": name, "image": image, **fields}


def gpus(count: int = 1) -> Json:
    return {"limits": {"nvidia.com/gpu": str(count)}}


def env(name: str, value: str) -> list[Json]:
    return [{"name": name, "value": value}]


FRACTION = {"gpu-fraction": "0.5"}
KAI = {"schedulerName": "kai-scheduler"}


def _as_team(mode: str, p: Json) -> Json:
    """In validate mode there is no pinning policy: a well-behaved team sets KAI's fields itself."""
    if mode == "validate":
        p = copy.deepcopy(p)
        p["metadata"]["labels"].setdefault("kai.scheduler/queue", "team-nlp")
        p["spec"].setdefault("schedulerName", "kai-scheduler")
    return p


def _mode(run: ProgramRun) -> str:
    return "mutate" if run.of_type(MAP) else "validate"


def _create(run: ProgramRun, p: Json, namespace: Json | None = None) -> list[str]:
    return admit(run, Request(object=p, namespace=namespace or _namespace(run, "team-nlp"), user=SYNCER))


BENIGN = {
    "cpu-pod": pod(),
    "whole-gpu-through-kai": pod(containers=[container(resources=gpus())]),
    "fraction-through-kai": pod(annotations=FRACTION, containers=[container(), container("sidecar", "busybox")]),
    "fraction-with-init-container": pod(
        annotations=FRACTION, containers=[container()], initContainers=[container("fetch", "busybox")]
    ),
    "cpu-pod-with-app-config-from-envfrom": pod(
        containers=[container(image="busybox", envFrom=[{"configMapRef": {"name": "app-x-default-x-team-nlp"}}])]
    ),
}


@pytest.mark.parametrize("name", BENIGN)
def test_ordinary_pods_are_admitted(program: ProgramRun, name: str) -> None:
    assert _create(program, _as_team(_mode(program), BENIGN[name])) == []


def test_pinning_gives_a_team_pod_its_queue_and_kai(dev_run: ProgramRun) -> None:
    ((spec, binding),) = [v for k, v in _policies(dev_run).items() if k.startswith("MutatingAdmissionPolicy/")]
    pinned = mutate(spec, binding, Request(object=pod(), namespace=_namespace(dev_run, "team-vision")))
    assert pinned is not None
    assert pinned["metadata"]["labels"]["kai.scheduler/queue"] == "team-vision"
    assert pinned["spec"]["schedulerName"] == "kai-scheduler"


def test_another_teams_queue_is_refused_or_overwritten(program: ProgramRun) -> None:
    """Pinning overwrites the label with the tenant's own queue; without pinning the pod is refused."""
    request = Request(
        object=_as_team(_mode(program), pod(labels={"kai.scheduler/queue": "team-vision"})),
        namespace=_namespace(program, "team-nlp"),
        user=SYNCER,
    )
    stored, denials = admitted(program, request)
    if _mode(program) == "mutate":
        assert (stored["metadata"]["labels"]["kai.scheduler/queue"], denials) == ("team-nlp", [])
    else:
        assert any("its own KAI queue" in denial for denial in denials), denials


ATTACKS: dict[str, tuple[Callable[[str], Json], str]] = {
    "cuda-image-under-the-nvidia-runtime": (
        lambda mode: _as_team(mode, pod(containers=[container()], runtimeClassName="nvidia")),
        "runtimeClassName nvidia",
    ),
    "fraction-under-nvidia-legacy": (
        lambda mode: _as_team(
            mode, pod(annotations=FRACTION, containers=[container()], runtimeClassName="nvidia-legacy")
        ),
        "runtimeClassName nvidia",
    ),
    "visible-devices-all": (
        lambda mode: _as_team(mode, pod(containers=[container(env=env("NVIDIA_VISIBLE_DEVICES", "all"))])),
        "NVIDIA_VISIBLE_DEVICES may only be",
    ),
    "visible-devices-in-an-init-container": (
        lambda mode: _as_team(
            mode, pod(initContainers=[container("init", env=env("NVIDIA_VISIBLE_DEVICES", "GPU-0"))])
        ),
        "NVIDIA_VISIBLE_DEVICES may only be",
    ),
    "visible-devices-from-a-teams-configmap": (
        lambda mode: _as_team(
            mode,
            pod(
                containers=[
                    container(
                        env=[
                            {
                                "name": "NVIDIA_VISIBLE_DEVICES",
                                "valueFrom": {"configMapKeyRef": {"name": "gpus-x-default-x-team-nlp", "key": "all"}},
                            }
                        ]
                    )
                ]
            ),
        ),
        "NVIDIA_VISIBLE_DEVICES may only be",
    ),
    "node-name-past-kai": (
        lambda mode: _as_team(mode, pod(containers=[container(resources=gpus())], nodeName="gpu-node-1")),
        "may not name their node",
    ),
    "cdi-annotation": (
        lambda mode: _as_team(mode, pod(annotations={"cdi.k8s.io/gpu": "nvidia.com/gpu=all"})),
        "CDI device annotations",
    ),
    "spoofed-vcluster-platform-label": (
        lambda mode: _as_team(mode, pod(labels={"app": "loft"})),
        "app=loft",
    ),
}


@pytest.mark.parametrize("name", ATTACKS)
def test_every_path_to_a_gpu_or_another_queue_is_refused(program: ProgramRun, name: str) -> None:
    build, reason = ATTACKS[name]
    denials = _create(program, build(_mode(program)))
    assert any(reason in denial for denial in denials), denials


def test_without_pinning_a_gpu_past_kai_is_refused() -> None:
    config = dev_settings()
    config["vcluster"] = {"admission": "validate"}
    run = run_main(config)
    denials = _create(run, pod(containers=[container(resources=gpus())]))
    assert any("only through KAI" in denial for denial in denials), denials


def test_a_fraction_sidecar_that_leaves_its_devices_to_its_image_is_refused(dev_run: ProgramRun) -> None:
    """As KAI's deviceaccess is bypassed (it is only a webhook): a container without its own
    NVIDIA_VISIBLE_DEVICES under the nvidia runtime gets what its image's ENV or an envFrom says."""
    kai_left = kai_mutate(_as_team("validate", pod(annotations=FRACTION, containers=[container()])))
    kai_left["spec"]["containers"].append(container("sidecar", envFrom=[{"configMapRef": {"name": "x"}}]))
    request = Request(object=kai_left, namespace=_namespace(dev_run, "team-nlp"), user=SYNCER)
    denials = [d for spec, b in _validating(dev_run) for d in validate(spec, b, request) or []]
    assert any("must set NVIDIA_VISIBLE_DEVICES itself" in denial for denial in denials), denials


def _validating(run: ProgramRun) -> list[tuple[Json, Json]]:
    return [v for k, v in _policies(run).items() if k.startswith("ValidatingAdmissionPolicy/")]


def _existing_fraction_pod(run: ProgramRun) -> Json:
    """A fraction pod as it stands on the host after admission."""
    created = kai_mutate(_as_team("validate", pod(annotations=FRACTION, containers=[container()])))
    assert _create(run, created) == []
    return created


@pytest.mark.parametrize(
    ("debug_env", "refused"),
    [(None, True), (env("NVIDIA_VISIBLE_DEVICES", "void"), False)],
    ids=["cuda-debug-image", "debug-image-with-void"],
)
def test_kubectl_debug_on_a_fraction_pod_cannot_see_every_gpu(
    dev_run: ProgramRun, debug_env: list[Json] | None, refused: bool
) -> None:
    existing = _existing_fraction_pod(dev_run)
    debugged = copy.deepcopy(existing)
    debug = container("debugger-abc12")
    if debug_env:
        debug["env"] = debug_env
    debugged["spec"]["ephemeralContainers"] = [debug]
    request = Request(
        object=debugged,
        old_object=existing,
        operation="UPDATE",
        sub_resource="ephemeralcontainers",
        namespace=_namespace(dev_run, "team-nlp"),
        user=SYNCER,
    )
    denials = admit(dev_run, request)
    assert bool(denials) == refused, denials


UPDATES: dict[str, tuple[Callable[[Json], None], str | None]] = {
    "syncer-adds-its-annotation": (
        lambda p: p["metadata"].setdefault("annotations", {}).update({"vcluster.loft.sh/labels": "x"}),
        None,
    ),
    "queue-label-changed": (
        lambda p: p["metadata"]["labels"].update({"kai.scheduler/queue": "team-vision"}),
        "cannot be changed or removed",
    ),
    "queue-label-removed": (
        lambda p: p["metadata"]["labels"].pop("kai.scheduler/queue"),
        "cannot be changed or removed",
    ),
    "shared-configmap-repointed": (
        lambda p: p["metadata"]["annotations"].update({"runai/shared-gpu-configmap": "other-x-shared-gpu"}),
        "GPU sharing annotations",
    ),
}


@pytest.mark.parametrize("name", UPDATES)
def test_the_syncers_updates_pass_and_a_teams_edits_to_pinning_do_not(dev_run: ProgramRun, name: str) -> None:
    change, reason = UPDATES[name]
    existing = _existing_fraction_pod(dev_run)
    updated = copy.deepcopy(existing)
    change(updated)
    request = Request(
        object=updated, old_object=existing, operation="UPDATE", namespace=_namespace(dev_run, "team-nlp"), user=SYNCER
    )
    denials = admit(dev_run, request)
    if reason is None:
        assert denials == []
    else:
        assert any(reason in denial for denial in denials), denials


def test_the_control_plane_and_other_namespaces_are_not_tenant_pods(dev_run: ProgramRun) -> None:
    control_plane = pod(labels={}, containers=[container(env=env("NVIDIA_VISIBLE_DEVICES", "all"))], nodeName="n")
    control_plane["metadata"]["labels"] = {"app": "vcluster", "release": "team-nlp"}
    assert _create(dev_run, control_plane) == []
    system = {"metadata": {"name": "kube-system", "labels": {"kubernetes.io/metadata.name": "kube-system"}}}
    assert _create(dev_run, pod(containers=[container()], runtimeClassName="nvidia"), namespace=system) == []


def _configmap(name: str) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"NVIDIA_VISIBLE_DEVICES": "all"},
    }


@pytest.mark.parametrize(
    ("name", "user", "refused"),
    [
        ("train-x-default-x-team-nlp-k2j4x9q-shared-gpu-0", SYNCER, True),
        ("train-x-default-x-team-nlp-k2j4x9q-shared-gpu-0-evar", SYNCER, True),
        ("train-x-default-x-team-nlp-k2j4x9q-shared-gpu-0", BINDER, False),
        ("settings-x-default-x-team-nlp", SYNCER, False),
    ],
    ids=["syncer-writes-gpu-list", "syncer-writes-evar", "binder-writes-gpu-list", "ordinary-configmap"],
)
def test_only_kais_binder_writes_a_fractions_gpu_list(dev_run: ProgramRun, name: str, user: str, refused: bool) -> None:
    request = Request(
        object=_configmap(name), resource="configmaps", namespace=_namespace(dev_run, "team-nlp"), user=user
    )
    denials = [d for spec, b in _validating(dev_run) for d in validate(spec, b, request) or []]
    assert bool(denials) == refused, denials


def test_one_policy_serves_every_tenant(dev_run: ProgramRun) -> None:
    """No per-tenant copies: each tenant namespace is selected by its labels, and reads its queue from them."""
    assert len(dev_run.of_type(VAP)) == 2
    assert len(dev_run.of_type(MAP)) == 1
    for team in ("team-nlp", "team-vision", "team-recommender"):
        namespace = _namespace(dev_run, team)
        stored, denials = admitted(dev_run, Request(object=pod(), namespace=namespace, user=SYNCER))
        assert (stored["metadata"]["labels"]["kai.scheduler/queue"], denials) == (team, [])
        other = "team-nlp" if team != "team-nlp" else "team-vision"
        stolen_pod = pod(labels={"kai.scheduler/queue": other}, schedulerName="kai-scheduler")
        stolen = Request(object=stolen_pod, namespace=namespace, user=SYNCER)
        assert [d for spec, b in _validating(dev_run) for d in validate(spec, b, stolen) or []], team

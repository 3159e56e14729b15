"""KAI's bookkeeping belongs to KAI: priorities teams choose, honest fractions, fractions that wait for KAI.

Every pod here starts as a team writes it inside its vCluster, goes through the syncer
(tests/vcluster_syncer.py), then the host's admission as the API server runs it
(tests/tenant_pods.py: the stack's own policies, KAI's webhook when it serves), and,
where it matters, KAI's pod-grouper (tests/kai_podgrouper.py). Each rule has an attack
that is refused; KAI's own updates and ordinary workloads are admitted.
"""

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from components.shared.merge import deep_merge
from components.vcluster_tenant.kai_rules import memory_floor_mib
from components.vcluster_tenant.policies import POD_POLICY
from config.sources import load_settings
from harness import ProgramRun, attempt_main, dev_settings, run_main
from tests.kai_podgrouper import pod_group
from tests.lab_admission import Request
from tests.tenant_pods import (
    BINDER,
    POD_GROUPER,
    SYNCER,
    Json,
    admit,
    as_team,
    create,
    mode,
    namespace,
    stored,
    update,
)
from tests.vcluster_syncer import edit_to_host, to_host

CUDA = "nvcr.io/nvidia/cuda:13.0.1-base-ubuntu24.04"
TEAM = "team-nlp"


@pytest.fixture(scope="module", params=["mutate", "validate"])
def program(request: pytest.FixtureRequest) -> ProgramRun:
    config = dev_settings()
    config["vcluster"] = {"admission": request.param}
    return run_main(config)


@pytest.fixture(scope="module")
def dev_run() -> ProgramRun:
    return run_main(dev_settings())


def virtual(
    name: str = "job",
    *,
    labels: Json | None = None,
    annotations: Json | None = None,
    containers: list[Json] | None = None,
    **spec: Any,
) -> Json:
    """A pod as the team creates it in its vCluster (namespace default)."""
    metadata: Json = {"name": name, "namespace": "default", "labels": dict(labels or {})}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"metadata": metadata, "spec": {"containers": containers or [{"name": "main", "image": "busybox"}], **spec}}


def synced(run: ProgramRun, pod: Json, team: str = TEAM) -> Json:
    """The host pod the syncer creates, as a team of this admission mode writes it."""
    return as_team(mode(run), to_host(pod, vcluster=team))


def gpu(count: int = 1) -> Json:
    return {"limits": {"nvidia.com/gpu": str(count)}}


# --- ordinary workloads -------------------------------------------------------------------------------

WORKLOADS: dict[str, Json] = {
    "ddp-job-worker": virtual(
        "bert-worker-1",
        labels={"training.kubeflow.org/job-name": "bert", "training.kubeflow.org/replica-type": "worker"},
        containers=[
            {
                "name": "pytorch",
                "image": "nvcr.io/nvidia/pytorch:25.10-py3",
                "env": [{"name": "MASTER_ADDR", "value": "bert-master-0"}, {"name": "WORLD_SIZE", "value": "4"}],
                "resources": gpu(),
            }
        ],
    ),
    "fraction-with-a-memory-request": virtual(
        "embed", annotations={"gpu-memory": "4096"}, containers=[{"name": "main", "image": CUDA}]
    ),
    "vllm-deployment": virtual(
        "vllm-7d9f8-x2k4p",
        labels={"app": "vllm", "pod-template-hash": "7d9f8", "priorityClassName": "inference"},
        containers=[
            {
                "name": "vllm",
                "image": "vllm/vllm-openai:v0.11.0",
                "args": ["--model", "Qwen/Qwen3-8B"],
                "resources": gpu(),
                "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
            }
        ],
        volumes=[{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}],
    ),
    "jupyter-notebook": virtual(
        "notebook-0",
        labels={"app": "jupyter", "priorityClassName": "build-preemptible"},
        annotations={"gpu-fraction": "0.25"},
        containers=[{"name": "notebook", "image": "quay.io/jupyter/pytorch-notebook:cuda12-latest"}],
    ),
    "ray-head": virtual(
        "rc-head-abcde",
        labels={"ray.io/cluster": "rc", "ray.io/node-type": "head"},
        containers=[{"name": "ray-head", "image": "rayproject/ray:2.50.0"}],
    ),
    "ray-gpu-worker": virtual(
        "rc-gpu-worker-fghij",
        labels={"ray.io/cluster": "rc", "ray.io/node-type": "worker"},
        containers=[{"name": "ray-worker", "image": "rayproject/ray:2.50.0-gpu", "resources": gpu()}],
    ),
    # A TrainJob's node pod, as Kubeflow Trainer's JobSet makes it (kubeflow/trainer pkg/constants/constants.go
    # LabelTrainJobAncestor, Node, TorchEnv* @v2.3.0).
    "trainjob-node": virtual(
        "llama-node-0-0-h7s2k",
        labels={
            "jobset.sigs.k8s.io/jobset-name": "llama",
            "jobset.sigs.k8s.io/replicatedjob-name": "node",
            "batch.kubernetes.io/job-name": "llama-node-0",
            "trainer.kubeflow.org/trainjob-ancestor-step": "trainer",
        },
        containers=[
            {
                "name": "node",
                "image": "nvcr.io/nvidia/pytorch:25.10-py3",
                "command": ["torchrun", "train.py"],
                "env": [
                    {"name": "PET_NNODES", "value": "2"},
                    {"name": "PET_NPROC_PER_NODE", "value": "1"},
                    {"name": "PET_NODE_RANK", "value": "0"},
                    {"name": "PET_MASTER_ADDR", "value": "llama-node-0-0.llama"},
                    {"name": "PET_MASTER_PORT", "value": "29400"},
                ],
                "resources": gpu(),
            }
        ],
    ),
    # An Argo Workflows step: argoexec's init and wait containers around the step's main one, the template in
    # ARGO_TEMPLATE (argoproj/argo-workflows workflow/common/common.go InitContainerName, WaitContainerName,
    # AnnotationKeyNodeName, LabelKeyWorkflow, EnvVarTemplate @v3.7.18).
    "argo-step": virtual(
        "nightly-eval-train-2815339122",
        labels={"workflows.argoproj.io/workflow": "nightly-eval", "workflows.argoproj.io/completed": "false"},
        annotations={
            "workflows.argoproj.io/node-id": "nightly-eval-2815339122",
            "workflows.argoproj.io/node-name": "nightly-eval[0].train",
        },
        initContainers=[
            {
                "name": "init",
                "image": "quay.io/argoproj/argoexec:v3.7.18",
                "command": ["argoexec", "init"],
                "env": [{"name": "ARGO_TEMPLATE", "value": '{"name":"train","container":{"image":"' + CUDA + '"}}'}],
            }
        ],
        containers=[
            {
                "name": "wait",
                "image": "quay.io/argoproj/argoexec:v3.7.18",
                "command": ["argoexec", "wait"],
                "env": [{"name": "ARGO_TEMPLATE", "value": '{"name":"train","container":{"image":"' + CUDA + '"}}'}],
            },
            {
                "name": "main",
                "image": CUDA,
                "command": ["/var/run/argo/argoexec", "emissary", "--", "python", "eval.py"],
                "resources": gpu(),
            },
        ],
    ),
    "non-preemptible-training": virtual(
        "finetune",
        labels={"kai.scheduler/preemptibility": "non-preemptible"},
        containers=[{"name": "m", "image": CUDA}],
    ),
}


@pytest.mark.parametrize("name", WORKLOADS)
def test_ordinary_workloads_are_admitted(program: ProgramRun, name: str) -> None:
    assert create(program, synced(program, WORKLOADS[name])) == []


def test_kubectl_debug_with_void_is_admitted(dev_run: ProgramRun) -> None:
    existing = stored(dev_run, synced(dev_run, WORKLOADS["jupyter-notebook"]))
    debugged = copy.deepcopy(existing)
    debugged["spec"]["ephemeralContainers"] = [
        {"name": "debugger-x7", "image": "busybox", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]}
    ]
    assert update(dev_run, existing, debugged, sub_resource="ephemeralcontainers") == []


# --- KAI's own updates ------------------------------------------------------------------------------


def _grouped(pod: Json) -> Json:
    """What the pod-grouper's merge patch leaves: pod-group-name (and a subgroup, for a gang)."""
    patched = copy.deepcopy(pod)
    meta = patched["metadata"]
    meta.setdefault("annotations", {})["pod-group-name"] = f"pg-{meta['name']}-{meta['uid']}"
    return patched


def _bound(pod: Json, *, multi: bool = False) -> Json:
    """What the binder's merge patches leave on a fraction it binds."""
    patched = copy.deepcopy(pod)
    group = "0a3c5b58-52d0-4c6e-a4be-2c54e8a1b3f0"
    patched["metadata"]["labels"][f"runai-gpu-group/{group}" if multi else "runai-gpu-group"] = group
    patched["metadata"]["annotations"]["received-resource-type"] = "Fraction"
    return patched


def test_kais_pod_grouper_and_binder_do_their_bookkeeping(dev_run: ProgramRun) -> None:
    created = stored(dev_run, synced(dev_run, WORKLOADS["jupyter-notebook"]))
    grouped = _grouped(created)
    assert update(dev_run, created, grouped, user=POD_GROUPER) == []
    with_subgroup = copy.deepcopy(grouped)
    with_subgroup["metadata"]["labels"]["kai.scheduler/subgroup-name"] = "workers"
    assert update(dev_run, grouped, with_subgroup, user=POD_GROUPER) == []
    bound = _bound(grouped)
    assert update(dev_run, grouped, bound, user=BINDER) == []
    assert update(dev_run, grouped, _bound(grouped, multi=True), user=BINDER) == []
    # A failed bind: the binder takes its GPU-group labels back.
    assert update(dev_run, bound, grouped, user=BINDER) == []


def test_the_syncer_carries_a_teams_ordinary_edits_past_kais_keys(dev_run: ProgramRun) -> None:
    team_pod = WORKLOADS["jupyter-notebook"]
    host = _bound(_grouped(stored(dev_run, synced(dev_run, team_pod))))
    edited = copy.deepcopy(team_pod)
    edited["metadata"]["labels"]["owner"] = "alice"
    edited["metadata"]["annotations"]["note"] = "re-run with a larger batch"
    assert update(dev_run, host, edit_to_host(host, team_pod, edited, vcluster=TEAM)) == []


# --- a team cannot write KAI's keys ----------------------------------------------------------------------

NUMA_PREDICTED = "kai.scheduler/numa-placement-predicted"
NUMA_OBSERVED = "kai.scheduler/numa-placement-observed"
PLACEMENT = '{"nodes":[{"id":0,"resources":{"nvidia.com/gpu":"1"}}]}'
"""A NUMA placement as KAI serializes it (pkg/apis/scheduling/v1alpha2/numa_placement_types.go @v0.16.8): what the
scheduler seeds its topology bookkeeping from (plugins/numa/seed_placements.go)."""
NUMA_EXPORTER = "system:serviceaccount:kai-scheduler:numa-placement-exporter"

ON_CREATE: dict[str, tuple[Json, Json, str]] = {
    # name: (labels, annotations, what the refusal names)
    "names-a-pod-group": ({}, {"pod-group-name": "pg-other-teams-job-5d1e"}, "pod-group-name"),
    "skips-the-pod-grouper": ({}, {"kai.scheduler/skip-podgrouper": "true"}, "kai.scheduler/skip-podgrouper"),
    "picks-a-subgroup": ({"kai.scheduler/subgroup-name": "leaders"}, {}, "kai.scheduler/subgroup-name"),
    "pins-a-gpu-group": ({"runai-gpu-group": "0a3c5b58"}, {}, "runai-gpu-group"),
    "pins-a-multi-device-gpu-group": ({"runai-gpu-group/0a3c5b58": "0a3c5b58"}, {}, "runai-gpu-group"),
    "claims-a-received-share": ({}, {"received-resource-type": "Regular"}, "received-resource-type"),
    "predicts-its-numa-placement": ({}, {NUMA_PREDICTED: PLACEMENT}, NUMA_PREDICTED),
    "reports-an-observed-numa-placement": ({}, {NUMA_OBSERVED: PLACEMENT}, NUMA_OBSERVED),
    "poses-as-a-reservation-pod": ({"app": "kai-resource-reservation"}, {}, "app=kai-resource-reservation"),
    "poses-as-a-scaling-pod": ({"app": "scaling-pod"}, {}, "app=scaling-pod"),
    "lets-kai-name-its-group-after-a-label": (
        {"spark-app-name": "etl", "spark-app-selector": "team-vision.default.gang"},
        {},
        "spark-app-name and spark-app-selector",
    ),
}


@pytest.mark.parametrize("name", ON_CREATE)
def test_a_team_cannot_create_a_pod_with_kais_keys(program: ProgramRun, name: str) -> None:
    labels, annotations, reason = ON_CREATE[name]
    team_pod = virtual(
        labels=labels, annotations=annotations, containers=[{"name": "m", "image": CUDA, "resources": gpu()}]
    )
    denials = create(program, synced(program, team_pod))
    assert any(reason in denial for denial in denials), denials


def _drop_gpu_group(pod: Json) -> None:
    pod["metadata"]["labels"].pop("runai-gpu-group")


def _name_group(group: str) -> Callable[[Json], None]:
    def change(pod: Json) -> None:
        pod["metadata"]["annotations"]["pod-group-name"] = group

    return change


def _repoint_pod_group(pod: Json) -> None:
    pod["metadata"]["annotations"]["pod-group-name"] = "pg-another-teams-gang"


def _set(kind: str, key: str, value: str) -> Callable[[Json], None]:
    def change(pod: Json) -> None:
        pod["metadata"].setdefault(kind, {})[key] = value

    return change


ON_UPDATE: dict[str, tuple[Callable[[Json], None], str, str]] = {
    # name: (the change, who sends it, what the refusal names)
    "team-drops-the-gpu-group-of-a-running-fraction": (_drop_gpu_group, SYNCER, "runai-gpu-group"),
    "team-repoints-its-pod-group": (_repoint_pod_group, SYNCER, "pod-group-name"),
    "team-adds-skip-podgrouper": (
        _set("annotations", "kai.scheduler/skip-podgrouper", "true"),
        SYNCER,
        "skip-podgrouper",
    ),
    "team-adds-a-subgroup": (_set("labels", "kai.scheduler/subgroup-name", "x"), SYNCER, "subgroup-name"),
    "team-changes-the-received-share": (
        _set("annotations", "received-resource-type", "Regular"),
        SYNCER,
        "received-resource-type",
    ),
    "team-copies-another-gpu-group": (_set("labels", "runai-gpu-group", "5e2f"), SYNCER, "runai-gpu-group"),
    "pod-grouper-moves-a-grouped-pod": (_repoint_pod_group, POD_GROUPER, "pod-group-name"),
    "binder-writes-the-pod-group": (_repoint_pod_group, BINDER, "pod-group-name"),
    "pod-grouper-writes-a-gpu-group": (_set("labels", "runai-gpu-group", "5e2f"), POD_GROUPER, "runai-gpu-group"),
    "team-poses-as-a-reservation-pod": (_set("labels", "app", "kai-resource-reservation"), SYNCER, "app=kai"),
    "team-rewrites-its-numa-placement": (_set("annotations", NUMA_OBSERVED, PLACEMENT), SYNCER, NUMA_OBSERVED),
    "binder-writes-an-observed-placement": (_set("annotations", NUMA_OBSERVED, PLACEMENT), BINDER, NUMA_OBSERVED),
    "exporter-writes-a-predicted-placement": (
        _set("annotations", NUMA_PREDICTED, PLACEMENT),
        NUMA_EXPORTER,
        NUMA_PREDICTED,
    ),
}


@pytest.mark.parametrize(
    ("key", "writer"), [(NUMA_PREDICTED, BINDER), (NUMA_OBSERVED, NUMA_EXPORTER)], ids=["binder", "exporter"]
)
def test_kais_numa_writers_still_write_their_placements(dev_run: ProgramRun, key: str, writer: str) -> None:
    existing = _bound(_grouped(stored(dev_run, synced(dev_run, WORKLOADS["jupyter-notebook"]))))
    changed = copy.deepcopy(existing)
    _set("annotations", key, PLACEMENT)(changed)
    assert update(dev_run, existing, changed, user=writer) == []


@pytest.mark.parametrize("name", ON_UPDATE)
def test_only_kais_own_component_changes_its_keys(dev_run: ProgramRun, name: str) -> None:
    change, user, reason = ON_UPDATE[name]
    existing = _bound(_grouped(stored(dev_run, synced(dev_run, WORKLOADS["jupyter-notebook"]))))
    changed = copy.deepcopy(existing)
    change(changed)
    denials = update(dev_run, existing, changed, user=user)
    assert any(reason in denial for denial in denials), denials


@pytest.mark.parametrize(
    ("group", "refused"),
    [("team-vision.default.gang", True), ("pg-someone-else-3f1c", True), (None, False)],
    ids=["a-spark-style-chosen-name", "another-pods-group", "the-pods-own-group"],
)
def test_the_pod_grouper_gives_a_pod_only_its_own_group(dev_run: ProgramRun, group: str | None, refused: bool) -> None:
    """KAI's Spark grouper names a group after a label a team chooses; KAI joins groups by name across namespaces."""
    created = stored(dev_run, synced(dev_run, WORKLOADS["jupyter-notebook"]))
    grouped = _grouped(created) if group is None else copy.deepcopy(created)
    if group is not None:
        _name_group(group)(grouped)
    denials = update(dev_run, created, grouped, user=POD_GROUPER)
    assert bool(denials) == refused, denials


def test_a_team_that_deletes_a_key_kai_copied_back_is_refused_through_the_syncer(dev_run: ProgramRun) -> None:
    """The syncer copies KAI's host-side keys into the team's pod; deleting one there becomes a host patch."""
    host = _bound(_grouped(stored(dev_run, synced(dev_run, WORKLOADS["jupyter-notebook"]))))
    copied_back = copy.deepcopy(WORKLOADS["jupyter-notebook"])
    copied_back["metadata"]["labels"]["runai-gpu-group"] = host["metadata"]["labels"]["runai-gpu-group"]
    deleted = copy.deepcopy(copied_back)
    deleted["metadata"]["labels"].pop("runai-gpu-group")
    denials = update(dev_run, host, edit_to_host(host, copied_back, deleted, vcluster=TEAM))
    assert any("runai-gpu-group" in denial for denial in denials), denials


# --- priorities a team chooses ------------------------------------------------------------------------


def _run_with(**tenant: Any) -> ProgramRun:
    config = dev_settings()
    config["tenants"][0].update(tenant)
    return run_main(config)


PRIORITY_CHOICES: dict[str, tuple[Json, str | None]] = {
    # name: (the pod's labels, what the refusal names; None: admitted)
    "kai-class": ({"priorityClassName": "inference"}, None),
    "non-preemptible-train": ({"priorityClassName": "train", "kai.scheduler/preemptibility": "non-preemptible"}, None),
    "system-node": ({"priorityClassName": "system-node-critical"}, "system-node-critical is not one of"),
    "system-cluster": ({"priorityClassName": "system-cluster-critical"}, "system-cluster-critical is not one of"),
    "unknown": ({"priorityClassName": "gold"}, "gold is not one of"),
    "bad-preemptibility": ({"kai.scheduler/preemptibility": "never"}, "may only be preemptible or non-preemptible"),
}


@pytest.mark.parametrize("name", PRIORITY_CHOICES)
def test_a_team_chooses_only_its_priority_classes(program: ProgramRun, name: str) -> None:
    labels, refusal = PRIORITY_CHOICES[name]
    denials = create(program, synced(program, virtual(labels=labels)))
    assert denials == [] if refusal is None else any(refusal in denial for denial in denials), denials


def test_a_tenants_allowlist_replaces_kais_classes() -> None:
    run = _run_with(priorityClasses=["train", "inference"])
    assert create(run, synced(run, virtual(labels={"priorityClassName": "inference"}))) == []
    denials = create(run, synced(run, virtual(labels={"priorityClassName": "build"})))
    assert any("(train,inference)" in denial for denial in denials), denials


def test_a_team_cannot_raise_its_priority_after_creation(dev_run: ProgramRun) -> None:
    existing = stored(dev_run, synced(dev_run, virtual(labels={"priorityClassName": "train"})))
    raised = copy.deepcopy(existing)
    raised["metadata"]["labels"]["priorityClassName"] = "system-node-critical"
    assert any("system-node-critical" in denial for denial in update(dev_run, existing, raised))


@pytest.mark.parametrize(
    ("labels", "priority_class", "preemptible"),
    [
        ({"app": "vllm", "priorityClassName": "inference"}, "inference", False),
        ({"app": "batch"}, "train", True),
        ({"priorityClassName": "build-preemptible"}, "build-preemptible", True),
        ({"priorityClassName": "train", "kai.scheduler/preemptibility": "non-preemptible"}, "train", False),
        ({"priorityClassName": "inference", "kai.scheduler/preemptibility": "preemptible"}, "inference", True),
    ],
    ids=["inference-deployment", "unlabelled-is-train", "build-preemptible", "train-held", "inference-yielding"],
)
def test_a_teams_choice_reaches_kais_pod_group(
    dev_run: ProgramRun, labels: Json, priority_class: str, preemptible: bool
) -> None:
    """The Deployment's pod (priorityClassName cleared by the syncer) keeps its label; KAI groups by it."""
    team_pod = virtual("server-7d9f8-x2k4p", labels=labels, priorityClassName="high-priority")
    host = stored(dev_run, synced(dev_run, team_pod))
    assert "priorityClassName" not in host["spec"]
    group = pod_group(host)
    assert group is not None
    assert (group.queue, group.priority_class, group.preemptible) == (TEAM, priority_class, preemptible)


# --- honest fractions -------------------------------------------------------------------------------------


FRACTIONS: dict[str, tuple[Json, str | tuple[str, ...] | None]] = {
    # name: (the pod's annotations, what the refusal names, any of several; None: admitted)
    "floor": ({"gpu-fraction": "0.05"}, None),
    "a-thousandth": ({"gpu-fraction": "0.001"}, "gpu-fraction 0.001 is below this team's minimum of 0.05"),
    "exponent": ({"gpu-fraction": "1e-3"}, "gpu-fraction 1e-3 is below"),
    # 0.05 (minGpuFraction) of the mocked L40S's 46068 MiB: the configured 256 would be a 180th of it.
    "memory-floor": ({"gpu-memory": "2304"}, None),
    "the-old-floor": ({"gpu-memory": "256"}, "gpu-memory 256 is below this team's minimum of 2304"),
    # ceil(0.05 x 46068) = ceil(2303.4): the API server rounds up, as memory_floor_mib does.
    "below-by-one": ({"gpu-memory": "2303"}, "gpu-memory 2303 is below this team's minimum of 2304"),
    "one-device": ({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "1"}, None),
    "eight-devices": ({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "8"}, "gpu-fraction-num-devices 8 is above"),
    # KAI's webhook then names the fraction's devices after that prefix, which the device rule refuses too.
    "prefix": (
        {"gpu-fraction": "0.5", "runai/shared-gpu-configmap": "gpus"},
        ("must be a ConfigMap name that ends in", "NVIDIA_VISIBLE_DEVICES may only be"),
    ),
}


@pytest.mark.parametrize("name", FRACTIONS)
def test_a_fraction_is_honest(program: ProgramRun, name: str) -> None:
    annotations, refusal = FRACTIONS[name]
    denials = create(
        program, synced(program, virtual(annotations=annotations, containers=[{"name": "m", "image": CUDA}]))
    )
    if refusal is None:
        assert denials == []
    else:
        reasons = (refusal,) if isinstance(refusal, str) else refusal
        assert any(reason in denial for denial in denials for reason in reasons), denials


def _pod_binding(run: ProgramRun, change: Callable[[Json], None]) -> ProgramRun:
    """The run with its pod policy's binding changed, as a cluster could hold it."""

    def changed(registered: Any) -> Any:
        spec = registered.inputs.get("spec") or {}
        if not registered.type.endswith("ValidatingAdmissionPolicyBinding") or spec.get("policyName") != POD_POLICY:
            return registered
        spec = copy.deepcopy(spec)
        change(spec)
        return dataclasses.replace(registered, inputs={**registered.inputs, "spec": spec})

    return dataclasses.replace(run, registrations=[changed(r) for r in run.registrations])


GPU_MEMORY_POD = {"gpu-memory": "4096"}


@pytest.mark.parametrize(
    ("binding", "plain", "gpu_memory"),
    [
        # An upgrade updates the policy (paramKind) a moment before its binding (paramRef): null params then.
        (lambda spec: spec.pop("paramRef"), [], "gpu-memory 4096 is below this team's minimum of "),
        # Someone deleted the params: every pod is refused, none goes unchecked (parameterNotFoundAction: Deny).
        (lambda spec: spec["paramRef"].update(name="gpu-tenancy-nowhere"), "no params found", "no params found"),
    ],
    ids=["binding-without-its-params-yet", "params-deleted"],
)
def test_the_gpu_memory_params_fail_safe(dev_run: ProgramRun, binding: Any, plain: Any, gpu_memory: str) -> None:
    """The team's gpu-memory floor needs the GPUs, from the shared params; without them the real API server
    refuses what it cannot check and nothing else (a plain pod, while the binding catches up)."""
    run = _pod_binding(dev_run, binding)
    container = [{"name": "m", "image": CUDA}]
    ordinary = create(run, synced(run, virtual(containers=container)))
    assert ordinary == plain if isinstance(plain, list) else any(plain in d for d in ordinary), ordinary
    # Already KAI's and its queue's, so the answer never waits for this fresh run's pinning policy to act.
    pod = virtual(
        labels={"kai.scheduler/queue": "team-nlp"},
        annotations=GPU_MEMORY_POD,
        containers=container,
        schedulerName="kai-scheduler",
    )
    fraction = create(run, synced(run, pod))
    assert any(gpu_memory in denial for denial in fraction), fraction


def test_a_tenants_floor_and_device_limit_override_the_platforms() -> None:
    run = _run_with(minGpuFraction=0.25, maxFractionDevices=2)
    low = virtual(annotations={"gpu-fraction": "0.1"}, containers=[{"name": "m", "image": CUDA}])
    assert any("minimum of 0.25" in denial for denial in create(run, synced(run, low)))
    wide = virtual(
        annotations={"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}, containers=[{"name": "m", "image": CUDA}]
    )
    assert create(run, synced(run, wide)) == []
    other = namespace(run, "team-vision")
    assert admit(run, Request(object=synced(run, low, "team-vision"), namespace=other, user=SYNCER)) == []


def _devices_from(configmap: str) -> Json:
    return {
        "name": "NVIDIA_VISIBLE_DEVICES",
        "valueFrom": {"configMapKeyRef": {"name": configmap, "key": "NVIDIA_VISIBLE_DEVICES"}},
    }


def _premade(run: ProgramRun, prefix: str, sidecar_configmap: str) -> Json:
    """A fraction pod as it reaches the validating policies with KAI's device references in place (KAI keeps a
    prefix it is given), plus a sidecar that reads its devices from `sidecar_configmap`. Written on the host pod:
    a team cannot write these references itself, since the syncer gives every name it references the team's
    suffix (tests/vcluster_syncer.py)."""
    team_pod = virtual(
        annotations={"gpu-fraction": "0.5", "runai/shared-gpu-configmap": prefix},
        containers=[{"name": "main", "image": CUDA}, {"name": "sidecar", "image": CUDA}],
        schedulerName="kai-scheduler",
        runtimeClassName="nvidia",
    )
    host = synced(run, team_pod)
    main, sidecar = host["spec"]["containers"]
    main["env"].append(_devices_from(f"{prefix}-0"))
    main["envFrom"] = [{"configMapRef": {"name": f"{prefix}-0-evar"}}]
    sidecar["env"].append(_devices_from(sidecar_configmap))
    return host


@pytest.mark.parametrize(
    ("prefix", "sidecar_configmap", "refused"),
    [
        ("gpus-x-shared-gpu", "gpus-x-shared-gpu-0-x-default-x-team-nlp", True),
        ("gpus-x-shared-gpu", "gpus-x-shared-gpu-0-evar", True),
        ("gpus-x-shared-gpu", "other-x-shared-gpu-0", True),
        # A dot in the prefix is a literal, not "any character": job.v1 may not read jobxv1's devices.
        ("job.v1-x-shared-gpu", "jobxv1-x-shared-gpu-0", True),
        ("gpus-x-shared-gpu", "gpus-x-shared-gpu-1", False),
        ("job.v1-x-shared-gpu", "job.v1-x-shared-gpu-1", False),
    ],
    ids=[
        "a-configmap-the-team-synced",
        "the-evar-map",
        "another-pods-map",
        "a-dot-is-no-wildcard",
        "own",
        "own-dotted",
    ],
)
def test_devices_come_only_from_the_pods_own_kai_configmaps(
    dev_run: ProgramRun, prefix: str, sidecar_configmap: str, refused: bool
) -> None:
    """Evaluated without KAI's webhook, whose deviceaccess would otherwise overwrite the sidecar's value."""
    denials = create(dev_run, _premade(dev_run, prefix, sidecar_configmap), kai_serves=False)
    assert bool(denials) == refused, denials
    if refused:
        assert any("own <runai/shared-gpu-configmap>-<n>" in denial for denial in denials), denials


def test_a_debug_container_cannot_read_a_fractions_devices(dev_run: ProgramRun) -> None:
    existing = stored(dev_run, synced(dev_run, WORKLOADS["jupyter-notebook"]))
    prefix = existing["metadata"]["annotations"]["runai/shared-gpu-configmap"]
    debugged = copy.deepcopy(existing)
    ref = {"configMapKeyRef": {"name": f"{prefix}-0", "key": "NVIDIA_VISIBLE_DEVICES"}}
    debugged["spec"]["ephemeralContainers"] = [
        {"name": "debugger-x7", "image": CUDA, "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": ref}]}
    ]
    denials = update(dev_run, existing, debugged, sub_resource="ephemeralcontainers")
    assert any("debug (ephemeral) container" in denial for denial in denials), denials


# --- fractions wait for KAI ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["fraction-with-a-memory-request", "jupyter-notebook"])
def test_a_fraction_that_arrives_before_kai_waits_for_it(program: ProgramRun, name: str) -> None:
    """Refused (the syncer retries) while KAI's webhook is not serving; admitted as KAI prepares it once it is."""
    team_pod = synced(program, WORKLOADS[name])
    denials = create(program, team_pod, kai_serves=False)
    assert any("KAI Scheduler is not ready yet" in denial for denial in denials), denials
    assert create(program, team_pod, kai_serves=True) == []


def test_whole_gpus_and_cpu_pods_do_not_wait_for_kais_webhook(program: ProgramRun) -> None:
    for name in ("ddp-job-worker", "vllm-deployment", "ray-head"):
        assert create(program, synced(program, WORKLOADS[name]), kai_serves=False) == [], name


def test_a_namespace_the_platform_has_not_annotated_yet_refuses_what_it_cannot_check(dev_run: ProgramRun) -> None:
    bare = namespace(dev_run, TEAM)
    bare["metadata"].pop("annotations")
    fraction = Request(object=synced(dev_run, WORKLOADS["jupyter-notebook"]), namespace=bare, user=SYNCER)
    # Neither its floor nor its priority classes are known yet: the API server names the first rule that fails.
    (denial,) = admit(dev_run, fraction)
    assert "below this team's minimum" in denial or "not one of this team's priority classes" in denial, denial
    plain = Request(object=synced(dev_run, WORKLOADS["ray-head"]), namespace=bare, user=SYNCER)
    assert admit(dev_run, plain) == []


# --- round three: what KAI and the gang controller take from a pod on trust -----------------------------------

YEAR = 365 * 24 * 3600
SIDECAR = {"name": "trainer", "image": CUDA, "restartPolicy": "Always", "resources": gpu()}
CLASSIC_INIT = {"name": "warm-up", "image": CUDA, "resources": gpu()}

ROUND_THREE: dict[str, tuple[Json, str | None]] = {
    # name: (the host pod's changes, what the refusal names; None: admitted)
    "holds-a-reclaimed-gpu-for-a-year": ({"spec": {"terminationGracePeriodSeconds": YEAR}}, "terminationGrace"),
    "checkpoints-within-the-maximum": ({"spec": {"terminationGracePeriodSeconds": 300}}, None),
    "outranks-kai-on-the-node": ({"spec": {"priorityClassName": "system-node-critical"}}, "spec.priorityClassName"),
    "trains-in-a-native-sidecar": ({"spec": {"initContainers": [SIDECAR]}}, "init containers"),
    "trains-in-an-init-container": ({"spec": {"initContainers": [CLASSIC_INIT]}}, "init containers"),
    "labels-its-group-as-the-controllers": (
        {"metadata": {"labels": {"app.kubernetes.io/managed-by": "gpu-tenancy-gang-controller"}}},
        "mark the platform's own objects",
    ),
    "poses-as-part-of-the-platform": (
        {"metadata": {"labels": {"app.kubernetes.io/part-of": "gpu-tenancy"}}},
        "mark the platform's own objects",
    ),
    "claims-another-teams-gang": (
        {"metadata": {"labels": {"gpu-tenancy/gang-of": "team-vision"}}},
        "gpu-tenancy/* are the platform's own",
    ),
    "writes-the-platforms-annotation": (
        {"metadata": {"annotations": {"gpu-tenancy/gang-empty": "true"}}},
        "gpu-tenancy/* are the platform's own",
    ),
    "is-managed-by-helm": ({"metadata": {"labels": {"app.kubernetes.io/managed-by": "Helm"}}}, None),
}


@pytest.mark.parametrize("name", ROUND_THREE)
def test_round_three_what_a_pod_may_not_bring(dev_run: ProgramRun, name: str) -> None:
    """As the syncer writes the host pod (with a syncer setting that kept the field, where the default drops it)."""
    changes, refusal = ROUND_THREE[name]
    host = deep_merge(synced(dev_run, WORKLOADS["ddp-job-worker"]), changes)
    denials = create(dev_run, host)
    if refusal is None:
        assert denials == []
    else:
        assert any(refusal in denial for denial in denials), denials


def _group_request(run: ProgramRun, user: str, name: str) -> Request:
    group = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": f"vcluster-{TEAM}"},
        "spec": {"minMember": 1, "queue": TEAM},
    }
    return Request(
        object=group,
        old_object=group,
        operation="DELETE",
        resource="podgroups",
        api_group="scheduling.run.ai",
        api_version="v2alpha2",
        namespace=namespace(run, TEAM),
        user=user,
    )


KAIS_GROUP, GANG_GROUP = "pg-bert-worker-1-0a1b", f"{TEAM}.default.bert"
GANGS = "system:serviceaccount:gpu-tenancy-gangs:gang-controller"


@pytest.mark.parametrize(
    ("user", "group", "refused"),
    [
        (SYNCER, KAIS_GROUP, True),
        ("system:serviceaccount:vcluster-team-nlp:default", KAIS_GROUP, True),
        ("admin", KAIS_GROUP, True),
        (GANGS, KAIS_GROUP, True),
        ("system:serviceaccount:kube-system:generic-garbage-collector", KAIS_GROUP, False),
        (POD_GROUPER, KAIS_GROUP, False),
        (GANGS, GANG_GROUP, False),
    ],
    ids=["the-teams-syncer", "a-pod-of-the-team", "an-admin", "the-gang-controller-kais", "the-gc", "kai", "own"],
)
def test_a_pod_group_is_deleted_only_by_kai_the_gang_controller_and_the_clusters_controllers(
    dev_run: ProgramRun, user: str, group: str, refused: bool
) -> None:
    """A deleted PodGroup is not made again for a running pod, which then holds its GPUs outside every queue."""
    denials = admit(dev_run, _group_request(dev_run, user, group))
    assert bool(denials) == refused, denials


@pytest.mark.parametrize(
    "values",
    [
        {"sync": {"toHost": {"priorityClasses": {"enabled": True}}}},
        {"sync": {"fromHost": {"priorityClasses": {"enabled": True}}}},
        {"sync": {"toHost": {"pods": {"priorityClassName": True}}}},
    ],
    ids=["to-host-classes", "from-host-classes", "pods-priority-class-name"],
)
def test_the_syncer_settings_that_keep_spec_priority_class_name_are_the_platforms(values: Json) -> None:
    config = dev_settings()
    config["tenants"][0]["values"] = values
    error, _ = attempt_main(config)
    assert error is not None
    assert "is set by gpu-tenancy" in str(error)
    assert "gpu-tenancy:tenants[0].values.sync." in str(error)


def test_the_grace_period_maximum_reaches_every_tenant_namespace() -> None:
    config = dev_settings()
    config["vcluster"] = {**config.get("vcluster", {}), "maxTerminationGraceSeconds": 120}
    run = run_main(config)
    annotations = [
        r.inputs["metadata"]["annotations"]
        for r in run.of_type("kubernetes:core/v1:Namespace")
        if r.name.endswith("-namespace") and r.inputs["metadata"]["name"].startswith("vcluster-")
    ]
    assert annotations
    assert all(a["gpu-tenancy/max-termination-grace-seconds"] == "120" for a in annotations)


@pytest.mark.parametrize(
    ("gpus", "floor"),
    [
        ({"gpu-node-1": {"memoryMiB": 46068}}, 2304),
        ({"gpu-node-1": {"memoryMiB": 24576}, "gpu-node-2": {"memoryMiB": 81920}}, 4096),
        ({"gpu-node-1": {"memoryMiB": None}}, 256),
        (None, 256),
    ],
    ids=["an-l40s", "the-largest-of-two", "no-feature-discovery", "an-existing-cluster"],
)
def test_the_memory_floor_is_never_a_smaller_share_of_a_gpu_than_the_fraction_floor(gpus: Any, floor: int) -> None:
    """KAI charges a bound gpu-memory pod against its own GPU: at least minGpuFraction of the largest one known."""
    rules = dev_settings_rules()
    assert memory_floor_mib(rules, gpus) == floor
    for node in (gpus or {}).values():
        if node["memoryMiB"]:
            assert floor / node["memoryMiB"] >= rules.min_gpu_fraction


def dev_settings_rules() -> Any:
    settings = load_settings(dev_settings())
    return settings.vcluster.gpu_sharing_for(settings.tenants[0])


# --- round three: what a team can pile up in the caches of KAI and the gang controller ----------------------------

ANNOTATION_BYTES = 32768
TEXT_BYTES = 65536
KUBECTL_APPLIED = {"kubectl.kubernetes.io/last-applied-configuration": '{"apiVersion":"v1","kind":"Pod"}' * 100}


def _annotation_bytes(host: Json) -> int:
    return sum(len(k) + len(v.encode()) for k, v in (host["metadata"].get("annotations") or {}).items())


def _padded_to(run: ProgramRun, limit: int, extra: int) -> Json:
    """A host pod whose annotations hold `limit + extra` bytes, as the syncer writes it (its own keys included)."""
    pod = virtual("notes", annotations={"notes": ""})
    base = _annotation_bytes(synced(run, pod))
    pod["metadata"]["annotations"]["notes"] = "n" * (limit + extra - base)
    host = synced(run, pod)
    assert _annotation_bytes(host) == limit + extra
    return host


SIZES: dict[str, tuple[Json, str | None]] = {
    # name: (the team's pod, what the refusal names; None: admitted)
    "kubectl-applied-with-its-configuration": (virtual("applied", annotations=KUBECTL_APPLIED), None),
    "a-long-distributed-launch": (
        virtual(
            "launch",
            containers=[
                {
                    "name": "torchrun",
                    "image": CUDA,
                    "command": ["torchrun", "--nnodes=4", "--nproc-per-node=8", "train.py"],
                    "args": [f"--config.option{i}=value{i}" for i in range(200)],
                    "env": [{"name": f"NCCL_OPTION_{i}", "value": "1"} for i in range(60)],
                }
            ],
        ),
        None,
    ),
    "piles-up-annotations": (virtual("notes", annotations={"notes": "n" * 40000}), "annotations hold"),
    "counts-characters-not-bytes": (virtual("notes", annotations={"notes": "€" * 11000}), "annotations hold"),
    "piles-up-labels": (
        virtual("labels", labels={f"label-{i}": "v" * 60 for i in range(600)}),
        "annotations hold",
    ),
    "carries-a-dataset-in-env": (
        virtual("env", containers=[{"name": "m", "image": CUDA, "env": [{"name": "DATA", "value": "d" * 70000}]}]),
        "command, args and env",
    ),
    "spreads-it-over-containers": (
        virtual(
            "spread",
            containers=[{"name": f"c{i}", "image": CUDA, "args": ["a" * 20000]} for i in range(2)],
            initContainers=[{"name": "init", "image": CUDA, "command": ["c" * 30000]}],
        ),
        "command, args and env",
    ),
}


@pytest.mark.parametrize("name", SIZES)
def test_a_pods_annotations_and_free_text_are_bounded(dev_run: ProgramRun, name: str) -> None:
    """Every synced pod, finished ones too, sits whole in the caches of KAI's pod-grouper and podgroup-controller."""
    team_pod, refusal = SIZES[name]
    denials = create(dev_run, synced(dev_run, team_pod))
    if refusal is None:
        assert denials == []
    else:
        assert any(refusal in denial for denial in denials), denials


def test_the_annotation_bound_is_exact_and_kai_may_add_its_keys_at_it(dev_run: ProgramRun) -> None:
    at_the_bound = _padded_to(dev_run, ANNOTATION_BYTES, 0)
    assert create(dev_run, _padded_to(dev_run, ANNOTATION_BYTES, 1)) != []
    existing = stored(dev_run, at_the_bound)
    assert update(dev_run, existing, _grouped(existing), user=POD_GROUPER) == []
    edited = copy.deepcopy(existing)
    edited["metadata"]["annotations"]["more"] = "x"
    (denial,) = update(dev_run, existing, edited)
    assert f"above this team's maximum of {ANNOTATION_BYTES}" in denial, denial


def test_the_size_bounds_and_the_finished_pods_kept_are_settings() -> None:
    config = dev_settings()
    config["vcluster"] = {"maxPodAnnotationBytes": 8192, "maxContainerTextBytes": 16384, "maxFinishedPods": 30}
    run = run_main(config)
    annotations = [ns.inputs["metadata"].get("annotations") for ns in run.of_type("kubernetes:core/v1:Namespace")]
    tenants = [a for a in annotations if a and "gpu-tenancy/max-pod-annotation-bytes" in a]
    assert len(tenants) == len(settings_tenants(config))
    assert all(a["gpu-tenancy/max-pod-annotation-bytes"] == "8192" for a in tenants)
    assert all(a["gpu-tenancy/max-container-text-bytes"] == "16384" for a in tenants)
    vclusters = [
        r.inputs["values"] for r in run.of_type("kubernetes:helm.sh/v3:Release") if r.name.endswith("-vcluster")
    ]
    assert len(vclusters) == len(settings_tenants(config))
    for values in vclusters:
        manager = values["controlPlane"]["distro"]["k8s"]["controllerManager"]
        assert manager["extraArgs"] == ["--terminated-pod-gc-threshold=30"]


def settings_tenants(config: Json) -> list[Any]:
    return load_settings(config).tenants

"""Readiness gates, run against a kubectl and kubelet double: what they prove, and that they run at all.

Each gate is taken from what the real program registers (Job spec and files), so
the test exercises exactly the pod a cluster would run.
"""

import copy
import dataclasses
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from components.shared.gate import Gate, GateArgs, Grant
from components.shared.gate_pod import GateStep
from config.upstream import GPU_OPERATOR_DAEMONSETS, IMAGE_PROGRAMS, KUBECTL_IMAGE
from harness import FAKE_HOST_KEY, ProgramRun, Registration, dev_settings, run_main, run_pulumi
from tests.conftest import FAKE_KUBECONFIG, queue_schema_errors
from tests.kubectl_double import Cluster, Outcome, run_job

JOB = "kubernetes:batch/v1:Job"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
QUEUE = "kubernetes:scheduling.run.ai/v2:Queue"
OPERATOR_NAMESPACE = "gpu-operator-resources"
POD_KINDS = ("batch/v1:Job", "core/v1:Pod", "apps/v1:Deployment", "apps/v1:DaemonSet", "apps/v1:StatefulSet")


def _run(**changes: Any) -> ProgramRun:
    config = dev_settings()
    config.update(changes)
    return run_main(config)


@pytest.fixture(scope="module")
def dev_run() -> ProgramRun:
    return _run()


def _gate(run: ProgramRun, name: str) -> tuple[dict[str, Any], dict[str, str]]:
    job = run.one(JOB, name)
    files = [r for r in run.of_type(CONFIG_MAP) if r.name == name]
    return job.inputs["spec"], (files[0].inputs["data"] if files else {})


def _run_gate(run: ProgramRun, name: str, cluster: Cluster) -> Outcome:
    spec, files = _gate(run, name)
    return run_job(spec, cluster, files)


# --- KAI ------------------------------------------------------------------------------------------

KAI_CONFIG = "configs.kai.scheduler/kai-config"
KAI_OPERANDS = (
    "binder",
    "admission",
    "pod-grouper",
    "queue-controller",
    "podgroup-controller",
    "kai-scheduler-default",
)


def _kai_deployments(*rolling: str) -> dict[str, tuple[dict[str, str], bool]]:
    """KAI's operand Deployments (pkg/operator/operands @v0.16.8), and its operator's, which carries no
    managed-by label; `rolling` are still rolling out."""
    operands = {
        f"kai-scheduler/{name}": ({"app": name, "app.kubernetes.io/managed-by": "kai-operator"}, name not in rolling)
        for name in KAI_OPERANDS
    }
    return {**operands, "kai-scheduler/kai-operator": ({"app": "kai-operator"}, False)}


@pytest.mark.parametrize("refusals", [0, 3])
def test_kai_gate_waits_for_the_operator_then_retries_until_the_webhook_admits(
    dev_run: ProgramRun, refusals: int
) -> None:
    cluster = Cluster(
        objects={KAI_CONFIG}, ready={KAI_CONFIG}, webhook_refusals=refusals, deployments=_kai_deployments()
    )
    outcome = _run_gate(dev_run, "kai-gate", cluster)
    assert outcome.passed
    assert outcome.retries == refusals
    verbs = [call[:2] for call in cluster.calls]
    # Each pod runs every step from the first; only the probe is refused.
    one_pod = [
        ["wait", "--for=create"],
        ["wait", "--for=condition=Ready"],
        ["wait", "--for=create"],
        ["rollout", "status"],
        ["create", "--dry-run=server"],
    ]
    assert verbs[: len(one_pod)] == one_pod
    assert verbs.count(["create", "--dry-run=server"]) == refusals + 1


def test_after_an_upgrade_the_kai_gate_waits_until_every_operand_has_rolled_out(dev_run: ProgramRun) -> None:
    """Config Ready can hold while the scheduler's Deployment (not the Config's operand) still rolls out."""
    rolling = Cluster(objects={KAI_CONFIG}, ready={KAI_CONFIG}, deployments=_kai_deployments("kai-scheduler-default"))
    assert not _run_gate(dev_run, "kai-gate", rolling).passed
    assert not any("--dry-run=server" in call for call in rolling.calls), "no probe before the rollout"
    done = Cluster(objects={KAI_CONFIG}, ready={KAI_CONFIG}, deployments=_kai_deployments())
    assert _run_gate(dev_run, "kai-gate", done).passed


def test_kai_gate_waits_for_the_scheduler_the_platforms_shard_makes(dev_run: ProgramRun) -> None:
    """Until the operator has made the default shard's scheduler, no rollout status can vouch for it."""
    operands = {k: v for k, v in _kai_deployments().items() if not k.endswith("/kai-scheduler-default")}
    before = Cluster(objects={KAI_CONFIG}, ready={KAI_CONFIG}, deployments=operands)
    assert not _run_gate(dev_run, "kai-gate", before).passed
    assert not any("rollout" in call for call in before.calls), "no rollout status before the scheduler exists"
    after = Cluster(objects={KAI_CONFIG}, ready={KAI_CONFIG}, deployments=_kai_deployments())
    assert _run_gate(dev_run, "kai-gate", after).passed


def test_kai_gate_never_probes_when_kai_never_reports_ready(dev_run: ProgramRun) -> None:
    cluster = Cluster(objects={KAI_CONFIG})
    assert not _run_gate(dev_run, "kai-gate", cluster).passed
    assert not any("--dry-run=server" in call for call in cluster.calls)


def test_kai_gate_gives_up_when_the_webhook_never_answers(dev_run: ProgramRun) -> None:
    cluster = Cluster(objects={KAI_CONFIG}, ready={KAI_CONFIG}, webhook_refusals=10**6)
    outcome = _run_gate(dev_run, "kai-gate", cluster)
    assert not outcome.passed
    assert outcome.retries == dev_run.one(JOB, "kai-gate").inputs["spec"]["backoffLimit"] + 1


@pytest.mark.parametrize("gate", ["kai-gate", "host-gpu-gate", "team-nlp-ready"])
def test_a_failed_gate_keeps_every_failed_pod_and_what_its_step_said(dev_run: ProgramRun, gate: str) -> None:
    """`kubectl logs job/<gate>` must have something to show at 3 a.m."""
    spec = dev_run.one(JOB, gate).inputs["spec"]
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    outcome = run_job(spec, Cluster(), _gate(dev_run, gate)[1])
    assert not outcome.passed
    assert len(outcome.failed_pods) == spec["backoffLimit"] + 1
    assert all(outcome.failed_pods)


def test_with_on_failure_a_failed_gate_would_leave_nothing_to_read(dev_run: ProgramRun) -> None:
    """Why Never: the Job controller deletes its active pods when it fails, the restarting one included."""
    spec = copy.deepcopy(dev_run.one(JOB, "kai-gate").inputs["spec"])
    spec["template"]["spec"]["restartPolicy"] = "OnFailure"
    outcome = run_job(spec, Cluster(), _gate(dev_run, "kai-gate")[1])
    assert (outcome.passed, outcome.failed_pods) == (False, [])


def test_kai_gate_probe_is_a_valid_root_queue(dev_run: ProgramRun) -> None:
    """An invalid probe would be refused by the API server forever, and the gate would never open."""
    (probe_text,) = _gate(dev_run, "kai-gate")[1].values()
    probe = yaml.safe_load(probe_text)
    assert queue_schema_errors(probe) == []
    assert "parentQueue" not in probe["spec"], "a root probe needs no other queue to exist"


def _vouches_for(run: ProgramRun, name: str) -> str:
    annotations: dict[str, str] = run.one(JOB, name).inputs["spec"]["template"]["metadata"]["annotations"]
    return annotations["gpu-tenancy/vouches-for"]


def test_the_kai_gate_runs_again_exactly_when_the_release_changes(dev_run: ProgramRun) -> None:
    """The Job template is immutable: a new fingerprint replaces the Job, and the gate runs again."""
    base = _vouches_for(dev_run, "kai-gate")
    versions = {**dev_settings()["versions"], "kaiScheduler": "v0.17.0"}
    assert _vouches_for(_run(versions=versions), "kai-gate") != base
    assert _vouches_for(_run(kaiScheduler={"values": {"scheduler": {"replicas": 2}}}), "kai-gate") != base
    assert _vouches_for(_run(kaiScheduler={"readyTimeoutSeconds": 901}), "kai-gate") == base
    upgraded = _run(versions=versions)
    assert {q.name: q.inputs for q in upgraded.of_type(QUEUE)} == {q.name: q.inputs for q in dev_run.of_type(QUEUE)}


# --- GPU ------------------------------------------------------------------------------------------


def _gpu_cluster(
    *nodes: str, allocatable: bool = True, available: int | None = None, dead: tuple[str, ...] = ()
) -> Cluster:
    """GPU nodes as the operator leaves them: labelled, advertising GPUs, its DaemonSets' pods on each, Ready on
    the first `available` nodes (all by default). A `dead` node keeps its labels, allocatable GPUs and pods (the
    API server still holds what it last reported), but it and its pods are not Ready."""
    count = len(nodes)
    ready = count if available is None else available
    alive = [node for node in nodes if node not in dead]
    return Cluster(
        objects={f"daemonset/{OPERATOR_NAMESPACE}/{name}" for name in GPU_OPERATOR_DAEMONSETS},
        nodes={
            node: {
                "labels": {"nvidia.com/gpu.present": "true"},
                "allocatable": {"nvidia.com/gpu": "1"} if allocatable or index else {},
                "ready": node not in dead,
            }
            for index, node in enumerate(nodes)
        },
        daemonsets={
            f"{OPERATOR_NAMESPACE}/{name}": (count, min(ready, len(alive))) for name in GPU_OPERATOR_DAEMONSETS
        },
        pods=[
            {
                "namespace": OPERATOR_NAMESPACE,
                "labels": {"app": name},
                "node": node,
                "ready": index < ready and node not in dead,
            }
            for index, node in enumerate(nodes)
            for name in GPU_OPERATOR_DAEMONSETS
        ],
    )


def test_the_gpu_gate_asks_for_no_gpu_so_it_passes_when_every_gpu_is_taken(dev_run: ProgramRun) -> None:
    pod = dev_run.one(JOB, "host-gpu-gate").inputs["spec"]["template"]["spec"]
    for container in [*pod["initContainers"], *pod["containers"]]:
        resources = container.get("resources", {})
        asked = {**resources.get("requests", {}), **resources.get("limits", {})}
        assert not [r for r in asked if r.startswith("nvidia.com/")], container["name"]
    assert "nodeSelector" not in pod, "the gate may run on any node"
    assert "affinity" not in pod, "the gate may run on any node"
    assert _run_gate(dev_run, "host-gpu-gate", _gpu_cluster("gpu-node-1")).passed


@pytest.mark.parametrize(
    ("cluster", "passes"),
    [
        pytest.param(_gpu_cluster("gpu-node-1", "gpu-node-2"), True, id="every-node-ready"),
        pytest.param(_gpu_cluster("gpu-node-1", "gpu-node-2", allocatable=False), False, id="a-node-without-gpus"),
        pytest.param(_gpu_cluster("gpu-node-1", "gpu-node-2", available=0), False, id="operands-missing-on-a-node"),
        pytest.param(_gpu_cluster("gpu-node-1", "gpu-node-2", dead=("gpu-node-1",)), False, id="its-node-not-ready"),
        pytest.param(_gpu_cluster(), False, id="no-gpu-node"),
    ],
)
def test_the_gpu_gate_proves_every_gpu_node(dev_run: ProgramRun, cluster: Cluster, passes: bool) -> None:
    assert _run_gate(dev_run, "host-gpu-gate", cluster).passed == passes


WORKERS = ("gpu-node-203-0-113-21", "gpu-node-203-0-113-22")


@pytest.mark.parametrize(
    ("nodes", "unlabelled", "passes"),
    [
        pytest.param(("gpu-node-1", *WORKERS), (), True, id="every-machine-offers-gpus"),
        pytest.param(("gpu-node-1", WORKERS[0]), (), False, id="a-worker-not-seen-yet"),
        pytest.param(("gpu-node-1", *WORKERS), (WORKERS[1],), False, id="a-worker-not-labelled-yet"),
    ],
)
def test_the_gpu_gate_waits_for_every_machine_this_stack_built(
    nodes: tuple[str, ...], unlabelled: tuple[str, ...], passes: bool
) -> None:
    """The selector checks only what is labelled so far; each machine's node is waited for by name."""
    host = {
        "mode": "ssh",
        "address": "203.0.113.20",
        "workers": [{"address": "203.0.113.21"}, {"address": "203.0.113.22"}],
    }
    run = run_main({**dev_settings(), "host": host}, {"sshPrivateKey": FAKE_HOST_KEY})
    cluster = _gpu_cluster(*nodes)
    for node in unlabelled:
        cluster.nodes[node]["labels"] = {}
    assert _run_gate(run, "host-gpu-gate", cluster).passed == passes


def _ssh_with_workers(*workers: str) -> ProgramRun:
    host = {"mode": "ssh", "address": "203.0.113.20", "workers": [{"address": a} for a in workers]}
    return run_main({**dev_settings(), "host": host}, {"sshPrivateKey": FAKE_HOST_KEY})


def test_a_dead_worker_being_removed_does_not_hold_the_gpu_gate() -> None:
    """Its machine died, and it is no longer in config: its node is NotReady and its operand pods never available,
    until the `up` that removes it (deletes come last) gets that far."""
    run = _ssh_with_workers("203.0.113.21")
    cluster = _gpu_cluster("gpu-node-1", WORKERS[0], WORKERS[1], dead=(WORKERS[1],))
    assert _run_gate(run, "host-gpu-gate", cluster).passed


def test_a_dead_worker_still_in_config_holds_the_gpu_gate() -> None:
    """A machine the stack is to run on must be Ready with every operand: the gate does not pass around it."""
    run = _ssh_with_workers("203.0.113.21", "203.0.113.22")
    cluster = _gpu_cluster("gpu-node-1", *WORKERS, dead=(WORKERS[1],))
    assert not _run_gate(run, "host-gpu-gate", cluster).passed


def test_without_an_operator_of_ours_the_gpu_gate_checks_the_nodes_alone() -> None:
    versions = {k: v for k, v in dev_settings()["versions"].items() if k != "gpuOperator"}
    run = _run(gpuOperator={"mode": "skip"}, versions=versions)
    cluster = _gpu_cluster("gpu-node-1")
    cluster.objects.clear()
    assert _run_gate(run, "host-gpu-gate", cluster).passed
    assert all(call[0] == "wait" and ("nodes" in call or call[1].startswith("node/")) for call in cluster.calls)


# --- tenants --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("written", "passes"), [(True, True), (False, False)])
def test_the_kubeconfig_gate_waits_for_the_secret_the_control_plane_writes(
    dev_run: ProgramRun, written: bool, passes: bool
) -> None:
    cluster = Cluster(objects={"secret/vcluster-team-nlp/vc-team-nlp"} if written else set())
    assert _run_gate(dev_run, "team-nlp-ready", cluster).passed == passes


# --- every container ------------------------------------------------------------------------------


def _containers(registration: Registration) -> list[dict[str, Any]]:
    spec = registration.inputs.get("spec") or {}
    pod = spec.get("template", {}).get("spec", spec)
    return [*pod.get("initContainers", []), *pod.get("containers", []), *pod.get("ephemeralContainers", [])]


def unshipped_programs(container: dict[str, Any]) -> list[str]:
    """What a container would run that its image does not ship; images not in IMAGE_PROGRAMS are unknown."""
    image = container["image"].split("@")[0].rsplit(":", 1)[0]
    programs = IMAGE_PROGRAMS.get(image)
    if programs is None:
        return [f"{image} (an image whose contents config/upstream.py does not record)"]
    command = container.get("command") or []
    if not command:
        return ["the image's entrypoint, which is not recorded either"]
    return [] if command[0] in programs else [command[0]]


@pytest.fixture(scope="module")
def every_mode() -> list[ProgramRun]:
    config = dev_settings()
    config["tenants"][0]["addons"] = [
        {"name": "x", "manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}]}
    ]
    ssh = {**config, "host": {"mode": "ssh", "address": "203.0.113.20"}}
    existing = {**config, "host": {"mode": "kubeconfig", "address": "203.0.113.30"}}
    return [
        run_main(config),
        run_main(ssh, {"sshPrivateKey": FAKE_HOST_KEY}),
        run_main(existing, {"kubeconfig": FAKE_KUBECONFIG}),
    ]


def test_every_container_runs_only_what_its_image_ships(every_mode: list[ProgramRun]) -> None:
    checked = 0
    for run in every_mode:
        for registration in run.registrations:
            if registration.type.removeprefix("kubernetes:").startswith(POD_KINDS):
                for container in _containers(registration):
                    checked += 1
                    assert not unshipped_programs(container), (registration.name, container)
    assert checked >= 10, "the walk must see the gates' containers"


@pytest.mark.parametrize(
    "container",
    [
        {"image": f"{KUBECTL_IMAGE}:v1.36.0", "command": ["/bin/bash", "/gate/ready.sh"]},
        {"image": f"{KUBECTL_IMAGE}:v1.36.0", "command": ["sh", "-c", "kubectl get nodes"]},
        {"image": f"{KUBECTL_IMAGE}:v1.36.0"},
        {"image": "nvcr.io/nvidia/cuda:13.0.1-base-ubuntu24.04", "command": ["nvidia-smi"]},
    ],
    ids=["bash-script", "sh-c", "entrypoint-unstated", "unrecorded-image"],
)
def test_a_program_the_image_does_not_ship_is_caught(container: dict[str, Any]) -> None:
    assert unshipped_programs(container)


# --- the Gate component -----------------------------------------------------------------------------


def _standalone_gate(**overrides: Any) -> ProgramRun:
    def build() -> None:
        provider = k8s.Provider("elsewhere", kubeconfig="unused")
        before = k8s.core.v1.ConfigMap("before", opts=pulumi.ResourceOptions(provider=provider))
        args = GateArgs(
            object_name="probe-gate",
            namespace="gates",
            steps=(GateStep("wait", ("wait", "--for=create", "node/x")),),
            kubectl_version="v1.36.0",
            timeout_seconds=60,
            grants=(Grant(key="nodes", rules=({"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},)),),
            files={"probe.yaml": "kind: Queue\n"},
            after=[before],
        )
        Gate("probe", dataclasses.replace(args, **overrides), opts=pulumi.ResourceOptions(provider=provider))

    return run_pulumi(build)


def test_a_gate_owns_its_account_access_files_and_job_on_the_provider_it_is_given() -> None:
    run = _standalone_gate()
    gate = run.one("gpu-tenancy:index:Gate", "probe")
    provider = run.one("pulumi:providers:kubernetes", "elsewhere")
    children = [r for r in run.registrations if r.parent == gate.urn]
    assert sorted(r.type.rsplit(":", 1)[-1] for r in children) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Job",
        "ServiceAccount",
    ]
    assert all(r.provider.startswith(provider.urn) for r in children)
    job = run.one(JOB, "probe")
    waits_for = {r.name for r in run.registrations if r.urn in job.dependencies}
    assert waits_for == {"probe", "probe-nodes", "before"}, "account, files, binding and what it comes after"


def test_a_gate_runs_as_an_existing_account_or_its_own_never_both() -> None:
    with pytest.raises(Exception, match="existing account or is granted its own"):
        _standalone_gate(service_account="someone")

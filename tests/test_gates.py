"""Readiness gates, each Job as the program registers it, run in the lab: what they prove, and that they run at all.

The gate's account, RBAC, files and Job go to a lab of this module's own (tests/lab_gates.py);
the real Job controller runs its pods, the lab's kubelet their steps with the real kubectl.
Each test builds the world the gate looks at: KAI's Config and operand Deployments, GPU nodes
and the operator's DaemonSets, the Secret a vCluster writes, a webhook that refuses.
"""

import base64
import dataclasses
import functools
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from components.shared.gate import Gate, GateArgs, Grant
from components.shared.gate_pod import GateStep
from config.upstream import GPU_OPERATOR_DAEMONSETS, IMAGE_PROGRAMS, KUBECTL_IMAGE
from harness import FAKE_HOST_KEY, ProgramRun, Registration, dev_settings, run_main, run_pulumi
from harness.lab import pki as lab_pki
from harness.lab.cluster import wait_for
from harness.lab.processes import free_port
from harness.lab.stages import FAKE_NODE_ANNOTATION
from tests.conftest import FAKE_KUBECONFIG, queue_schema_errors
from tests.lab import Lab, ensure_namespace, private_lab
from tests.lab_gates import job_manifest, run_gate
from tests.stacks import releases

JOB = "kubernetes:batch/v1:Job"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
QUEUE = "kubernetes:scheduling.run.ai/v2:Queue"
OPERATOR_NAMESPACE = "gpu-operator-resources"
POD_KINDS = ("batch/v1:Job", "core/v1:Pod", "apps/v1:Deployment", "apps/v1:DaemonSet", "apps/v1:StatefulSet")
Json = dict[str, Any]


def _run(**changes: Any) -> ProgramRun:
    config = dev_settings()
    config.update(changes)
    return run_main(config)


@pytest.fixture(scope="module")
def dev_run() -> ProgramRun:
    return _run()


@pytest.fixture(scope="module")
def gates() -> Iterator[Lab]:
    """A lab of this module's own, its own GPU nodes unlabelled: each test brings the GPU nodes it needs."""
    with private_lab("gates") as lab:
        for node in lab.admin.list("v1", "Node", selector="nvidia.com/gpu.present=true"):
            unlabelled = {"apiVersion": "v1", "kind": "Node", "metadata": node["metadata"]}
            lab.admin.patch(unlabelled, {"metadata": {"labels": {"nvidia.com/gpu.present": None}}})
        yield lab


def _gate(run: ProgramRun, name: str) -> tuple[dict[str, Any], dict[str, str]]:
    job = run.one(JOB, name)
    files = [r for r in run.of_type(CONFIG_MAP) if r.name == name]
    return job.inputs["spec"], (files[0].inputs["data"] if files else {})


# --- KAI ------------------------------------------------------------------------------------------

KAI_NAMESPACE = "kai-scheduler"
KAI_OPERANDS = (
    "binder",
    "admission",
    "pod-grouper",
    "queue-controller",
    "podgroup-controller",
    "kai-scheduler-default",
)


class _Kai:
    """What KAI's operator leaves (pkg/operator/operands @v0.16.8): kai-config Ready, its operands' Deployments
    (the scheduler's, kai-scheduler-default, from the shard); `rolling` never finish rolling out."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab

    def build(
        self, *, ready: bool = True, operands: tuple[str, ...] = KAI_OPERANDS, rolling: tuple[str, ...] = ()
    ) -> None:
        admin = self.lab.admin
        ensure_namespace(self.lab, KAI_NAMESPACE)
        for deployment in admin.list("apps/v1", "Deployment", KAI_NAMESPACE):
            admin.delete("apps/v1", "Deployment", deployment["metadata"]["name"], KAI_NAMESPACE)
        config = {"apiVersion": "kai.scheduler/v1", "kind": "Config", "metadata": {"name": "kai-config"}}
        admin.apply(config)
        condition = {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": "lab",
            "message": "",
            "lastTransitionTime": "2026-12-01T00:00:00Z",
        }
        admin.patch(config, {"status": {"conditions": [condition]}}, subresource="status")
        for name in operands:
            labels = {"app": name, "app.kubernetes.io/managed-by": "kai-operator"}
            pod: Json = {"containers": [{"name": name, "image": f"ghcr.io/kai-scheduler/kai-scheduler/{name}:v0.16.8"}]}
            if name in rolling:
                pod["nodeSelector"] = {"lab.gpu-tenancy.dev/nowhere": "true"}
            admin.apply(
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {"name": name, "namespace": KAI_NAMESPACE, "labels": labels},
                    "spec": {
                        "selector": {"matchLabels": {"app": name}},
                        "template": {"metadata": {"labels": labels}, "spec": pod},
                    },
                }
            )


@pytest.fixture
def kai(gates: Lab) -> _Kai:
    return _Kai(gates)


class _Refuser(BaseHTTPRequestHandler):
    """KAI's Queue webhook before it serves: refuses the first `refusals` dry runs, then admits."""

    refusals = 0
    seen = 0

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen += 1
        allowed = type(self).seen > type(self).refusals
        response = {"uid": review["request"]["uid"], "allowed": allowed}
        if not allowed:
            response["status"] = {"code": 503, "message": "KAI's webhook is not serving yet"}
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def queue_webhook(gates: Lab) -> Iterator[type[_Refuser]]:
    """A Queue webhook served from this test, at the lab's bridge address, as KAI's binder serves its own."""
    handler = type("Refuser", (_Refuser,), {"refusals": 0, "seen": 0})
    authority = lab_pki.Authority.create()
    certificate, key = authority.issue(lab_pki.subject("queues.lab-gates.svc"), server_names=("queues.lab-gates.svc",))
    folder = gates.state / "queue-webhook"
    folder.mkdir(exist_ok=True)
    (folder / "tls.crt").write_bytes(certificate)
    (folder / "tls.key").write_bytes(key)
    port = free_port()
    server = ThreadingHTTPServer((gates.gateway, port), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "tls.crt", folder / "tls.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    admin = gates.admin
    ensure_namespace(gates, "lab-gates")
    admin.apply(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "queues", "namespace": "lab-gates"},
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]},
        }
    )
    admin.apply(
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": "queues",
                "namespace": "lab-gates",
                "labels": {"kubernetes.io/service-name": "queues"},
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": [gates.gateway]}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        }
    )
    webhook = {
        "name": "queues.lab-gates.gpu-tenancy.dev",
        "clientConfig": {
            "service": {"name": "queues", "namespace": "lab-gates", "port": 443},
            "caBundle": base64.b64encode(authority.certificate_pem).decode(),
        },
        "rules": [
            {
                "apiGroups": ["scheduling.run.ai"],
                "apiVersions": ["*"],
                "operations": ["CREATE"],
                "resources": ["queues"],
            }
        ],
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
    }
    configuration = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "lab-gates-queues"},
        "webhooks": [webhook],
    }
    admin.apply(configuration)
    try:
        yield handler
    finally:
        admin.delete("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "lab-gates-queues")
        server.shutdown()


@pytest.mark.parametrize("refusals", [0, 1])
def test_kai_gate_waits_for_the_operator_then_retries_until_the_webhook_admits(
    gates: Lab, dev_run: ProgramRun, kai: _Kai, queue_webhook: type[_Refuser], refusals: int
) -> None:
    kai.build()
    queue_webhook.refusals = refusals
    outcome = run_gate(gates, dev_run, "kai-gate", backoff_limit=None)
    assert outcome.passed, outcome
    assert len(outcome.failed_pods) == refusals
    for failed in outcome.failed_pods:
        (probe,) = [step for step in failed.steps if step.name == "queue-admitted"]
        assert probe.exit_code == 1
        assert "KAI's webhook is not serving yet" in probe.log
    # Each pod runs every step from the first, in order.
    last = outcome.pods[-1]
    assert [step.name for step in last.steps] == [
        "config-created",
        "config-ready",
        "scheduler-created",
        "operands-rolled-out",
        "queue-admitted",
    ]
    assert all(step.exit_code == 0 for step in last.steps)


KAI_NOT_YET: dict[str, tuple[dict[str, Any], str]] = {
    # Config Ready can hold while the scheduler's Deployment (not the Config's operand) still rolls out.
    "after-an-upgrade-until-every-operand-has-rolled-out": ({"rolling": ("kai-scheduler-default",)}, "queue-admitted"),
    # Until the operator has made the default shard's scheduler, no rollout status can vouch for it.
    "until-the-shards-scheduler-exists": (
        {"operands": tuple(o for o in KAI_OPERANDS if o != "kai-scheduler-default")},
        "operands-rolled-out",
    ),
}


@pytest.mark.parametrize("case", KAI_NOT_YET)
def test_kai_gate_waits_for_its_operands(
    gates: Lab, dev_run: ProgramRun, kai: _Kai, queue_webhook: type[_Refuser], case: str
) -> None:
    shape, never_ran = KAI_NOT_YET[case]
    kai.build(**shape)
    before = run_gate(gates, dev_run, "kai-gate")
    assert not before.passed
    assert not before.ran(never_ran), f"{never_ran} ran before what it vouches for was there"
    kai.build()
    assert run_gate(gates, dev_run, "kai-gate").passed


def test_kai_gate_never_probes_when_kai_never_reports_ready(
    gates: Lab, dev_run: ProgramRun, kai: _Kai, queue_webhook: type[_Refuser]
) -> None:
    kai.build(ready=False)
    outcome = run_gate(gates, dev_run, "kai-gate")
    assert not outcome.passed
    assert not outcome.ran("queue-admitted")
    assert queue_webhook.seen == 0


def test_kai_gate_gives_up_when_the_webhook_never_answers(
    gates: Lab, dev_run: ProgramRun, kai: _Kai, queue_webhook: type[_Refuser]
) -> None:
    kai.build()
    queue_webhook.refusals = 10**6
    outcome = run_gate(gates, dev_run, "kai-gate", backoff_limit=1)
    assert not outcome.passed
    assert len(outcome.failed_pods) == 2, "backoffLimit + 1 pods, each refused"


def _empty(lab: Lab) -> None:
    """Nothing any gate waits for: no KAI, no GPU node, no operator, no tenant Secret."""
    for name in ("kai-config",):
        lab.admin.delete("kai.scheduler/v1", "Config", name)
    _nodes(lab, {})
    lab.admin.delete("v1", "Secret", "vc-team-nlp", "vcluster-team-nlp")


@pytest.mark.parametrize("gate", ["kai-gate", "host-gpu-gate", "team-nlp-ready"])
def test_a_failed_gate_keeps_every_failed_pod_and_what_its_step_said(
    gates: Lab, dev_run: ProgramRun, gate: str
) -> None:
    """`kubectl logs job/<gate>` must have something to show at 3 a.m."""
    spec = dev_run.one(JOB, gate).inputs["spec"]
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    _empty(gates)
    _tenant_account(gates)
    outcome = run_gate(gates, dev_run, gate, backoff_limit=1)
    assert not outcome.passed
    assert len(outcome.failed_pods) == 2
    for pod in outcome.failed_pods:
        (failing,) = [step for step in pod.steps if step.exit_code not in (None, 0)]
        assert "error" in failing.log.lower(), failing


def test_with_on_failure_a_failed_gate_would_leave_nothing_to_read(gates: Lab, dev_run: ProgramRun) -> None:
    """Why Never: the Job controller deletes its active pods when it fails, the restarting one included."""
    _empty(gates)
    outcome = run_gate(gates, dev_run, "kai-gate", backoff_limit=1, restart_policy="OnFailure")
    assert not outcome.passed
    assert wait_for(lambda: not gates.admin.list("v1", "Pod", KAI_NAMESPACE, selector="job-name=kai-gate"), 60)


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


def _nodes(lab: Lab, nodes: dict[str, Json]) -> None:
    """GPU nodes as the operator leaves them, by name: {name: {"allocatable": bool, "dead": bool}}; any other
    node the test made before goes. A live node is KWOK's (Ready); a dead one keeps its labels and allocatable GPUs
    (the API server still holds what it last reported) but is not Ready, and no kubelet runs its pods."""
    admin = lab.admin
    for node in admin.list("v1", "Node", selector="lab.gpu-tenancy.dev/test-node=true"):
        admin.delete("v1", "Node", node["metadata"]["name"])
    assert wait_for(lambda: not admin.list("v1", "Node", selector="lab.gpu-tenancy.dev/test-node=true"), 30)
    for name, shape in nodes.items():
        annotations = {} if shape.get("dead") else {FAKE_NODE_ANNOTATION: "fake"}
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "nvidia.com/gpu.present": "true",
                    "lab.gpu-tenancy.dev/test-node": "true",
                    "kubernetes.io/hostname": name,
                },
                "annotations": annotations,
            },
        }
        gpus = {"nvidia.com/gpu": "1"} if shape.get("allocatable", True) else {}
        capacity = {"cpu": "16", "memory": "64Gi", "pods": "110", **gpus}
        status: Json = {"capacity": capacity, "allocatable": capacity}
        admin.create({**node, "status": status})
        if shape.get("dead"):
            status["conditions"] = [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "NodeStatusUnknown",
                    "message": "the machine died",
                    "lastHeartbeatTime": "2026-12-01T00:00:00Z",
                    "lastTransitionTime": "2026-12-01T00:00:00Z",
                }
            ]
        admin.patch(node, {"status": status}, subresource="status")
    for name, shape in nodes.items():
        if not shape.get("dead"):
            assert wait_for(functools.partial(_node_ready, lab, name), 60), name


def _node_ready(lab: Lab, name: str) -> bool:
    node = lab.admin.get("v1", "Node", name)
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions") or [])


def _operator(lab: Lab, *, available: bool = True) -> None:
    """The operator's DaemonSets on every GPU node (assets/state-*/0500_daemonset.yaml @v26.3.3 names them); with
    `available=False` their pods never turn Ready (a container that exits, restarted for ever)."""
    ensure_namespace(lab, OPERATOR_NAMESPACE)
    # A DaemonSet of the last test's goes first, with its pods: a rolling update would leave old pods behind.
    for name in GPU_OPERATOR_DAEMONSETS:
        lab.admin.delete("apps/v1", "DaemonSet", name, OPERATOR_NAMESPACE)

    def gone() -> bool:
        """A pod the DaemonSet made just before it went is collected with its own grace period (30 s, and a dead
        node's never ends): each round deletes what is left at once."""
        left = lab.admin.list("v1", "Pod", OPERATOR_NAMESPACE)
        for pod in left:
            lab.admin.delete("v1", "Pod", pod["metadata"]["name"], OPERATOR_NAMESPACE, grace_seconds=0)
        return not left

    assert wait_for(gone, 60, 0.5)
    for name in GPU_OPERATOR_DAEMONSETS:
        container: Json = {"name": name, "image": f"nvcr.io/nvidia/{name}:v26.3.3"}
        if not available:
            # Runs (the lab runs kubectl's image) and never turns Ready: nothing answers its readiness probe.
            container = {
                "name": name,
                "image": f"{KUBECTL_IMAGE}:v1.36.0",
                "command": ["/bin/kubectl"],
                "args": ["wait", "--for=delete", "namespace/kube-system", "--timeout=3600s"],
                "readinessProbe": {"tcpSocket": {"port": 1}, "periodSeconds": 1},
            }
        lab.admin.apply(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": name, "namespace": OPERATOR_NAMESPACE},
                "spec": {
                    "selector": {"matchLabels": {"app": name}},
                    "template": {
                        "metadata": {"labels": {"app": name}},
                        "spec": {"nodeSelector": {"nvidia.com/gpu.present": "true"}, "containers": [container]},
                    },
                },
            }
        )


def _gpu_world(
    lab: Lab, *names: str, allocatable: bool = True, available: bool = True, dead: tuple[str, ...] = ()
) -> None:
    shapes = {name: {"allocatable": allocatable or index > 0, "dead": name in dead} for index, name in enumerate(names)}
    _nodes(lab, shapes)
    _operator(lab, available=available)
    live = len([name for name in names if name not in dead])
    # The world settles before the gate looks (its waits are shortened to seconds).
    for name in GPU_OPERATOR_DAEMONSETS:
        if available and live:
            assert wait_for(functools.partial(_all_ready, lab, name, live), 60), name


def _all_ready(lab: Lab, name: str, count: int) -> bool:
    return _ready(lab, name) == count


def _ready(lab: Lab, name: str) -> int:
    pods = lab.admin.list("v1", "Pod", OPERATOR_NAMESPACE, selector=f"app={name}")
    return len(
        [
            p
            for p in pods
            if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])
        ]
    )


def test_the_gpu_gate_asks_for_no_gpu_so_it_passes_when_every_gpu_is_taken(gates: Lab, dev_run: ProgramRun) -> None:
    pod = dev_run.one(JOB, "host-gpu-gate").inputs["spec"]["template"]["spec"]
    for container in [*pod["initContainers"], *pod["containers"]]:
        resources = container.get("resources", {})
        asked = {**resources.get("requests", {}), **resources.get("limits", {})}
        assert not [r for r in asked if r.startswith("nvidia.com/")], container["name"]
    assert "nodeSelector" not in pod, "the gate may run on any node"
    assert "affinity" not in pod, "the gate may run on any node"
    _gpu_world(gates, "gpu-node-1")
    assert run_gate(gates, dev_run, "host-gpu-gate").passed


GPU_WORLDS: dict[str, tuple[dict[str, Any], bool]] = {
    "every-node-ready": ({"names": ("gpu-node-1", "gpu-node-2")}, True),
    "a-node-without-gpus": ({"names": ("gpu-node-1", "gpu-node-2"), "allocatable": False}, False),
    "operands-missing-on-a-node": ({"names": ("gpu-node-1", "gpu-node-2"), "available": False}, False),
    "its-node-not-ready": ({"names": ("gpu-node-1", "gpu-node-2"), "dead": ("gpu-node-1",)}, False),
    "no-gpu-node": ({"names": ()}, False),
}


@pytest.mark.parametrize("world", GPU_WORLDS)
def test_the_gpu_gate_proves_every_gpu_node(gates: Lab, dev_run: ProgramRun, world: str) -> None:
    shape, passes = GPU_WORLDS[world]
    _gpu_world(gates, *shape["names"], **{k: v for k, v in shape.items() if k != "names"})
    assert run_gate(gates, dev_run, "host-gpu-gate").passed == passes


WORKERS = ("gpu-node-203-0-113-21", "gpu-node-203-0-113-22")


def _ssh_with_workers(*workers: str) -> ProgramRun:
    host = {"mode": "ssh", "address": "203.0.113.20", "workers": [{"address": a} for a in workers]}
    return run_main({**dev_settings(), "host": host}, {"sshPrivateKey": FAKE_HOST_KEY})


@pytest.mark.parametrize(
    ("nodes", "unlabelled", "passes"),
    [
        pytest.param(("gpu-node-1", *WORKERS), (), True, id="every-machine-offers-gpus"),
        pytest.param(("gpu-node-1", WORKERS[0]), (), False, id="a-worker-not-seen-yet"),
        pytest.param(("gpu-node-1", *WORKERS), (WORKERS[1],), False, id="a-worker-not-labelled-yet"),
    ],
)
def test_the_gpu_gate_waits_for_every_machine_this_stack_built(
    gates: Lab, nodes: tuple[str, ...], unlabelled: tuple[str, ...], passes: bool
) -> None:
    """The selector checks only what is labelled so far; each machine's node is waited for by name."""
    run = _ssh_with_workers(*(f"203.0.113.{n}" for n in (21, 22)))
    _gpu_world(gates, *nodes)
    for node in unlabelled:
        gates.admin.patch(
            gates.admin.get("v1", "Node", node), {"metadata": {"labels": {"nvidia.com/gpu.present": None}}}
        )
    assert run_gate(gates, run, "host-gpu-gate").passed == passes


def test_a_dead_worker_being_removed_does_not_hold_the_gpu_gate(gates: Lab) -> None:
    """Its machine died, and it is no longer in config: its node is NotReady and its operand pods never available,
    until the `up` that removes it (deletes come last) gets that far."""
    _gpu_world(gates, "gpu-node-1", *WORKERS, dead=(WORKERS[1],))
    assert run_gate(gates, _ssh_with_workers("203.0.113.21"), "host-gpu-gate").passed


def test_a_dead_worker_still_in_config_holds_the_gpu_gate(gates: Lab) -> None:
    """A machine the stack is to run on must be Ready with every operand: the gate does not pass around it."""
    _gpu_world(gates, "gpu-node-1", *WORKERS, dead=(WORKERS[1],))
    assert not run_gate(gates, _ssh_with_workers("203.0.113.21", "203.0.113.22"), "host-gpu-gate").passed


def test_without_an_operator_of_ours_the_gpu_gate_checks_the_nodes_alone(gates: Lab) -> None:
    versions = {k: v for k, v in dev_settings()["versions"].items() if k != "gpuOperator"}
    run = _run(gpuOperator={"mode": "skip"}, versions=versions)
    _nodes(gates, {"gpu-node-1": {}})
    for name in GPU_OPERATOR_DAEMONSETS:
        gates.admin.delete("apps/v1", "DaemonSet", name, OPERATOR_NAMESPACE)
    outcome = run_gate(gates, run, "host-gpu-gate")
    assert outcome.passed
    steps = [step.name for step in outcome.pods[-1].steps]
    assert not [step for step in steps if "operand" in step or "validator" in step], steps


# --- tenants --------------------------------------------------------------------------------------


def _tenant_account(lab: Lab) -> None:
    """team-nlp's control-plane account and its Role, as its vCluster release renders them: the kubeconfig gate
    runs as that account."""
    ensure_namespace(lab, "vcluster-team-nlp")
    (release,) = [r for r in releases("brev") if r.name == "team-nlp"]
    for obj in release.render():
        if obj["kind"] in ("ServiceAccount", "Role", "RoleBinding"):
            obj["metadata"]["namespace"] = "vcluster-team-nlp"
            lab.admin.apply(obj)


@pytest.mark.parametrize(("written", "passes"), [(True, True), (False, False)])
def test_the_kubeconfig_gate_waits_for_the_secret_the_control_plane_writes(
    gates: Lab, dev_run: ProgramRun, written: bool, passes: bool
) -> None:
    _tenant_account(gates)
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "vc-team-nlp", "namespace": "vcluster-team-nlp"},
    }
    if written:
        gates.admin.apply({**secret, "data": {"config": base64.b64encode(b"apiVersion: v1").decode()}})
    else:
        gates.admin.delete("v1", "Secret", "vc-team-nlp", "vcluster-team-nlp")
    assert run_gate(gates, dev_run, "team-nlp-ready").passed == passes


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


def test_a_manifest_made_from_a_shared_run_leaves_that_run_as_it_was() -> None:
    """The lab's gate runs shorten a Job's deadline, retries and waits in the manifest they apply. The run they read
    is the session's shared one (run_main's cache), which the engine-rule tests plan from afterwards: changed in
    place, every gate looked edited and was planned as replaced, in whichever worker ran the lab gates first."""
    run = run_main(dev_settings())
    job = run.one("kubernetes:batch/v1:Job", "host-gpu-gate")
    before = json.dumps(job.inputs, sort_keys=True)
    applied = job_manifest(job, backoff_limit=0, restart_policy="OnFailure")
    assert applied["spec"]["backoffLimit"] == 0
    assert (
        json.dumps(run_main(dev_settings()).one("kubernetes:batch/v1:Job", "host-gpu-gate").inputs, sort_keys=True)
        == before
    )

"""The GPU gate's steps and access, and how a GPU node's facts are read back.

The gate proves, with node-level evidence only, that every GPU node offers its
GPUs to the scheduler: each node labelled nvidia.com/gpu.present advertises
allocatable nvidia.com/gpu (the device plugin registered there), and, where this
stack installs or adopts the operator, its toolkit, device plugin and validator
DaemonSets are available on every node they target. It asks for no GPU itself,
so it also passes, and can run again, on a host whose GPUs are all taken, for
example by KAI's reservation pods. Running a GPU workload is a real-host check
(docs/operations.md).
"""

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi

from components.shared.gate import Grant
from components.shared.gate_pod import GateStep
from config.upstream import GFD_LABELS, GPU_NODE_LABEL, GPU_OPERATOR_DAEMONSETS, GPU_RESOURCE

VALIDATOR = GPU_OPERATOR_DAEMONSETS[-1]
"""The validator DaemonSet; the operator labels each operand's pods app=<its DaemonSet's name>."""

NODE_RULES = ({"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},)
DAEMONSET_RULES = (
    {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
)


def _jsonpath_key(key: str) -> str:
    """A map key in kubectl's JSONPath: dots escaped (client-go util/jsonpath @v0.36.0)."""
    return key.replace(".", "\\.")


def gpu_gate_steps(
    operator_namespace: str | None, timeout_seconds: int, nodes: Sequence[pulumi.Input[str]] = ()
) -> tuple[GateStep, ...]:
    """kubectl steps, in order; `operator_namespace` is None when this stack neither installs nor adopts one.

    `nodes` are the GPU machines this stack built (brev and ssh modes): the gate proves those, and only those,
    each by name, so a machine that died and is being removed (its node NotReady, its pods never available)
    cannot hold the `up` that removes it. Without them (kubeconfig mode) every GPU node is proved, through
    the selector and the operator's DaemonSets (docs/operations.md says how to take a dead node out).
    """
    timeout = f"--timeout={timeout_seconds}s"
    gpu_nodes = f"--selector={GPU_NODE_LABEL}=true"
    labelled = f"--for=jsonpath={{.metadata.labels.{_jsonpath_key(GPU_NODE_LABEL)}}}=true"
    allocatable = f"--for=jsonpath={{.status.allocatable.{_jsonpath_key(GPU_RESOURCE)}}}"
    named = [pulumi.Output.concat("node/", node) for node in nodes]
    steps = [
        # A selector that matches nothing yet is waited on with --for=create; the jsonpath wait would fail
        # at once ("no matching resources found"): kubernetes/kubectl pkg/cmd/wait/wait.go @v0.36.0.
        GateStep("gpu-node-labelled", ("wait", "--for=create", "nodes", gpu_nodes, timeout)),
        *(
            GateStep(f"gpu-node-{index}-labelled", ("wait", node, labelled, timeout))
            for index, node in enumerate(named)
        ),
    ]
    if named:
        steps += [
            GateStep("gpu-nodes-ready", ("wait", *named, "--for=condition=Ready", timeout)),
            GateStep("gpus-allocatable", ("wait", *named, allocatable, timeout)),
        ]
    else:
        # Without a value, --for=jsonpath waits until the key exists on every matching node.
        steps.append(GateStep("gpus-allocatable", ("wait", "nodes", gpu_nodes, allocatable, timeout)))
    if operator_namespace is not None:
        daemonsets = tuple(f"daemonset/{name}" for name in GPU_OPERATOR_DAEMONSETS)
        steps.append(
            GateStep("operands-created", ("wait", "--for=create", *daemonsets, "-n", operator_namespace, timeout))
        )
        steps += (
            _operands_on_nodes(operator_namespace, timeout, named)
            if named
            else _operands_rolled_out(operator_namespace, timeout)
        )
    return tuple(steps)


def _operands_rolled_out(namespace: str, timeout: str) -> list[GateStep]:
    """Every node a DaemonSet targets runs an updated, available pod (kubernetes/kubectl
    pkg/polymorphichelpers/rollout_status.go DaemonSetStatusViewer @v0.36.0)."""
    return [
        GateStep(
            name.removeprefix("nvidia-").removesuffix("-daemonset"),
            ("rollout", "status", f"daemonset/{name}", "-n", namespace, timeout),
        )
        for name in GPU_OPERATOR_DAEMONSETS
    ]


def _operands_on_nodes(namespace: str, timeout: str, named: Sequence[pulumi.Output[str]]) -> list[GateStep]:
    """On each machine of the stack: its validator pod exists, then every operand pod on it is Ready. The
    validator's pod is Ready once it checked the driver, the toolkit and the device plugin on its node."""
    operands = f"app in ({','.join(GPU_OPERATOR_DAEMONSETS)})"
    steps = []
    for index, node in enumerate(named):
        on_node = node.apply(lambda name: f"--field-selector=spec.nodeName={name.removeprefix('node/')}")
        steps += [
            GateStep(
                f"gpu-node-{index}-validator",
                ("wait", "--for=create", "pods", "-l", f"app={VALIDATOR}", on_node, "-n", namespace, timeout),
            ),
            GateStep(
                f"gpu-node-{index}-operands",
                ("wait", "pods", "-l", operands, on_node, "--for=condition=Ready", "-n", namespace, timeout),
            ),
        ]
    return steps


def gpu_gate_grants(operator_namespace: pulumi.Input[str] | None) -> tuple[Grant, ...]:
    grants = [Grant(key="nodes", rules=NODE_RULES)]
    if operator_namespace is not None:
        grants.append(Grant(key="operator", rules=DAEMONSET_RULES, namespace=operator_namespace))
    return tuple(grants)


def _number(text: Any) -> int | None:
    return int(text) if isinstance(text, str) and text.isdigit() else None


def gpu_node_facts(labels: Mapping[str, str] | None, allocatable: Mapping[str, str] | None) -> dict[str, Any]:
    """A GPU node as the cluster advertises it: GPU feature discovery's labels and allocatable GPUs.

    A label the cluster does not set (no feature discovery) reads as None, not as a guess.
    """
    labels = labels or {}
    return {
        "name": labels.get(GFD_LABELS["name"]),
        "memoryMiB": _number(labels.get(GFD_LABELS["memoryMiB"])),
        "driverVersion": labels.get(GFD_LABELS["driverVersion"]),
        "count": _number((allocatable or {}).get(GPU_RESOURCE)),
    }

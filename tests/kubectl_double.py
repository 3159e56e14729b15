"""A stand-in for the kubectl a gate pod runs, and for the kubelet that runs the pod.

The double accepts only the command forms the gates use, with kubectl's own
semantics as read in kubernetes/kubectl @v0.36.0 (see config/upstream.py):
`wait --for=create` waits for a named object or for a selector to match;
`wait --for=condition` and `--for=jsonpath` fail at once when a selector
matches nothing; `rollout status` fails on a missing DaemonSet and waits for
every desired pod to be available; a server-side dry run is refused until the
webhook serves. A wait that would time out fails; run_job models the kubelet and
the Job controller around it.
"""

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from config.upstream import IMAGE_PROGRAMS


class KubectlError(Exception):
    """kubectl exited 1."""


@dataclass
class Cluster:
    objects: set[str] = field(default_factory=set)
    """`kind/name` of cluster-scoped objects and `kind/namespace/name` of namespaced ones."""
    ready: set[str] = field(default_factory=set)
    """Objects whose Ready condition is True."""
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Node name -> {"labels": {...}, "allocatable": {...}}."""
    daemonsets: dict[str, tuple[int, int]] = field(default_factory=dict)
    """`namespace/name` -> (desiredNumberScheduled, numberAvailable)."""
    pods: list[dict[str, Any]] = field(default_factory=list)
    """{"namespace", "labels", "node", "ready"} of each pod."""
    deployments: dict[str, tuple[dict[str, str], bool]] = field(default_factory=dict)
    """`namespace/name` -> (labels, rolled out: generation observed, every replica updated and available)."""
    webhook_refusals: int = 0
    """Server-side dry runs the webhook refuses before it serves."""
    calls: list[list[str]] = field(default_factory=list)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubectl", exit_on_error=False, add_help=False)
    parser.add_argument("verb")
    parser.add_argument("targets", nargs="*")
    parser.add_argument("--for", dest="condition")
    parser.add_argument("--timeout")
    parser.add_argument("--selector", "-l")
    parser.add_argument("--field-selector", dest="field_selector")
    parser.add_argument("--namespace", "-n")
    parser.add_argument("--dry-run", dest="dry_run")
    parser.add_argument("-f", dest="file")
    parser.add_argument("-o", dest="output")
    return parser


def _matching_nodes(cluster: Cluster, selector: str) -> list[str]:
    key, _, value = selector.partition("=")
    return [name for name, node in cluster.nodes.items() if node["labels"].get(key) == value]


def _jsonpath_key(expression: str) -> tuple[str, str]:
    """`{.status.allocatable.nvidia\\.com/gpu}` -> ("allocatable", "nvidia.com/gpu"); labels likewise."""
    for field_name, prefix in (("allocatable", "{.status.allocatable."), ("labels", "{.metadata.labels.")):
        if expression.startswith(prefix) and expression.endswith("}"):
            return field_name, expression[len(prefix) : -1].replace("\\.", ".")
    raise ValueError(f"unsupported jsonpath {expression!r}")


def _node_has(node: Mapping[str, Any], condition: str) -> bool:
    """`jsonpath={...}` (the key exists) or `jsonpath={...}=value` (it has that value)."""
    expression = condition.removeprefix("jsonpath=")
    path, brace, wanted = expression.rpartition("}=")
    field_name, key = _jsonpath_key(path + brace[:1] if brace else expression)
    values: Mapping[str, str] = node[field_name]
    return key in values if not brace else values.get(key) == wanted


def kubectl(cluster: Cluster, args: list[str], files: Mapping[str, str]) -> None:
    """Run one kubectl command against the cluster; raise KubectlError where kubectl exits 1."""
    cluster.calls.append(args)
    parsed, unknown = _parser().parse_known_intermixed_args(args)
    if unknown:
        raise ValueError(f"the double does not know the arguments {unknown}")
    if parsed.timeout is not None and not parsed.timeout.endswith("s"):
        raise ValueError(f"unsupported timeout {parsed.timeout}")
    namespace = parsed.namespace
    if parsed.verb == "wait" and parsed.targets == ["pods"]:
        _wait_for_pods(cluster, parsed.condition, parsed.selector, parsed.field_selector, namespace)
    elif parsed.verb == "wait":
        _wait(cluster, parsed.condition, parsed.targets, parsed.selector, namespace)
    elif parsed.verb == "rollout" and parsed.targets[0] == "status":
        _rollout_status(cluster, parsed.targets[1:], parsed.selector, namespace)
    elif parsed.verb == "create" and parsed.dry_run == "server":
        path = PurePosixPath(parsed.file)
        if str(path.parent) != "/gate" or path.name not in files:
            raise KubectlError(f"the path {path} does not exist")
        if cluster.webhook_refusals > 0:
            cluster.webhook_refusals -= 1
            raise KubectlError('failed calling webhook "queue-validation.kai.scheduler": connection refused')
    else:
        raise ValueError(f"the double does not know `kubectl {' '.join(args)}`")


def _rollout_status(cluster: Cluster, targets: list[str], selector: str | None, namespace: str | None) -> None:
    if targets == ["deployment"] and selector:
        # Each matching Deployment in turn; none matching is "No resources found", exit 0
        # (kubernetes/kubectl pkg/cmd/rollout/rollout_status.go @v0.36.0).
        for key, (labels, rolled_out) in cluster.deployments.items():
            if key.startswith(f"{namespace}/") and _label_matches(selector, labels) and not rolled_out:
                raise KubectlError(f'deployment "{key}" exceeded its progress deadline')
        return
    for target in targets:
        kind, _, name = target.partition("/")
        if kind != "daemonset" or _object_key(target, namespace) not in cluster.objects:
            raise KubectlError(f"{target} not found")
        desired, available = cluster.daemonsets[f"{namespace}/{name}"]
        if available < desired:
            raise KubectlError("timed out waiting for the condition")


NAMESPACED = {"secret", "daemonset", "deployment"}


def _object_key(target: str, namespace: str | None) -> str:
    kind, _, name = target.partition("/")
    if kind in NAMESPACED:
        if namespace is None:
            raise ValueError(f"{target}: the gates name the namespace of what they wait for")
        return f"{kind}/{namespace}/{name}"
    return target


def _wait(cluster: Cluster, condition: str, targets: list[str], selector: str | None, namespace: str | None) -> None:
    if selector is not None:
        _wait_for_selected_nodes(cluster, condition, targets, selector)
        return
    if condition.startswith("jsonpath=") or (condition == "condition=Ready" and targets[0].startswith("node/")):
        _wait_for_named_nodes(cluster, condition, targets)
        return
    keys = [_object_key(target, namespace) for target in targets]
    if condition == "create":
        existing = cluster.objects | {f"deployment/{key}" for key in cluster.deployments}
        if not all(key in existing for key in keys):
            raise KubectlError("timed out waiting for the condition")
        return
    if condition.startswith("condition="):
        for key in keys:
            if key not in cluster.objects:
                raise KubectlError(f"{key} not found")
            if condition != "condition=Ready" or key not in cluster.ready:
                raise KubectlError("timed out waiting for the condition")
        return
    raise ValueError(f"unsupported --for={condition}")


def _wait_for_selected_nodes(cluster: Cluster, condition: str, targets: list[str], selector: str) -> None:
    if targets != ["nodes"]:
        raise ValueError("the gates select nodes only")
    matches = _matching_nodes(cluster, selector)
    if condition == "create":
        if not matches:
            raise KubectlError("timed out waiting for the condition")
        return
    if not matches:
        raise KubectlError("no matching resources found")
    if not all(_node_has(cluster.nodes[name], condition) for name in matches):
        raise KubectlError("timed out waiting for the condition")


def _label_matches(selector: str, labels: Mapping[str, str]) -> bool:
    """`key=value` or `key in (a,b)`: the two forms the gates use (apimachinery labels.Parse @v0.36.0)."""
    key, _, rest = selector.partition(" in (")
    if rest:
        return labels.get(key.strip()) in rest.rstrip(")").split(",")
    key, _, value = selector.partition("=")
    return labels.get(key) == value


def _wait_for_pods(
    cluster: Cluster, condition: str, selector: str | None, field_selector: str | None, namespace: str | None
) -> None:
    if selector is None or namespace is None:
        raise ValueError("the gates wait for pods by label, in a namespace")
    node = (field_selector or "").removeprefix("spec.nodeName=") or None
    matches = [
        pod
        for pod in cluster.pods
        if pod["namespace"] == namespace
        and _label_matches(selector, pod["labels"])
        and (node is None or pod["node"] == node)
    ]
    if condition == "create":
        if not matches:
            raise KubectlError("timed out waiting for the condition")
        return
    if not matches:
        raise KubectlError("no matching resources found")
    if condition != "condition=Ready" or not all(pod["ready"] for pod in matches):
        raise KubectlError("timed out waiting for the condition")


def _wait_for_named_nodes(cluster: Cluster, condition: str, targets: list[str]) -> None:
    for target in targets:
        kind, _, name = target.partition("/")
        if kind != "node":
            raise ValueError("the gates wait on named nodes only with jsonpath")
        if name not in cluster.nodes:
            # A named object must exist: only --for=create waits for one (kubernetes/kubectl
            # pkg/cmd/wait/wait.go RunWaitContext @v0.36.0).
            raise KubectlError(f'nodes "{name}" not found')
        node = cluster.nodes[name]
        met = node.get("ready", True) if condition == "condition=Ready" else _node_has(node, condition)
        if not met:
            raise KubectlError("timed out waiting for the condition")


@dataclass
class Outcome:
    passed: bool
    failed_pods: list[str]
    """The pods the Job kept after they failed, each with what its failed step printed (`kubectl logs`)."""

    @property
    def retries(self) -> int:
        return len(self.failed_pods)


def run_job(job_spec: Mapping[str, Any], cluster: Cluster, files: Mapping[str, str]) -> Outcome:
    """The kubelet and the Job controller (kubernetes/kubernetes pkg/controller/job/job_controller.go @v1.36.0).

    restartPolicy Never: a failed step fails its pod, which is kept with its logs, and the Job starts a new pod
    (every step again, from the first) until more pods failed than backoffLimit allows.
    restartPolicy OnFailure: the kubelet restarts the failed step in the same pod, and the Job counts restarts;
    once past backoffLimit the Job fails and deletes its active pods, that pod included: nothing is kept.
    """
    pod = job_spec["template"]["spec"]
    containers = [*pod.get("initContainers", []), *pod["containers"]]
    for container in containers:
        programs = IMAGE_PROGRAMS[container["image"].rsplit(":", 1)[0]]
        assert container["command"][0] in programs, container
    if pod["restartPolicy"] == "OnFailure":
        restarts = 0
        for container in containers:
            while True:
                try:
                    kubectl(cluster, list(container["args"]), files)
                    break
                except KubectlError:
                    restarts += 1
                    if restarts > job_spec["backoffLimit"]:
                        return Outcome(passed=False, failed_pods=[])
        return Outcome(passed=True, failed_pods=[])
    assert pod["restartPolicy"] == "Never"
    failed: list[str] = []
    while len(failed) <= job_spec["backoffLimit"]:
        try:
            for container in containers:
                kubectl(cluster, list(container["args"]), files)
            return Outcome(passed=True, failed_pods=failed)
        except KubectlError as error:
            failed.append(str(error))
    return Outcome(passed=False, failed_pods=failed)

"""A gate's pod: its kubectl steps run in order, each in its own locked-down container.

Why only kubectl: the image holds nothing else (see upstream.KUBECTL_IMAGE). Each
step is one kubectl command in its own container, the steps run in order as init
containers (the last as the main container). A failed step fails its pod
(restartPolicy Never), and the Job starts a new pod after its back-off, up to
backoffLimit failed pods (kubernetes/api batch/v1/types.go @v0.36.0). Every failed
pod is kept, with its logs: with OnFailure the failing pod would be the Job's one
active pod, and a Job that fails deletes its active pods
(kubernetes/kubernetes pkg/controller/job/job_controller.go, deleteActivePods @v1.36.0),
so `kubectl logs` would find nothing.
"""

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from config.upstream import KUBECTL, KUBECTL_IMAGE

MOUNT_PATH = "/gate"
NON_ROOT_UID = 65532
LOCKED_DOWN: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
RETRIES = 6
"""Failed pods the Job replaces before it fails: its back-off (10 s, doubling, at most 6 min) spans minutes."""


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"a gate can only vouch for plain data, not {value!r}")


def fingerprint(vouches_for: Any) -> str:
    """A short digest of what a gate vouches for; a new value replaces the Job, so the gate runs again."""
    canonical = json.dumps(vouches_for, sort_keys=True, default=_plain)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class GateStep:
    """One kubectl invocation (arguments after `kubectl`); the gate passes once every step succeeded, in order."""

    name: str
    args: tuple[pulumi.Input[str], ...]


def step_container(step: GateStep, *, kubectl_version: str, with_files: bool) -> dict[str, Any]:
    mounts: list[dict[str, Any]] = [{"name": "tmp", "mountPath": "/tmp"}]
    if with_files:
        mounts.append({"name": "gate", "mountPath": MOUNT_PATH, "readOnly": True})
    return {
        "name": step.name,
        "image": f"{KUBECTL_IMAGE}:{kubectl_version}",
        "command": [KUBECTL],
        "args": list(step.args),
        # kubectl caches discovery under $HOME; the root filesystem is read-only.
        "env": [{"name": "HOME", "value": "/tmp"}],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
        "securityContext": LOCKED_DOWN,
        "volumeMounts": mounts,
    }


def gate_pod(
    steps: Sequence[GateStep],
    *,
    kubectl_version: str,
    service_account: str,
    files_config_map: str | None = None,
) -> dict[str, Any]:
    """A non-root pod running the steps in order; the gate's files, if any, are mounted at /gate."""
    if not steps:
        raise ValueError("a gate needs at least one step")
    with_files = files_config_map is not None
    containers = [step_container(s, kubectl_version=kubectl_version, with_files=with_files) for s in steps]
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {}}]
    if with_files:
        volumes.append({"name": "gate", "configMap": {"name": files_config_map}})
    return {
        "serviceAccountName": service_account,
        "restartPolicy": "Never",
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": NON_ROOT_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "initContainers": containers[:-1],
        "containers": containers[-1:],
        "volumes": volumes,
    }

"""Readiness gates: a Job of kubectl steps that Pulumi awaits, with just the access those steps need.

Why a Job: pulumi-kubernetes awaits a batch/v1 Job until it completes and fails
the update on BackoffLimitExceeded or DeadlineExceeded (pulumi/pulumi-kubernetes
provider/pkg/await/job.go, checker/job/check.go @v4.32.0), so whatever depends on
the Job starts only once every step has succeeded.

Why only kubectl: the image holds nothing else (see upstream.KUBECTL_IMAGE). Each
step is one kubectl command in its own container, the steps run in order as init
containers (the last as the main container), and a failed step is retried by the
kubelet (restartPolicy OnFailure) with its back-off. The Job's backoffLimit counts
those restarts and activeDeadlineSeconds bounds the whole gate
(kubernetes/api batch/v1/types.go @v0.36.0).
"""

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.shared.labels import MANAGED_BY
from config.upstream import KUBECTL, KUBECTL_IMAGE

MOUNT_PATH = "/gate"
RBAC_GROUP = "rbac.authorization.k8s.io"
NON_ROOT_UID = 65532
LOCKED_DOWN: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
RETRIES = 6
"""Failed steps the kubelet may restart before the Job fails: its back-off (10 s, doubling) spans minutes."""


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


@dataclass(frozen=True)
class Grant:
    """RBAC rules for the gate's ServiceAccount: in one namespace, or cluster-wide when `namespace` is None.

    `key` names the Role and its binding among the gate's resources (e.g. `operator`).
    """

    key: str
    rules: tuple[Mapping[str, Any], ...]
    namespace: pulumi.Input[str] | None = None


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
        "restartPolicy": "OnFailure",
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": NON_ROOT_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "initContainers": containers[:-1],
        "containers": containers[-1:],
        "volumes": volumes,
    }


class Gate:
    """A gate's Job, files, and ServiceAccount with RBAC, all named `name` (fixed, so they fit every limit).

    With `service_account`, the Job runs as an existing account that already has what
    its steps need, and the gate creates no account or RBAC of its own.

    The Job's template carries `vouches_for` as a fingerprint: when that changes, the
    immutable template changes, the Job is replaced and the gate runs again. A gate
    that failed is replaced on the next `up` as well (pulumi.com/replaceUnready).
    """

    def __init__(
        self,
        name: str,
        *,
        resource_name: str,
        namespace: pulumi.Input[str],
        steps: Sequence[GateStep],
        grants: Sequence[Grant] = (),
        service_account: str | None = None,
        kubectl_version: str,
        timeout_seconds: int,
        vouches_for: Any = None,
        files: Mapping[str, str] | None = None,
        opts: pulumi.ResourceOptions,
        depends_on: Sequence[pulumi.Resource] = (),
    ) -> None:
        if service_account is not None and grants:
            raise ValueError("a gate either runs as an existing account or is granted its own")
        meta = {"name": name, "namespace": namespace, "labels": MANAGED_BY}
        prerequisites: list[pulumi.Resource] = []
        if service_account is None:
            prerequisites.append(k8s.core.v1.ServiceAccount(resource_name, metadata=meta, opts=opts))
            subject = {"kind": "ServiceAccount", "name": name, "namespace": namespace}
            prerequisites += [self._grant(resource_name, name, grant, subject, opts) for grant in grants]
        if files:
            prerequisites.append(k8s.core.v1.ConfigMap(resource_name, metadata=meta, data=dict(files), opts=opts))
        wait = f"{timeout_seconds + 120}s"
        self.job = k8s.batch.v1.Job(
            resource_name,
            metadata={**meta, "annotations": {"pulumi.com/replaceUnready": "true"}},
            spec={
                "backoffLimit": RETRIES,
                "activeDeadlineSeconds": timeout_seconds + 60,
                "template": {
                    "metadata": {
                        "labels": MANAGED_BY,
                        "annotations": {"gpu-tenancy/vouches-for": fingerprint(vouches_for)},
                    },
                    "spec": gate_pod(
                        steps,
                        kubectl_version=kubectl_version,
                        service_account=service_account or name,
                        files_config_map=name if files else None,
                    ),
                },
            },
            opts=opts.merge(
                pulumi.ResourceOptions(
                    depends_on=[*prerequisites, *depends_on],
                    # The name is fixed: a replacement must remove the old Job first.
                    delete_before_replace=True,
                    custom_timeouts=pulumi.CustomTimeouts(create=wait, update=wait),
                )
            ),
        )

    @staticmethod
    def _grant(
        resource_name: str,
        name: str,
        grant: Grant,
        subject: dict[str, Any],
        opts: pulumi.ResourceOptions,
    ) -> pulumi.Resource:
        """The Role (or ClusterRole) and its binding; the binding is what the Job waits for."""
        suffix = f"{resource_name}-{grant.key}"
        # Outside the gate's own namespace, and cluster-wide, names are shared: prefix them with the project.
        meta: dict[str, Any] = {"name": f"gpu-tenancy-{name}", "labels": MANAGED_BY}
        if grant.namespace is None:
            kind, role_type, binding_type = "ClusterRole", k8s.rbac.v1.ClusterRole, k8s.rbac.v1.ClusterRoleBinding
        else:
            kind, role_type, binding_type = "Role", k8s.rbac.v1.Role, k8s.rbac.v1.RoleBinding
            meta["namespace"] = grant.namespace
        role = role_type(suffix, metadata=meta, rules=[dict(rule) for rule in grant.rules], opts=opts)
        binding: pulumi.Resource = binding_type(
            suffix,
            metadata=meta,
            role_ref={"apiGroup": RBAC_GROUP, "kind": kind, "name": meta["name"]},
            subjects=[subject],
            opts=opts.merge(pulumi.ResourceOptions(depends_on=[role])),
        )
        return binding

"""What every readiness gate shares: a locked-down pod running a mounted script, and a Job Pulumi awaits.

A gate is a Job because pulumi-kubernetes waits for a Job to complete, and
fails the update when it does not; dependents of the Job therefore start only
once the gate's script has proven its point.
"""

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.labels import MANAGED_BY, object_name

MOUNT_PATH = "/gate"
RBAC_GROUP = "rbac.authorization.k8s.io"
NON_ROOT_UID = 65532
LOCKED_DOWN: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}


def fingerprint(*parts: Any) -> str:
    """A short digest of whatever the gate vouches for; a new value re-runs the gate."""
    canonical = json.dumps(parts, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def script_container(
    *, name: str, image: str, script: str, env: Sequence[dict[str, pulumi.Input[str]]]
) -> dict[str, Any]:
    """A container running `script` from the gate's ConfigMap with bash, e.g. in the kubectl image."""
    return {
        "name": name,
        "image": image,
        "command": ["/bin/bash", f"{MOUNT_PATH}/{script}"],
        # kubectl caches discovery under $HOME; the root filesystem is read-only.
        "env": [*env, {"name": "HOME", "value": "/tmp"}],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
        "securityContext": LOCKED_DOWN,
        "volumeMounts": [
            {"name": "gate", "mountPath": MOUNT_PATH, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }


def gate_pod(
    *, service_account: pulumi.Input[str], config_map: pulumi.Input[str], containers: list[dict[str, Any]]
) -> dict[str, Any]:
    """A non-root pod that never restarts, with the gate's files mounted and a writable /tmp."""
    return {
        "serviceAccountName": service_account,
        "restartPolicy": "Never",
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": NON_ROOT_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": containers,
        "volumes": [
            {"name": "gate", "configMap": {"name": config_map}},
            {"name": "tmp", "emptyDir": {}},
        ],
    }


def gate_job(
    name: str,
    *,
    namespace: pulumi.Input[str],
    pod: dict[str, Any],
    fingerprint_annotation: tuple[str, str],
    timeout_seconds: int,
    backoff_limit: int,
    opts: pulumi.ResourceOptions,
) -> k8s.batch.v1.Job:
    """The Job pulumi-kubernetes awaits; it runs again when its fingerprint changes or after it failed."""
    wait = f"{timeout_seconds + 120}s"
    key, value = fingerprint_annotation
    job: k8s.batch.v1.Job = k8s.batch.v1.Job(
        name,
        metadata={
            "namespace": namespace,
            "labels": MANAGED_BY,
            # A gate that failed once is replaced (re-run) by the next `up`, not awaited again.
            "annotations": {"pulumi.com/replaceUnready": "true"},
        },
        spec={
            "backoffLimit": backoff_limit,
            "activeDeadlineSeconds": timeout_seconds + 60,
            "template": {
                # The template is immutable: a new fingerprint replaces the Job, re-running the gate.
                "metadata": {"labels": MANAGED_BY, "annotations": {key: value}},
                "spec": pod,
            },
        },
        opts=opts.merge(pulumi.ResourceOptions(custom_timeouts=pulumi.CustomTimeouts(create=wait, update=wait))),
    )
    return job


class GateAccess:
    """The gate's ServiceAccount, its files, and just the permissions its script needs."""

    def __init__(
        self,
        name: str,
        *,
        namespace: pulumi.Output[str],
        files: dict[str, str],
        cluster_rules: list[dict[str, Any]] | None = None,
        namespace_rules: list[dict[str, Any]] | None = None,
        opts: pulumi.ResourceOptions,
    ) -> None:
        meta = {"namespace": namespace, "labels": MANAGED_BY}
        account = k8s.core.v1.ServiceAccount(name, metadata=meta, opts=opts)
        self.service_account = object_name(account)
        subjects = [{"kind": "ServiceAccount", "name": self.service_account, "namespace": namespace}]
        self.bindings: list[pulumi.Resource] = []
        if cluster_rules:
            role = k8s.rbac.v1.ClusterRole(name, metadata={"labels": MANAGED_BY}, rules=cluster_rules, opts=opts)
            self.bindings.append(
                k8s.rbac.v1.ClusterRoleBinding(
                    name,
                    metadata={"labels": MANAGED_BY},
                    role_ref={"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": object_name(role)},
                    subjects=subjects,
                    opts=opts,
                )
            )
        if namespace_rules:
            local = k8s.rbac.v1.Role(name, metadata=meta, rules=namespace_rules, opts=opts)
            self.bindings.append(
                k8s.rbac.v1.RoleBinding(
                    name,
                    metadata=meta,
                    role_ref={"apiGroup": RBAC_GROUP, "kind": "Role", "name": object_name(local)},
                    subjects=subjects,
                    opts=opts,
                )
            )
        self.config_map = object_name(k8s.core.v1.ConfigMap(name, metadata=meta, data=files, opts=opts))

"""Admission policies that pin a tenant's pods to its KAI queue, evaluated by the host's API server.

KAI lets any pod name any queue, and vCluster forces labels on synced pods only
in its paid tier, so without these a team could schedule into another team's
budget, or take a GPU past KAI altogether. Both policies match only pods the
vCluster syncer created (they carry SYNCED_POD_LABEL); the vCluster control
plane in the same namespace is left alone.
"""

from typing import Any

from components.labels import MANAGED_BY
from config.upstream import METADATA_NAME_LABEL, QUEUE_LABEL, SCHEDULER_NAME, SYNCED_POD_LABEL

GPU_ANNOTATIONS = ("gpu-fraction", "gpu-memory")
# KAI's GPU-sharing annotations: kai-scheduler/KAI-Scheduler pkg/common/constants/constants.go
# (GpuFraction, GpuMemory) @v0.16.4.

SYNCED_WORKLOAD = {
    "name": "synced-workload-pods",
    "expression": f"has(object.metadata.labels) && '{SYNCED_POD_LABEL}' in object.metadata.labels",
}

_CONTAINER_WANTS_GPU = (
    "has(c.resources) && ("
    "(has(c.resources.limits) && c.resources.limits.exists(r, r.startsWith('nvidia.com/'))) || "
    "(has(c.resources.requests) && c.resources.requests.exists(r, r.startsWith('nvidia.com/'))))"
)
WANTS_GPU = (
    f"object.spec.containers.exists(c, {_CONTAINER_WANTS_GPU}) || "
    f"(has(object.spec.initContainers) && object.spec.initContainers.exists(c, {_CONTAINER_WANTS_GPU})) || "
    "(has(object.metadata.annotations) && ("
    + " || ".join(f"'{a}' in object.metadata.annotations" for a in GPU_ANNOTATIONS)
    + "))"
)
"""A pod asks for a GPU: an `nvidia.com/*` resource (whole GPUs, MIG slices) or KAI's sharing annotations."""


def _pod_rules(operations: list[str]) -> dict[str, Any]:
    return {
        "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": operations, "resources": ["pods"]}]
    }


def validating_policy_spec(tenant: str, queue: str) -> dict[str, Any]:
    queue_of_pod = f"object.metadata.labels['{QUEUE_LABEL}']"
    return {
        "failurePolicy": "Fail",
        "matchConstraints": _pod_rules(["CREATE", "UPDATE"]),
        "matchConditions": [SYNCED_WORKLOAD],
        "variables": [
            {"name": "namesQueue", "expression": f"'{QUEUE_LABEL}' in object.metadata.labels"},
            {"name": "wantsGpu", "expression": WANTS_GPU},
        ],
        "validations": [
            {
                "expression": f"!variables.namesQueue || {queue_of_pod} == '{queue}'",
                "message": f"pods of tenant {tenant} may only use KAI queue {queue}",
                "reason": "Forbidden",
            },
            {
                "expression": (
                    f"!variables.wantsGpu || (has(object.spec.schedulerName) "
                    f"&& object.spec.schedulerName == '{SCHEDULER_NAME}' "
                    f"&& variables.namesQueue && {queue_of_pod} == '{queue}')"
                ),
                "message": (
                    f"pods of tenant {tenant} get GPUs only through KAI: set schedulerName {SCHEDULER_NAME} "
                    f"and the label {QUEUE_LABEL}: {queue}"
                ),
                "reason": "Forbidden",
            },
        ],
    }


def mutating_policy_spec(queue: str) -> dict[str, Any]:
    apply_configuration = (
        f"Object{{metadata: Object.metadata{{labels: {{'{QUEUE_LABEL}': '{queue}'}}}}, "
        f"spec: Object.spec{{schedulerName: '{SCHEDULER_NAME}'}}}}"
    )
    return {
        "failurePolicy": "Fail",
        # schedulerName is immutable once the pod exists: only creation is mutated.
        "matchConstraints": _pod_rules(["CREATE"]),
        "matchConditions": [SYNCED_WORKLOAD],
        "reinvocationPolicy": "IfNeeded",
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": apply_configuration}}],
    }


def binding_spec(policy_name: str, namespace: str, *, validating: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "policyName": policy_name,
        "matchResources": {"namespaceSelector": {"matchLabels": {METADATA_NAME_LABEL: namespace}}},
    }
    if validating:
        spec["validationActions"] = ["Deny"]
    return spec


def policy_metadata(name: str, tenant: str) -> dict[str, Any]:
    return {"name": name, "labels": {**MANAGED_BY, "gpu-tenancy/tenant": tenant}}

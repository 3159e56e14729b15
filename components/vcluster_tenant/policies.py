"""Admission policies the host's API server runs on every tenant's pods: one policy for all tenants.

A team is cluster-admin inside its vCluster, and the syncer copies its pods to
the host nearly as written (schedulerName, nodeName, runtimeClassName, env,
labels, ephemeral containers: loft-sh/vcluster pkg/controllers/resources/pods
@v0.35.1). These policies decide what of that the host accepts. Each tenant's
namespace carries its tenant and queue as labels, so one policy and one binding
serve every tenant; nothing is copied per tenant.

The policies match only pods the syncer made (SYNCED_POD_LABEL); the vCluster
control plane in the same namespace is left to Pod Security. They see a pod
after KAI's mutating webhook (mutating admission runs before validating), so a
KAI fraction pod is checked as KAI leaves it.
"""

from typing import Any

from components.shared.labels import MANAGED_BY
from components.vcluster_tenant.cel import (
    CONTAINER_LISTS,
    any_container,
    cel_list,
    every_container,
    validation,
    value,
)
from components.vcluster_tenant.gang_rules import (
    CONTROLLER_PODGROUP_LABELS,
    GANG_LABEL,
    GANG_SIZE_ANNOTATION,
    gang_validations,
    gang_variables,
)
from components.vcluster_tenant.kai_rules import GPU_MEMORY_PARAMS, kai_validations, kai_variables, own_device_configmap
from config.names import PREEMPTIBILITY_NAMESPACE_LABEL, QUEUE_NAMESPACE_LABEL, QUEUE_VIEW_CONFIGMAP, TENANT_LABEL
from config.upstream import (
    CDI_ANNOTATION_PREFIXES,
    GPU_FRACTION_ANNOTATIONS,
    GPU_FRACTION_RUNTIME_CLASS,
    GPU_SHARING_ANNOTATIONS,
    GPU_SHARING_CONFIGMAP,
    KAI_BINDER_USER,
    NO_GPU_VALUES,
    NVIDIA_VISIBLE_DEVICES,
    POD_SECURITY_RESTRICTED_VOLUMES,
    PREEMPTIBILITY_LABEL,
    PREEMPTIBILITY_VALUES,
    QUEUE_LABEL,
    SCHEDULER_NAME,
    SHARED_GPU_CONFIGMAP_ANNOTATION,
    SYNCED_POD_LABEL,
)

POD_POLICY = "gpu-tenancy-tenant-pods"
CONFIGMAP_POLICY = "gpu-tenancy-tenant-gpu-configmaps"

TENANT_NAMESPACES = {"matchExpressions": [{"key": TENANT_LABEL, "operator": "Exists"}]}

NON_PREEMPTIBLE_POLICY = "gpu-tenancy-tenant-non-preemptible"
NON_PREEMPTIBLE = PREEMPTIBILITY_VALUES[1]
NON_PREEMPTIBLE_NAMESPACES = {
    **TENANT_NAMESPACES,
    "matchLabels": {PREEMPTIBILITY_NAMESPACE_LABEL: NON_PREEMPTIBLE},
}
"""The namespaces of tenants set nonPreemptible."""

TEAM_KEYS = {"labels": (GANG_LABEL,), "annotations": (GANG_SIZE_ANNOTATION,)}
"""The platform's keys a team writes on its pods; every other gpu-tenancy/ key is the platform's own."""
PLATFORM_LABEL_VALUES = {
    "app.kubernetes.io/part-of": MANAGED_BY["app.kubernetes.io/part-of"],
    **CONTROLLER_PODGROUP_LABELS,
}
"""Labels that mark the platform's own objects: KAI's pod-grouper copies a pod's labels onto its PodGroup
(defaultgrouper/default_grouper.go @v0.16.8), and the platform selects its objects by these."""


def _platform_keys() -> list[dict[str, Any]]:
    checks = []
    for kind, allowed in TEAM_KEYS.items():
        checks.append(
            validation(
                f"!has(object.metadata.{kind}) || object.metadata.{kind}.all(k, "
                f"!k.startsWith('gpu-tenancy/') || k in {cel_list(allowed)})",
                f"the {kind} gpu-tenancy/* are the platform's own: a team's pod may carry only {', '.join(allowed)}",
            )
        )
    marks = " && ".join(f"{value('object', 'labels', key)} != '{mark}'" for key, mark in PLATFORM_LABEL_VALUES.items())
    checks.append(
        validation(
            marks,
            "the labels "
            + ", ".join(f"{k}={v}" for k, v in PLATFORM_LABEL_VALUES.items())
            + " mark the platform's own objects; a team's pod may not carry them",
        )
    )
    return checks


_REQUESTS_GPU = (
    "has(c.resources) && ("
    "(has(c.resources.limits) && c.resources.limits.exists(r, r.startsWith('nvidia.com/'))) || "
    "(has(c.resources.requests) && c.resources.requests.exists(r, r.startsWith('nvidia.com/'))))"
)

_NO_DEVICES = f"e.name != '{NVIDIA_VISIBLE_DEVICES}' || (has(e.value) && e.value in {cel_list(NO_GPU_VALUES)})"
_SAFE_DEVICES = (
    f"{_NO_DEVICES} || (variables.fraction && has(e.valueFrom) && has(e.valueFrom.configMapKeyRef) && "
    f"e.valueFrom.configMapKeyRef.key == '{NVIDIA_VISIBLE_DEVICES}' && "
    f"{own_device_configmap('e.valueFrom.configMapKeyRef.name')})"
)
"""An env entry that names no GPU, or the one KAI's binder writes for this fraction pod: <prefix>-<n> exactly."""

_NAMES_DEVICES = f"has(c.env) && c.env.exists(e, e.name == '{NVIDIA_VISIBLE_DEVICES}')"

SYNCED_WORKLOAD = {
    "name": "synced-workload-pods",
    "expression": f"has(object.metadata.labels) && '{SYNCED_POD_LABEL}' in object.metadata.labels",
}


def pod_rules(*operations: str, ephemeral: bool = False) -> dict[str, Any]:
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": list(operations), "resources": ["pods"]}]
    if ephemeral:
        # `kubectl debug` adds containers through this subresource; a rule on `pods` alone never sees it.
        rules.append(
            {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": ["UPDATE"],
                "resources": ["pods/ephemeralcontainers"],
            }
        )
    return {"namespaceSelector": TENANT_NAMESPACES, "resourceRules": rules}


_VOLUMES = (
    "!has(object.spec.volumes) || object.spec.volumes.all(v, "
    + " || ".join(f"has(v.{source})" for source in POD_SECURITY_RESTRICTED_VOLUMES)
    + ")"
)
_POD_SECCOMP = "has(object.spec.securityContext) && has(object.spec.securityContext.seccompProfile)"
_CONTAINER_SECCOMP = "has(c.securityContext) && has(c.securityContext.seccompProfile)"


def pod_policy_spec(kai_namespace: str, *, require_seccomp: bool = False) -> dict[str, Any]:
    """Every path from a tenant pod to another queue, a GPU outside KAI, the node's network by a volume, or KAI's
    own bookkeeping (kai_rules). `require_seccomp`: where the kubelet gives no default profile, a pod names one
    (the seccomp default policy gives it RuntimeDefault first in mutate mode)."""
    seccomp = (
        [
            validation(
                f"{_POD_SECCOMP} || {every_container(_CONTAINER_SECCOMP)}",
                "a tenant's pod names a seccomp profile (securityContext.seccompProfile.type: RuntimeDefault): "
                "this cluster's kubelet runs a pod that names none Unconfined",
            )
        ]
        if require_seccomp
        else []
    )
    return {
        "failurePolicy": "Fail",
        # The GPUs' memory, for the gpu-memory floor (kai_rules.GPU_MEMORY_PARAMS): one ConfigMap for every team.
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConstraints": pod_rules("CREATE", "UPDATE", ephemeral=True),
        "matchConditions": [SYNCED_WORKLOAD],
        "variables": [
            {"name": "queue", "expression": f"namespaceObject.metadata.labels['{QUEUE_NAMESPACE_LABEL}']"},
            # Both branches of every conditional have one type: the API server type-checks each expression.
            {
                "name": "namesQueue",
                "expression": f"has(object.metadata.labels) && '{QUEUE_LABEL}' in object.metadata.labels",
            },
            {
                "name": "podQueue",
                "expression": f"variables.namesQueue ? object.metadata.labels['{QUEUE_LABEL}'] : ''",
            },
            {
                "name": "hadQueue",
                "expression": (
                    "request.operation == 'UPDATE' && has(oldObject.metadata.labels) && "
                    f"'{QUEUE_LABEL}' in oldObject.metadata.labels"
                ),
            },
            {
                "name": "kai",
                "expression": f"has(object.spec.schedulerName) && object.spec.schedulerName == '{SCHEDULER_NAME}'",
            },
            {
                "name": "fraction",
                "expression": " || ".join(
                    f"{value('object', 'annotations', a)} != ''" for a in GPU_FRACTION_ANNOTATIONS
                ),
            },
            {
                "name": "wantsGpu",
                "expression": f"variables.fraction || {any_container(_REQUESTS_GPU)}",
            },
            {"name": "sharedConfigMap", "expression": value("object", "annotations", SHARED_GPU_CONFIGMAP_ANNOTATION)},
            {
                "name": "runtimeClass",
                "expression": "has(object.spec.runtimeClassName) ? object.spec.runtimeClassName : ''",
            },
            *gang_variables(),
            *kai_variables(kai_namespace),
        ],
        "validations": [
            validation(
                "!variables.namesQueue || variables.podQueue == variables.queue",
                "a tenant's pods may only use its own KAI queue (the label kai.scheduler/queue)",
            ),
            validation(
                f"{value('namespaceObject', 'labels', PREEMPTIBILITY_NAMESPACE_LABEL)} != '{NON_PREEMPTIBLE}' || "
                f"{value('object', 'labels', PREEMPTIBILITY_LABEL)} == '{NON_PREEMPTIBLE}' || "
                # A pod made before its tenant was set non-preemptible keeps what it had.
                f"(request.operation == 'UPDATE' && {value('object', 'labels', PREEMPTIBILITY_LABEL)} == "
                f"{value('oldObject', 'labels', PREEMPTIBILITY_LABEL)})",
                f"this team's pods are non-preemptible (tenants[].nonPreemptible): their label {PREEMPTIBILITY_LABEL} "
                f"is {NON_PREEMPTIBLE}",
            ),
            validation(
                f"!variables.hadQueue || variables.podQueue == oldObject.metadata.labels['{QUEUE_LABEL}']",
                "a pod's KAI queue cannot be changed or removed once it is set",
            ),
            validation(
                "request.operation != 'CREATE' || !variables.wantsGpu || "
                "(variables.kai && variables.podQueue == variables.queue)",
                f"a tenant's pods get GPUs only through KAI: schedulerName {SCHEDULER_NAME} and its own queue",
            ),
            validation(
                "request.operation != 'CREATE' || !variables.kai || variables.podQueue == variables.queue",
                f"a pod scheduled by KAI names its tenant's queue (the label {QUEUE_LABEL}): KAI would group it "
                "into default-queue, where it never runs",
            ),
            validation(
                every_container(f"!({_REQUESTS_GPU})", CONTAINER_LISTS[1:2]),
                "GPUs go in a pod's containers, not its init containers or sidecars: KAI's podgroup-controller "
                "counts only spec.containers as the queue's use (time-based fairness, the cost report, the team "
                "views), so a GPU there would run unrecorded",
            ),
            validation(
                "request.operation != 'CREATE' || !has(object.spec.nodeName) || object.spec.nodeName == ''",
                "a tenant's pods may not name their node (spec.nodeName skips KAI's placement and its queue's limit)",
            ),
            validation(
                f"variables.runtimeClass == '' || (variables.runtimeClass == '{GPU_FRACTION_RUNTIME_CLASS}' "
                "&& variables.fraction && variables.kai)",
                f"only a KAI GPU fraction pod runs with runtimeClassName {GPU_FRACTION_RUNTIME_CLASS}; "
                "other runtime classes are not offered to tenants",
            ),
            validation(
                every_container(f"!has(c.env) || c.env.all(e, {_SAFE_DEVICES})", CONTAINER_LISTS[:2]),
                f"{NVIDIA_VISIBLE_DEVICES} may only be {' or '.join(NO_GPU_VALUES)}, "
                "or the pod's own <runai/shared-gpu-configmap>-<n> that KAI's binder writes for a fraction",
            ),
            validation(
                every_container(f"!has(c.env) || c.env.all(e, {_NO_DEVICES})", CONTAINER_LISTS[2:]),
                f"a debug (ephemeral) container may only set {NVIDIA_VISIBLE_DEVICES} to "
                f"{' or '.join(NO_GPU_VALUES)}: KAI's webhooks never see it, so it may not read a fraction's devices",
            ),
            validation(
                f"variables.runtimeClass == '' || {every_container(_NAMES_DEVICES)}",
                "under an nvidia runtime every container, debug containers included, must set "
                f"{NVIDIA_VISIBLE_DEVICES} itself (to void, e.g. kubectl debug --env {NVIDIA_VISIBLE_DEVICES}=void): "
                "otherwise the image's ENV or an envFrom decides which GPUs it sees",
            ),
            validation(
                f"request.operation != 'UPDATE' || {cel_list(GPU_SHARING_ANNOTATIONS)}.all(a, "
                "(has(object.metadata.annotations) && a in object.metadata.annotations ? "
                "object.metadata.annotations[a] : '') == "
                "(has(oldObject.metadata.annotations) && a in oldObject.metadata.annotations ? "
                "oldObject.metadata.annotations[a] : ''))",
                "KAI's GPU sharing annotations cannot change once the pod exists",
            ),
            validation(
                "!has(object.metadata.annotations) || object.metadata.annotations.all(k, "
                + " && ".join(f"!k.startsWith('{prefix}')" for prefix in CDI_ANNOTATION_PREFIXES)
                + ")",
                "CDI device annotations are the device plugin's to set, not a pod's",
            ),
            validation(
                _VOLUMES,
                f"a tenant's pods use only the volume types of Pod Security restricted "
                f"({', '.join(POD_SECURITY_RESTRICTED_VOLUMES)}): the kubelet mounts the others (nfs, iscsi, "
                "rbd, cephfs, ...) from the node's own network, past the tenant's NetworkPolicy",
            ),
            *seccomp,
            *_platform_keys(),
            *gang_validations(),
            *kai_validations(),
        ],
    }


def configmap_policy_spec(kai_namespace: str, controller_user: str) -> dict[str, Any]:
    """The ConfigMaps a team reads as KAI's word are written by their writers alone: the ones that tell a
    fraction pod which GPU it has (KAI's binder), and the queue view its syncer copies into the vCluster (the
    gang controller): a team's syncer, or anyone else with ConfigMap rights there, cannot forge either."""
    binder = KAI_BINDER_USER.format(namespace=kai_namespace)
    sharing = f"object.metadata.name.matches('{GPU_SHARING_CONFIGMAP}')"
    view = f"object.metadata.name == '{QUEUE_VIEW_CONFIGMAP}'"
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "namespaceSelector": TENANT_NAMESPACES,
            "resourceRules": [
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["configmaps"],
                }
            ],
        },
        "matchConditions": [{"name": "platform-configmaps", "expression": f"{sharing} || {view}"}],
        "validations": [
            validation(
                f"!({sharing}) || request.userInfo.username == '{binder}'",
                "only KAI's binder writes a GPU fraction's ConfigMaps",
            ),
            validation(
                f"!({view}) || request.userInfo.username == '{controller_user}'",
                f"only the gang controller writes {QUEUE_VIEW_CONFIGMAP}, the team's view of its queue",
            ),
        ],
    }


def pinning_policy_spec() -> dict[str, Any]:
    """New synced pods get their tenant's queue and KAI, so a team's pod spec needs no KAI field."""
    apply_configuration = (
        f"Object{{metadata: Object.metadata{{labels: {{'{QUEUE_LABEL}': "
        f"namespaceObject.metadata.labels['{QUEUE_NAMESPACE_LABEL}']}}}}, "
        f"spec: Object.spec{{schedulerName: '{SCHEDULER_NAME}'}}}}"
    )
    return _synced_pod_creation_policy(apply_configuration)


def _synced_pod_creation_policy(apply_configuration: str) -> dict[str, Any]:
    """A mutation of new synced pods alone: schedulerName is immutable once the pod exists, and a label set at
    creation is the one KAI's pod-grouper reads."""
    return {
        "failurePolicy": "Fail",
        "matchConstraints": pod_rules("CREATE"),
        "matchConditions": [SYNCED_WORKLOAD],
        "reinvocationPolicy": "IfNeeded",
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": apply_configuration}}],
    }


def non_preemptible_policy_spec() -> dict[str, Any]:
    """New synced pods of a non-preemptible tenant get the label KAI's pod-grouper reads first (its value overrides
    the class's: config/upstream.py PREEMPTIBILITY_LABEL), so every PodGroup of that team is non-preemptible."""
    apply_configuration = (
        f"Object{{metadata: Object.metadata{{labels: {{'{PREEMPTIBILITY_LABEL}': '{NON_PREEMPTIBLE}'}}}}}}"
    )
    return _synced_pod_creation_policy(apply_configuration)


def non_preemptible_binding() -> dict[str, Any]:
    return {"policyName": NON_PREEMPTIBLE_POLICY, "matchResources": {"namespaceSelector": NON_PREEMPTIBLE_NAMESPACES}}


SECCOMP_POLICY = "gpu-tenancy-tenant-seccomp-default"


def seccomp_default_policy_spec() -> dict[str, Any]:
    """A new synced pod that names no pod-level seccomp profile gets RuntimeDefault, as a kubelet with
    --seccomp-default would give it; a container's own profile still wins (Pod Security refuses Unconfined)."""
    profile = "Object.spec.securityContext.seccompProfile{type: 'RuntimeDefault'}"
    apply_configuration = (
        f"Object{{spec: Object.spec{{securityContext: Object.spec.securityContext{{seccompProfile: {profile}}}}}}}"
    )
    return {
        "failurePolicy": "Fail",
        "matchConstraints": pod_rules("CREATE"),
        "matchConditions": [SYNCED_WORKLOAD, {"name": "no-pod-seccomp-profile", "expression": f"!({_POD_SECCOMP})"}],
        "reinvocationPolicy": "IfNeeded",
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": apply_configuration}}],
    }


def binding_spec(policy_name: str, *, validating: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"policyName": policy_name, "matchResources": {"namespaceSelector": TENANT_NAMESPACES}}
    if validating:
        spec["validationActions"] = ["Deny"]
    return spec


def pod_binding_spec() -> dict[str, Any]:
    """The pod policy's binding, with its params: Deny when they are missing, so the policy never goes unchecked.
    The params exist before this binding does (TenantAdmission), so no pod meets a binding without them."""
    return {
        **binding_spec(POD_POLICY, validating=True),
        "paramRef": {**GPU_MEMORY_PARAMS, "parameterNotFoundAction": "Deny"},
    }


def policy_metadata(name: str) -> dict[str, Any]:
    return {"name": name, "labels": dict(MANAGED_BY)}

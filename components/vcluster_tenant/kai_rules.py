"""What a tenant's pod may ask of KAI, and what stays KAI's own: priorities, fractions, KAI's bookkeeping.

KAI reads a pod's priority, its PodGroup, its GPU group and its share from labels and
annotations, and the syncer copies every one of those from the team's vCluster to the
host verbatim, then merges the team's later edits into the host pod (loft-sh/vcluster
pkg/util/translate/labels.go, translate.go, pkg/controllers/resources/pods/translate/diff.go
@v0.35.1). So the host decides, by who asks (`request.userInfo`):

- a team chooses its pods' priority class (from its allowlist) and preemptibility;
- KAI's pod-grouper and binder alone write KAI's bookkeeping keys (config/upstream.py
  KAI_POD_KEYS); a team never sets one, and its syncer never changes one;
- a GPU fraction is at least this team's floor, spans at most its devices, reads its
  devices only from the ConfigMaps KAI's binder writes for it, and is created only once
  KAI's webhook has prepared it: one that arrives before KAI serves is refused, and the
  syncer retries it until it is.

Per-tenant values (the allowlist, the floor, the device limit) are annotations on the
tenant's namespace, written by the platform, so one policy serves every tenant.
"""

import math
from collections.abc import Mapping
from typing import Any

from components.vcluster_tenant.cel import (
    Kind,
    any_container,
    any_with_prefix,
    cel_list,
    present,
    unchanged,
    unchanged_with_prefix,
    validation,
    value,
)
from components.vcluster_tenant.gang_rules import GANG_SIZE_ANNOTATION
from config.upstream import (
    GPU_FRACTION_DEVICES_ANNOTATION,
    KAI_BINDER_USER,
    KAI_NUMA_EXPORTER_USER,
    KAI_POD_GROUPER_USER,
    KAI_POD_KEYS,
    KAI_UTILITY_APP_LABELS,
    NVIDIA_VISIBLE_DEVICES,
    POD_GROUP_ANNOTATION,
    PREEMPTIBILITY_LABEL,
    PREEMPTIBILITY_VALUES,
    PRIORITY_LABEL,
    SHARED_GPU_CONFIGMAP_SUFFIX,
    SPARK_GROUPER_LABELS,
)
from config.vcluster_tenant.tenants import GpuSharingRules

PRIORITY_CLASSES_ANNOTATION = "gpu-tenancy/priority-classes"
MIN_GPU_FRACTION_ANNOTATION = "gpu-tenancy/min-gpu-fraction"
MIN_GPU_MEMORY_ANNOTATION = "gpu-tenancy/configured-min-gpu-memory-mib"
"""The team's configured gpu-memory minimum; the policy raises it to the fraction floor of the largest GPU."""
GPU_MEMORY_PARAMS = {"name": "gpu-tenancy-gpu-memory", "namespace": "kube-system"}
"""The pod policy's params, one ConfigMap for every team: what the GPU gate found, which no team waits for."""
LARGEST_GPU_MEMORY_KEY = "largestMiB"
MAX_FRACTION_DEVICES_ANNOTATION = "gpu-tenancy/max-fraction-devices"
MAX_GRACE_ANNOTATION = "gpu-tenancy/max-termination-grace-seconds"
MAX_ANNOTATION_BYTES_ANNOTATION = "gpu-tenancy/max-pod-annotation-bytes"
MAX_TEXT_BYTES_ANNOTATION = "gpu-tenancy/max-container-text-bytes"

_CONFIGMAP_PREFIX = f"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?{SHARED_GPU_CONFIGMAP_SUFFIX}$"
_WRITERS = {
    "pod-grouper": "variables.podGrouper",
    "binder": "variables.binder",
    "numa-placement-exporter": "variables.numaExporter",
}


def largest_gpu_memory_mib(gpus: Mapping[str, Mapping[str, Any]] | None) -> int:
    """The largest GPU the stack knows, in MiB (GPU feature discovery's gpu.memory on each GPU node it read,
    `GpuHost.gpu`); 0 with none known (an existing cluster), where the configured floor alone holds."""
    memories = [int(node["memoryMiB"]) for node in (gpus or {}).values() if node.get("memoryMiB")]
    return max(memories, default=0)


def memory_floor_mib(rules: GpuSharingRules, gpus: Mapping[str, Mapping[str, Any]] | None) -> int:
    """The smallest gpu-memory a pod may ask for: never a smaller share of any GPU than the fraction floor.

    KAI charges a pending gpu-memory pod against the smallest GPU's memory and a bound one against its own GPU's
    (pkg/scheduler/api/resource_info/gpu_resource_requirment.go, node_info/node_info.go @v0.16.8), so at least
    minGpuFraction of the largest GPU the stack knows. The pod policy computes it (`_MEMORY_FLOOR`) from the
    team's namespace and the shared params; this is the same rule, for the plan and the tests."""
    return max(rules.min_gpu_memory_mib, math.ceil(rules.min_gpu_fraction * largest_gpu_memory_mib(gpus)))


def namespace_annotations(rules: GpuSharingRules) -> dict[str, str]:
    """What the policy reads from a tenant's namespace: its priority classes, fraction and memory floors, device
    limit, grace period maximum and size bounds. All of it is config, known before anything runs."""
    return {
        PRIORITY_CLASSES_ANNOTATION: ",".join(rules.priority_classes),
        MIN_GPU_FRACTION_ANNOTATION: str(rules.min_gpu_fraction),
        MIN_GPU_MEMORY_ANNOTATION: str(rules.min_gpu_memory_mib),
        MAX_GRACE_ANNOTATION: str(rules.max_grace_seconds),
        MAX_ANNOTATION_BYTES_ANNOTATION: str(rules.max_annotation_bytes),
        MAX_TEXT_BYTES_ANNOTATION: str(rules.max_container_text_bytes),
        MAX_FRACTION_DEVICES_ANNOTATION: str(rules.max_fraction_devices),
    }


def own_device_configmap(name: str) -> str:
    """`name` is exactly <prefix>-<n> or <prefix>-i<n>, for the pod's own, well-formed prefix.

    The literal startsWith pins every character of the prefix; the pattern then allows only
    the index after it (a '.' in the prefix matches itself there, having matched already).
    """
    return (
        f"variables.prefixValid && {name}.startsWith(variables.sharedConfigMap + '-') && "
        f"{name}.matches('^' + variables.sharedConfigMap + '-i?[0-9]+$')"
    )


_PREPARED_BY_KAI = (
    "has(c.env) && has(c.envFrom) && c.env.exists(e, "
    f"e.name == '{NVIDIA_VISIBLE_DEVICES}' && has(e.valueFrom) && has(e.valueFrom.configMapKeyRef) && "
    f"{own_device_configmap('e.valueFrom.configMapKeyRef.name')} && "
    "c.envFrom.exists(f, has(f.configMapRef) && f.configMapRef.name == e.valueFrom.configMapKeyRef.name + '-evar'))"
)
"""The fraction container as KAI's webhook leaves it: its devices from <prefix>-<n>, its variables from
<prefix>-<n>-evar (pkg/admission/webhook/v1alpha2/gpusharing @v0.16.8). Env is immutable, and the webhook acts
only on CREATE, so nothing else makes this state on a pod KAI never saw."""


def _text_bytes(containers: str) -> str:
    """The bytes of command, args and env (names and values) of every container in the list `containers`."""
    strings = "{0}.map(s, size(bytes(s))).sum()"
    each = " + ".join(
        [
            f"(has(c.command) ? {strings.format('c.command')} : 0)",
            f"(has(c.args) ? {strings.format('c.args')} : 0)",
            "(has(c.env) ? c.env.map(e, size(e.name) + (has(e.value) ? size(bytes(e.value)) : 0)).sum() : 0)",
        ]
    )
    return f"(has(object.spec.{containers}) ? object.spec.{containers}.map(c, {each}).sum() : 0)"


_TEXT_BYTES = " + ".join(_text_bytes(kind) for kind in ("containers", "initContainers", "ephemeralContainers"))
"""A pod spec's free text: everything else in it is names, enums, quantities and short lists of them."""


_DECIMAL = "'^[0-9]*\\\\.?[0-9]+$'"
_MEMORY_FLOOR = [
    {
        "name": "largestGpuMemory",
        # A binding without a paramRef gives null params (kubernetes/apiserver pkg/admission/plugin/policy/generic/
        # policy_dispatcher.go CollectParams @v0.36.3): so while the binding catches up with its policy.
        "expression": f"params != null && has(params.data) && '{LARGEST_GPU_MEMORY_KEY}' in params.data ? "
        f"params.data['{LARGEST_GPU_MEMORY_KEY}'] : ''",
    },
    {
        "name": "configuredMinGpuMemory",
        "expression": value("namespaceObject", "annotations", MIN_GPU_MEMORY_ANNOTATION),
    },
    {
        "name": "memoryFloorKnown",
        "expression": "variables.largestGpuMemory.matches('^[0-9]+$') && "
        "variables.configuredMinGpuMemory.matches('^[0-9]+$') && "
        f"variables.minGpuFraction.matches({_DECIMAL})",
    },
    {
        "name": "fractionOfLargest",
        "expression": "variables.memoryFloorKnown ? "
        "double(variables.minGpuFraction) * double(variables.largestGpuMemory) : 0.0",
    },
    {
        # ceil(fractionOfLargest), then the larger of it and the configured minimum (memory_floor_mib); '' until
        # the params hold the GPUs, which refuses every gpu-memory pod until then (KAI prepares none before).
        "name": "minGpuMemory",
        "expression": "!variables.memoryFloorKnown ? '' : "
        "int(variables.configuredMinGpuMemory) >= int(variables.fractionOfLargest) + "
        "(double(int(variables.fractionOfLargest)) < variables.fractionOfLargest ? 1 : 0) ? "
        "variables.configuredMinGpuMemory : string(int(variables.fractionOfLargest) + "
        "(double(int(variables.fractionOfLargest)) < variables.fractionOfLargest ? 1 : 0))",
    },
]
"""The team's gpu-memory floor, computed where it is checked from what the namespace says (config) and the
shared params say (the GPUs, once the GPU gate has read them): one shared object, not a patch per team."""


def kai_variables(kai_namespace: str) -> list[dict[str, str]]:
    """Needs the pod policy's `sharedConfigMap` and `fraction` variables, defined before these."""
    ns = "namespaceObject"
    return [
        {
            "name": "podGrouper",
            "expression": f"request.userInfo.username == '{KAI_POD_GROUPER_USER.format(namespace=kai_namespace)}'",
        },
        {
            "name": "binder",
            "expression": f"request.userInfo.username == '{KAI_BINDER_USER.format(namespace=kai_namespace)}'",
        },
        {
            "name": "numaExporter",
            "expression": f"request.userInfo.username == '{KAI_NUMA_EXPORTER_USER.format(namespace=kai_namespace)}'",
        },
        {"name": "priorityClass", "expression": value("object", "labels", PRIORITY_LABEL)},
        {"name": "priorityClasses", "expression": value(ns, "annotations", PRIORITY_CLASSES_ANNOTATION)},
        {"name": "gpuFraction", "expression": value("object", "annotations", "gpu-fraction")},
        {"name": "minGpuFraction", "expression": value(ns, "annotations", MIN_GPU_FRACTION_ANNOTATION)},
        {"name": "gpuMemory", "expression": value("object", "annotations", "gpu-memory")},
        *_MEMORY_FLOOR,
        {"name": "fractionDevices", "expression": value("object", "annotations", GPU_FRACTION_DEVICES_ANNOTATION)},
        {"name": "maxFractionDevices", "expression": value(ns, "annotations", MAX_FRACTION_DEVICES_ANNOTATION)},
        {"name": "maxGrace", "expression": value(ns, "annotations", MAX_GRACE_ANNOTATION)},
        {"name": "maxAnnotationBytes", "expression": value(ns, "annotations", MAX_ANNOTATION_BYTES_ANNOTATION)},
        {
            # Keys are qualified names (ASCII); a value is counted in UTF-8 bytes, as etcd stores it.
            "name": "annotationBytes",
            "expression": "has(object.metadata.annotations) ? object.metadata.annotations.map(k, size(k) + "
            "size(bytes(object.metadata.annotations[k]))).sum() : 0",
        },
        {"name": "maxTextBytes", "expression": value(ns, "annotations", MAX_TEXT_BYTES_ANNOTATION)},
        {"name": "textBytes", "expression": _TEXT_BYTES},
        {
            "name": "prefixValid",
            "expression": f"variables.sharedConfigMap.matches('{_CONFIGMAP_PREFIX}')",
        },
        {"name": "preparedByKai", "expression": f"variables.prefixValid && ({any_container(_PREPARED_BY_KAI)})"},
    ]


def _on_create_or_change(kind: Kind, key: str, check: str) -> str:
    """`check` holds on CREATE, and on UPDATE when the key changed."""
    return f"(request.operation == 'UPDATE' && {unchanged(kind, key)}) || ({check})"


def _priority_validations() -> list[dict[str, Any]]:
    allowed = (
        "variables.priorityClass == '' || (!variables.priorityClass.startsWith('system-') && "
        "variables.priorityClasses != '' && "
        "(',' + variables.priorityClasses + ',').contains(',' + variables.priorityClass + ','))"
    )
    preemptibility = f"{value('object', 'labels', PREEMPTIBILITY_LABEL)} in {cel_list(['', *PREEMPTIBILITY_VALUES])}"
    return [
        validation(
            _on_create_or_change("labels", PRIORITY_LABEL, allowed),
            f"the label {PRIORITY_LABEL} names a priority class this team may not use",
            f"'the label {PRIORITY_LABEL}=' + variables.priorityClass + ' is not one of this team\\'s priority "
            "classes (' + variables.priorityClasses + '); leave it out for train'",
        ),
        validation(
            _on_create_or_change("labels", PREEMPTIBILITY_LABEL, preemptibility),
            f"the label {PREEMPTIBILITY_LABEL} may only be {' or '.join(PREEMPTIBILITY_VALUES)}",
        ),
    ]


def _bookkeeping_validations() -> list[dict[str, Any]]:
    """KAI_POD_KEYS: never on a new pod (but a gang's own pod-group-name, gang_rules); afterwards changed only
    by the KAI component that writes it."""
    checks = []
    for kind, key, prefix, writer in KAI_POD_KEYS:
        what = f"the {kind[:-1]} {key}{'*' if prefix else ''}"
        carried = any_with_prefix("object", kind, key) if prefix else present("object", kind, key)
        if key != POD_GROUP_ANNOTATION:
            checks.append(
                validation(
                    f"request.operation != 'CREATE' || !{carried}",
                    f"{what} is KAI's bookkeeping; a tenant's pod may not carry it",
                )
            )
        same = unchanged_with_prefix(kind, key) if prefix else unchanged(kind, key)
        allowed = f"({same})"
        if writer is not None:
            allowed += f" || {_WRITERS[writer]}"
        if key == POD_GROUP_ANNOTATION:
            # The pod-grouper only ever adds it, once, and for a pod without owners names the pod's own group
            # (pkg/podgrouper/pod_controller.go, podgroup/handler.go @v0.16.8): anything else would join a
            # PodGroup of a chosen name, in any namespace.
            allowed += (
                f" && !{present('oldObject', kind, key)} && "
                f"{value('object', kind, key)} == 'pg-' + object.metadata.name + '-' + object.metadata.uid"
            )
        only = f"only KAI's {writer} may set" if writer else "nothing may add, change or remove"
        checks.append(
            validation(
                f"request.operation != 'UPDATE' || {allowed}",
                f"{what} is KAI's bookkeeping: {only} it on a tenant's pod",
            )
        )
    utility = " || ".join(f"{value('object', 'labels', 'app')} == '{app}'" for app in KAI_UTILITY_APP_LABELS)
    checks.append(
        validation(
            f"!({utility})",
            f"the labels {', '.join(f'app={a}' for a in KAI_UTILITY_APP_LABELS)} mark KAI's own pods, "
            "whose GPUs KAI does not count",
        )
    )
    spark = " && ".join(present("object", "labels", label) for label in SPARK_GROUPER_LABELS)
    checks.append(
        validation(
            f"request.operation != 'CREATE' || !({spark})",
            f"the labels {' and '.join(SPARK_GROUPER_LABELS)} make KAI name the pod's PodGroup after a label a team "
            f"chooses, which KAI joins across namespaces: run a Spark application as a gang ({GANG_SIZE_ANNOTATION} "
            "and gpu-tenancy/gang) instead",
        )
    )
    return checks


def _fraction_validations() -> list[dict[str, Any]]:
    at_least = (
        "variables.gpuFraction == '' || (variables.gpuFraction.matches('^[0-9]*\\\\.?[0-9]+$') && "
        "variables.minGpuFraction != '' && double(variables.gpuFraction) >= double(variables.minGpuFraction))"
    )
    memory = (
        "variables.gpuMemory == '' || (variables.gpuMemory.matches('^[0-9]+$') && "
        "variables.minGpuMemory != '' && int(variables.gpuMemory) >= int(variables.minGpuMemory))"
    )
    devices = (
        "variables.fractionDevices == '' || (variables.fractionDevices.matches('^[0-9]+$') && "
        "variables.maxFractionDevices != '' && int(variables.fractionDevices) <= int(variables.maxFractionDevices))"
    )
    on_create = "request.operation != 'CREATE' || "
    return [
        validation(
            on_create + at_least,
            "gpu-fraction is below this team's minimum",
            "'gpu-fraction ' + variables.gpuFraction + ' is below this team\\'s minimum of ' + "
            "variables.minGpuFraction + ' (a decimal): KAI would charge next to nothing for a pod that can use "
            "the whole device'",
        ),
        validation(
            on_create + memory,
            "gpu-memory is below this team's minimum",
            "'gpu-memory ' + variables.gpuMemory + ' is below this team\\'s minimum of ' + variables.minGpuMemory + "
            "' MiB (a whole number): KAI would charge next to nothing for a pod that can use the whole device'",
        ),
        validation(
            on_create + devices,
            f"{GPU_FRACTION_DEVICES_ANNOTATION} is above this team's limit",
            f"'{GPU_FRACTION_DEVICES_ANNOTATION} ' + variables.fractionDevices + ' is above this team\\'s limit of ' "
            "+ variables.maxFractionDevices + ': each device a fraction touches is closed to whole-GPU jobs'",
        ),
        validation(
            f"{on_create}variables.sharedConfigMap == '' || variables.prefixValid",
            f"runai/shared-gpu-configmap must be a ConfigMap name that ends in {SHARED_GPU_CONFIGMAP_SUFFIX}",
        ),
        validation(
            f"{on_create}!variables.fraction || variables.preparedByKai",
            "KAI Scheduler is not ready yet: its webhook has not prepared this GPU-fraction pod; "
            "it is retried and runs once KAI serves",
        ),
    ]


def _eviction_validations() -> list[dict[str, Any]]:
    """KAI evicts with empty DeleteOptions, so the pod's own grace period applies, and it counts a releasing pod as
    holding its GPU (pkg/scheduler/cache/evictor/default_evictor.go @v0.16.8); Kubernetes sets no maximum."""
    grace = "object.spec.terminationGracePeriodSeconds"
    return [
        validation(
            f"!has({grace}) || variables.maxGrace == '' || {grace} <= int(variables.maxGrace)",
            "terminationGracePeriodSeconds is above this team's maximum",
            f"'terminationGracePeriodSeconds ' + string({grace}) + ' is above this team\\'s maximum of ' + "
            "variables.maxGrace + ' s: a pod KAI reclaims keeps its GPU for that long; checkpoint on SIGTERM "
            "within it'",
        ),
        validation(
            "request.operation != 'CREATE' || !has(object.spec.priorityClassName) || "
            "object.spec.priorityClassName == ''",
            f"a tenant's pod names its priority with the label {PRIORITY_LABEL}, never spec.priorityClassName, "
            "which would outrank KAI's classes on the node (system-node-critical included)",
        ),
    ]


def _size_validations() -> list[dict[str, Any]]:
    """Every host pod of every team, finished ones included (the quota counts only running pods), sits whole in
    the caches of KAI's pod-grouper and podgroup-controller (cmd/podgrouper/app/app.go, cmd/podgroupcontroller/app
    @v0.16.8: no transform, 200Mi and 100Mi limits by default) and pages through the gang controller's lists;
    Kubernetes allows 256 KiB of annotations (k8s.io/apimachinery pkg/api/validation/objectmeta.go
    TotalAnnotationSizeLimitB @v0.36.3) and a pod of 1.5 MiB (etcd's request limit). KAI's own writers add a few
    keys to a pod that is at the bound, so they are not held to it."""
    kai = "variables.podGrouper || variables.binder || variables.numaExporter"
    return [
        validation(
            f"{kai} || variables.maxAnnotationBytes == '' || "
            "variables.annotationBytes <= int(variables.maxAnnotationBytes)",
            "the pod's annotations are above this team's maximum size",
            "'the pod\\'s annotations hold ' + string(variables.annotationBytes) + ' bytes (its labels included, "
            "which the syncer copies into one), above this team\\'s maximum of ' + variables.maxAnnotationBytes + "
            "': keep large data in a ConfigMap or a volume'",
        ),
        validation(
            "variables.maxTextBytes == '' || variables.textBytes <= int(variables.maxTextBytes)",
            "the pod's command, args and env are above this team's maximum size",
            "'the pod\\'s containers hold ' + string(variables.textBytes) + ' bytes of command, args and env, "
            "above this team\\'s maximum of ' + variables.maxTextBytes + ': keep large configuration in a "
            "ConfigMap or a volume'",
        ),
    ]


def kai_validations() -> list[dict[str, Any]]:
    return [
        *_priority_validations(),
        *_bookkeeping_validations(),
        *_fraction_validations(),
        *_eviction_validations(),
        *_size_validations(),
    ]

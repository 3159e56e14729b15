"""What KAI's mutating admission webhook does to a pod, for tests that follow a pod through the API server.

A stand-in, read at kai-scheduler/KAI-Scheduler v0.16.8 (pkg/admission/webhook/v1alpha2/gpusharing,
deviceaccess, runtimeenforcement; pkg/binder/common/gpusharingconfigmap/config_map.go;
pkg/operator/operands/admission/resources.go): the webhook matches pods with schedulerName
kai-scheduler on CREATE only. For a fraction (gpu-fraction or gpu-memory) it keeps a
runai/shared-gpu-configmap the pod already has, or makes <name, at most 33 characters, trimmed
of '.' and '-'>-<7 random>-shared-gpu; it points the fraction container (the first, or the one
gpu-fraction-container-name names, init containers first) at <prefix>-<index> (<prefix>-i<index>
for an init container): NVIDIA_VISIBLE_DEVICES, RUNAI_NUM_OF_GPUS and GPU_PORTION by
configMapKeyRef, envFrom <...>-evar, and a volume of the ConfigMap; and gives the pod
runtimeClassName nvidia if it has none. With blockNvidiaVisibleDevices, every other container
that asks for no GPU gets NVIDIA_VISIBLE_DEVICES=void (an existing value overwritten).
Validation by KAI's own webhook is left out on purpose: the tenant policy must stand without it.
"""

import copy
import re
from typing import Any

from config.upstream import (
    GPU_FRACTION_ANNOTATIONS,
    NVIDIA_VISIBLE_DEVICES,
    SCHEDULER_NAME,
    SHARED_GPU_CONFIGMAP_ANNOTATION,
    SHARED_GPU_CONFIGMAP_SUFFIX,
)

RANDOM = "k2j4x9q"
"""KAI's seven random characters, fixed here."""
MAX_BASE_NAME = 33
"""(63 - 13) - len('shared-gpu') - len('-0') - 5, for container index 0 (config_map.go)."""


def _requests_gpu(container: dict[str, Any]) -> bool:
    resources = container.get("resources") or {}
    asked = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
    return any(name.startswith("nvidia.com/") for name in asked)


def _set_env(container: dict[str, Any], entry: dict[str, Any]) -> None:
    env = [e for e in container.get("env", []) if e["name"] != entry["name"]]
    container["env"] = [*env, entry]


def _fraction_container(pod: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The container the fraction is for, and its index as ConfigMap names write it."""
    wanted = pod["metadata"].get("annotations", {}).get("gpu-fraction-container-name")
    for kind, prefix in (("initContainers", "i"), ("containers", "")):
        for index, container in enumerate(pod["spec"].get(kind, [])):
            if container["name"] == wanted:
                return container, f"{prefix}{index}"
    return pod["spec"]["containers"][0], "0"


def kai_mutate(pod: dict[str, Any]) -> dict[str, Any]:
    if pod["spec"].get("schedulerName") != SCHEDULER_NAME:
        return pod
    pod = copy.deepcopy(pod)
    annotations = pod["metadata"].setdefault("annotations", {})
    fraction = any(a in annotations for a in GPU_FRACTION_ANNOTATIONS)
    target: dict[str, Any] | None = None
    if fraction:
        base = pod["metadata"]["name"][:MAX_BASE_NAME].rstrip(".-")
        prefix = annotations.setdefault(
            SHARED_GPU_CONFIGMAP_ANNOTATION, f"{base}-{RANDOM}{SHARED_GPU_CONFIGMAP_SUFFIX}"
        )
        target, index = _fraction_container(pod)
        configmap = f"{prefix}-{index}"
        for variable in (NVIDIA_VISIBLE_DEVICES, "RUNAI_NUM_OF_GPUS", "GPU_PORTION"):
            _set_env(target, {"name": variable, "valueFrom": {"configMapKeyRef": {"name": configmap, "key": variable}}})
        target["envFrom"] = [*target.get("envFrom", []), {"configMapRef": {"name": f"{configmap}-evar"}}]
        volume = re.sub(r"[^a-z0-9-]+", "-", f"{configmap}-vol".lower()).strip("-")
        pod["spec"]["volumes"] = [*pod["spec"].get("volumes", []), {"name": volume, "configMap": {"name": configmap}}]
        if not pod["spec"].get("runtimeClassName"):
            pod["spec"]["runtimeClassName"] = "nvidia"
    for container in [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]:
        if container is not target and not _requests_gpu(container):
            existing = next((e for e in container.get("env", []) if e["name"] == NVIDIA_VISIBLE_DEVICES), None)
            _set_env(container, {**(existing or {}), "name": NVIDIA_VISIBLE_DEVICES, "value": "void"})
    return pod

"""What KAI's mutating admission webhook does to a pod, for tests that follow a pod through the API server.

Read at kai-scheduler/KAI-Scheduler v0.16.4 (pkg/admission/webhook/v1alpha2/gpusharing,
deviceaccess, runtimeenforcement; pkg/binder/common/gpu_access.go): the webhook matches
pods with schedulerName kai-scheduler on CREATE; for a fraction (gpu-fraction or
gpu-memory) it keeps or makes the runai/shared-gpu-configmap prefix and points the
first container's NVIDIA_VISIBLE_DEVICES, RUNAI_NUM_OF_GPUS and GPU_PORTION at
<prefix>-0 (envFrom <prefix>-0-evar), and gives the pod runtimeClassName nvidia
if it has none; with blockNvidiaVisibleDevices, every other container that asks
for no GPU gets NVIDIA_VISIBLE_DEVICES=void. Validation by KAI's own webhook is
left out on purpose: the tenant policy must stand without it.
"""

import copy
from typing import Any

from config.upstream import GPU_FRACTION_ANNOTATIONS, SCHEDULER_NAME

SHARED_CONFIGMAP = "runai/shared-gpu-configmap"


def _requests_gpu(container: dict[str, Any]) -> bool:
    resources = container.get("resources") or {}
    asked = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
    return any(name.startswith("nvidia.com/") for name in asked)


def _set_env(container: dict[str, Any], entry: dict[str, Any]) -> None:
    env = [e for e in container.get("env", []) if e["name"] != entry["name"]]
    container["env"] = [*env, entry]


def kai_mutate(pod: dict[str, Any]) -> dict[str, Any]:
    if pod["spec"].get("schedulerName") != SCHEDULER_NAME:
        return pod
    pod = copy.deepcopy(pod)
    annotations = pod["metadata"].setdefault("annotations", {})
    fraction = any(a in annotations for a in GPU_FRACTION_ANNOTATIONS)
    containers = pod["spec"]["containers"]
    if fraction:
        prefix = annotations.setdefault(SHARED_CONFIGMAP, f"{pod['metadata']['name']}-k2j4x9q-shared-gpu")
        for variable in ("NVIDIA_VISIBLE_DEVICES", "RUNAI_NUM_OF_GPUS", "GPU_PORTION"):
            ref = {"configMapKeyRef": {"name": f"{prefix}-0", "key": variable}}
            _set_env(containers[0], {"name": variable, "valueFrom": ref})
        containers[0]["envFrom"] = [*containers[0].get("envFrom", []), {"configMapRef": {"name": f"{prefix}-0-evar"}}]
        pod["spec"].setdefault("runtimeClassName", "nvidia")
    for container in [*pod["spec"].get("initContainers", []), *containers]:
        is_fraction_container = fraction and container is containers[0]
        names_devices = any(e["name"] == "NVIDIA_VISIBLE_DEVICES" for e in container.get("env", []))
        if not (is_fraction_container or _requests_gpu(container) or names_devices):
            _set_env(container, {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"})
    return pod

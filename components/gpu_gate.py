"""The GPU readiness gate: a Job that only completes if a pod really got a GPU.

Its first container asks for `nvidia.com/gpu: 1` on a node labelled
`nvidia.com/gpu.present=true` and runs nvidia-smi there, which needs the device
plugin, the container toolkit and the driver all working. Its second container
records every GPU node's facts for the `gpu` stack output (scripts/gpu-inventory.sh).
"""

from typing import Any

import pulumi

from components.gate_job import LOCKED_DOWN, gate_pod, script_container
from components.host_scripts import SCRIPTS_DIR

INVENTORY_SCRIPT = "gpu-inventory.sh"
INVENTORY_CONFIG_MAP = "gpu-inventory"
INVENTORY_KEY = "nodes.tsv"
GPU_NODE_LABEL = "nvidia.com/gpu.present"
GPU_RESOURCE = "nvidia.com/gpu"

NODE_RULES: list[dict[str, Any]] = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]
INVENTORY_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "patch"]},
]


def gate_files() -> dict[str, str]:
    return {INVENTORY_SCRIPT: (SCRIPTS_DIR / INVENTORY_SCRIPT).read_text()}


def gpu_gate_pod_spec(
    *,
    gpu_image: str,
    kubectl_image: str,
    namespace: pulumi.Input[str],
    service_account: pulumi.Input[str],
    config_map: pulumi.Input[str],
) -> dict[str, Any]:
    pod = gate_pod(
        service_account=service_account,
        config_map=config_map,
        containers=[
            script_container(
                name="inventory",
                image=kubectl_image,
                script=INVENTORY_SCRIPT,
                env=[{"name": "INVENTORY", "value": INVENTORY_CONFIG_MAP}, {"name": "NAMESPACE", "value": namespace}],
            )
        ],
    )
    return {
        **pod,
        "nodeSelector": {GPU_NODE_LABEL: "true"},
        # Managed clusters often taint GPU nodes so that only GPU pods land there.
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
        "initContainers": [
            {
                "name": "nvidia-smi",
                "image": gpu_image,
                "command": ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv"],
                "resources": {"limits": {GPU_RESOURCE: 1}},
                "securityContext": LOCKED_DOWN,
            }
        ],
    }

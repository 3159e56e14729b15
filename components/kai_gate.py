"""The pieces of KAI's readiness gate: a script, a probe Queue and the Job pod that runs them.

Plain functions (Pulumi appears only in type hints), so they are tested directly.
"""

import hashlib
import json
from pathlib import Path
from typing import Any

import pulumi
import yaml

from components.queue_manifest import queue_manifest
from config.hierarchy import ADMISSION_PROBE_QUEUE
from config.queues import QueueConfig

SCRIPT_NAME = "kai-ready.sh"
PROBE_NAME = "probe-queue.yaml"
MOUNT_PATH = "/gate"
KAI_CONFIG_NAME = "kai-config"
"""The cluster-scoped `kai.scheduler/v1` Config that KAI's operator reports readiness on."""

GATE_SCRIPT = Path(__file__).parent / "scripts" / SCRIPT_NAME

PROBE_QUEUE = QueueConfig(name=ADMISSION_PROBE_QUEUE)
"""Submitted only as a dry run: it is never stored, so it cannot clash with real queues."""

NON_ROOT_UID = 65532


def gate_files() -> dict[str, str]:
    """ConfigMap data: the script and the probe manifest it submits."""
    return {
        SCRIPT_NAME: GATE_SCRIPT.read_text(),
        PROBE_NAME: yaml.safe_dump(queue_manifest(PROBE_QUEUE), sort_keys=True),
    }


def release_fingerprint(chart: str, version: str, values: dict[str, Any]) -> str:
    """Changes whenever the release would change, so the gate Job is replaced and runs again."""
    canonical = json.dumps({"chart": chart, "version": version, "values": values}, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def gate_pod_spec(
    *,
    image: str,
    service_account: pulumi.Input[str],
    config_map: pulumi.Input[str],
    timeout_seconds: int,
) -> dict[str, Any]:
    """A locked-down pod that runs the gate script with kubectl and nothing else."""
    return {
        "serviceAccountName": service_account,
        "restartPolicy": "Never",
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": NON_ROOT_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": "kai-ready",
                "image": image,
                "command": ["/bin/bash", f"{MOUNT_PATH}/{SCRIPT_NAME}"],
                "env": [
                    {"name": "KAI_CONFIG", "value": KAI_CONFIG_NAME},
                    {"name": "PROBE_MANIFEST", "value": f"{MOUNT_PATH}/{PROBE_NAME}"},
                    {"name": "TIMEOUT_SECONDS", "value": str(timeout_seconds)},
                    # kubectl caches discovery under $HOME; the root filesystem is read-only.
                    {"name": "HOME", "value": "/tmp"},
                ],
                "resources": {
                    "requests": {"cpu": "10m", "memory": "32Mi"},
                    "limits": {"memory": "128Mi"},
                },
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]},
                },
                "volumeMounts": [
                    {"name": "gate", "mountPath": MOUNT_PATH, "readOnly": True},
                    {"name": "tmp", "mountPath": "/tmp"},
                ],
            }
        ],
        "volumes": [
            {"name": "gate", "configMap": {"name": config_map}},
            {"name": "tmp", "emptyDir": {}},
        ],
    }


GATE_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["kai.scheduler"], "resources": ["configs"], "verbs": ["get", "list", "watch"]},
    # A dry-run create needs the create permission; nothing is ever stored.
    {"apiGroups": ["scheduling.run.ai"], "resources": ["queues"], "verbs": ["create"]},
]

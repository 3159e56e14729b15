"""The pieces of KAI's readiness gate: a script, a probe Queue and the Job pod that runs them.

Plain functions (Pulumi appears only in type hints), so they are tested directly.
"""

from pathlib import Path
from typing import Any

import yaml

from components.gate_job import MOUNT_PATH, fingerprint, script_container
from components.queue_manifest import queue_manifest
from config.hierarchy import ADMISSION_PROBE_QUEUE
from config.queues import QueueConfig

SCRIPT_NAME = "kai-ready.sh"
PROBE_NAME = "probe-queue.yaml"
KAI_CONFIG_NAME = "kai-config"
"""The cluster-scoped `kai.scheduler/v1` Config that KAI's operator reports readiness on."""

GATE_SCRIPT = Path(__file__).parent / "scripts" / SCRIPT_NAME

PROBE_QUEUE = QueueConfig(name=ADMISSION_PROBE_QUEUE)
"""Submitted only as a dry run: it is never stored, so it cannot clash with real queues."""


def gate_files() -> dict[str, str]:
    """ConfigMap data: the script and the probe manifest it submits."""
    return {
        SCRIPT_NAME: GATE_SCRIPT.read_text(),
        PROBE_NAME: yaml.safe_dump(queue_manifest(PROBE_QUEUE), sort_keys=True),
    }


def release_fingerprint(chart: str, version: str, values: dict[str, Any]) -> str:
    """Changes whenever the release would change, so the gate Job is replaced and runs again."""
    return fingerprint({"chart": chart, "version": version, "values": values})


def kai_gate_container(*, image: str, timeout_seconds: int) -> dict[str, Any]:
    return script_container(
        name="kai-ready",
        image=image,
        script=SCRIPT_NAME,
        env=[
            {"name": "KAI_CONFIG", "value": KAI_CONFIG_NAME},
            {"name": "PROBE_MANIFEST", "value": f"{MOUNT_PATH}/{PROBE_NAME}"},
            {"name": "TIMEOUT_SECONDS", "value": str(timeout_seconds)},
        ],
    )


GATE_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["kai.scheduler"], "resources": ["configs"], "verbs": ["get", "list", "watch"]},
    # A dry-run create needs the create permission; nothing is ever stored.
    {"apiGroups": ["scheduling.run.ai"], "resources": ["queues"], "verbs": ["create"]},
]

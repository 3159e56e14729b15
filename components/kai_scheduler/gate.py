"""KAI's readiness gate: its steps, the probe Queue they submit, and the access they need.

Helm's wait is not enough: the chart installs only KAI's operator, which then
deploys the queue-controller, whose validating webhook refuses every Queue
(failurePolicy Fail) until it serves. So the gate waits for the operator's own
verdict, the Ready condition of the Config `kai-config`, then submits a probe
Queue as a server-side dry run: the API server runs the webhooks for a dry run
and stores nothing (kubernetes/apiserver pkg/endpoints/handlers/create.go and
pkg/registry/generic/registry/dryrun.go @v0.36.0). Until the webhook answers,
that step fails and the kubelet retries it.
"""

import yaml

from components.shared.gate import Grant
from components.shared.gate_pod import MOUNT_PATH, GateStep
from components.shared.queue_manifest import queue_manifest
from config.queue_hierarchy.hierarchy import ADMISSION_PROBE_QUEUE
from config.queue_hierarchy.queues import QueueConfig
from config.upstream import KAI_CONFIG

PROBE_FILE = "probe-queue.yaml"
PROBE_QUEUE = QueueConfig(name=ADMISSION_PROBE_QUEUE)
"""Submitted only as a dry run: it is never stored, so it cannot clash with real queues."""

GATE_GRANTS = (
    Grant(
        key="cluster",
        rules=(
            {"apiGroups": ["kai.scheduler"], "resources": ["configs"], "verbs": ["get", "list", "watch"]},
            # A dry-run create needs the create permission; nothing is ever stored.
            {"apiGroups": ["scheduling.run.ai"], "resources": ["queues"], "verbs": ["create"]},
        ),
    ),
)


def gate_files() -> dict[str, str]:
    return {PROBE_FILE: yaml.safe_dump(queue_manifest(PROBE_QUEUE), sort_keys=True)}


def kai_gate_steps(timeout_seconds: int) -> tuple[GateStep, ...]:
    config = f"configs.kai.scheduler/{KAI_CONFIG}"
    timeout = f"--timeout={timeout_seconds}s"
    return (
        # kai-config is applied by a post-install hook Job, after the release's own objects:
        # deployments/kai-scheduler/templates/hooks/post/kai-config-deployer @v0.16.8.
        GateStep("config-created", ("wait", "--for=create", config, timeout)),
        GateStep("config-ready", ("wait", "--for=condition=Ready", config, timeout)),
        GateStep("queue-admitted", ("create", "--dry-run=server", "-f", f"{MOUNT_PATH}/{PROBE_FILE}", "-o", "name")),
    )

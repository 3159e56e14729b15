"""KAI's readiness gate: its steps, the probe Queue they submit, and the access they need.

Helm's wait is not enough: the chart installs only KAI's operator, which then
deploys the queue-controller, whose validating webhook refuses every Queue
(failurePolicy Fail) until it serves. So the gate waits for the operator's own
verdict, the Ready condition of the Config `kai-config`, then submits a probe
Queue as a server-side dry run: the API server runs the webhooks for a dry run
and stores nothing (kubernetes/apiserver pkg/endpoints/handlers/create.go and
pkg/registry/generic/registry/dryrun.go @v0.36.0). Until the webhook answers,
that step fails and the Job retries it. After an upgrade, it also waits until
every operand Deployment has rolled out.
"""

import pulumi
import yaml

from components.kai_scheduler.shard import SHARD_NAME
from components.shared.gate import Grant
from components.shared.gate_pod import MOUNT_PATH, GateStep
from components.shared.queue_manifest import queue_manifest
from config.queue_hierarchy.hierarchy import ADMISSION_PROBE_QUEUE
from config.queue_hierarchy.queues import QueueConfig
from config.upstream import KAI_CONFIG, SCHEDULER_NAME

PROBE_FILE = "probe-queue.yaml"
PROBE_QUEUE = QueueConfig(name=ADMISSION_PROBE_QUEUE)
"""Submitted only as a dry run: it is never stored, so it cannot clash with real queues."""


def gate_grants(namespace: pulumi.Input[str]) -> tuple[Grant, ...]:
    """`namespace` is the Namespace resource's name, so the Role waits for it: a plain string let the Role be
    created while KAI's namespace still waited for the GPU gate, and pulumi-kubernetes gives up on a missing
    namespace after its five retries (provider/pkg/await/await.go Creation)."""
    return (
        Grant(
            key="cluster",
            rules=(
                {"apiGroups": ["kai.scheduler"], "resources": ["configs"], "verbs": ["get", "list", "watch"]},
                # A dry-run create needs the create permission; nothing is ever stored.
                {"apiGroups": ["scheduling.run.ai"], "resources": ["queues"], "verbs": ["create"]},
            ),
        ),
        # rollout status reads the operands' Deployments, in KAI's namespace only.
        Grant(
            key="operands",
            rules=({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "watch"]},),
            namespace=namespace,
        ),
    )


KAI_OPERAND_SELECTOR = "app.kubernetes.io/managed-by=kai-operator"
"""Every operand Deployment KAI's operator makes, its schedulers' included, and not the operator's own:
pkg/operator/operands/common/common.go DeploymentForKAIConfig (OperatorManagedByLabelKey/Value) @v0.16.8."""


def gate_files() -> dict[str, str]:
    return {PROBE_FILE: yaml.safe_dump(queue_manifest(PROBE_QUEUE), sort_keys=True)}


def kai_gate_steps(timeout_seconds: int, namespace: str) -> tuple[GateStep, ...]:
    config = f"configs.kai.scheduler/{KAI_CONFIG}"
    timeout = f"--timeout={timeout_seconds}s"
    scheduler = f"deployment/{SCHEDULER_NAME}-{SHARD_NAME}"
    return (
        # kai-config is applied by a post-install hook Job, after the release's own objects:
        # deployments/kai-scheduler/templates/hooks/post/kai-config-deployer @v0.16.8.
        GateStep("config-created", ("wait", "--for=create", config, timeout)),
        GateStep("config-ready", ("wait", "--for=condition=Ready", config, timeout)),
        # The operator makes the scheduler's Deployment, <schedulerName>-<shard>, from the platform's shard, which is
        # applied after the release: until it exists, the rollout below would pass without a scheduler
        # (pkg/operator/operands/scheduler/resources_for_shard.go DeploymentName @v0.16.8).
        GateStep("scheduler-created", ("wait", "--for=create", scheduler, "-n", namespace, timeout)),
        # Ready reads each operand's updatedReplicas and Available condition, but not observedGeneration nor old
        # pods still terminating, and leaves the scheduler's Deployment (the SchedulingShard's) out
        # (pkg/operator/operands/common/common.go isControllerAvailable @v0.16.8). After an upgrade every operand
        # Deployment, the scheduler's included, has rolled out: kubectl's Deployment status viewer checks all of
        # that (kubernetes/kubectl pkg/polymorphichelpers/rollout_status.go @v0.36.0).
        GateStep(
            "operands-rolled-out",
            ("rollout", "status", "deployment", "-l", KAI_OPERAND_SELECTOR, "-n", namespace, timeout),
        ),
        GateStep("queue-admitted", ("create", "--dry-run=server", "-f", f"{MOUNT_PATH}/{PROBE_FILE}", "-o", "name")),
    )

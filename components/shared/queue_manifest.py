"""Rendering a queue entry into a KAI `Queue` object (scheduling.run.ai/v2)."""

from typing import Any

from components.shared.labels import MANAGED_BY
from config.queue_hierarchy.queues import RESOURCES, QueueConfig
from config.types import plain_number

API_VERSION = "scheduling.run.ai/v2"
KIND = "Queue"


def queue_spec(queue: QueueConfig) -> dict[str, Any]:
    """Every field explicit: all three resources always, priority always.

    KAI reads an unset resource field as 0 and enforces it, so nothing is left to
    KAI's defaults; the preview shows exactly what the scheduler will enforce.
    """
    spec: dict[str, Any] = {
        "priority": queue.priority,
        "resources": {
            resource: {
                "quota": plain_number(share.quota),
                "limit": plain_number(share.limit),
                "overQuotaWeight": plain_number(share.over_quota_weight),
            }
            for resource in RESOURCES
            for share in [queue.resources.share(resource)]
        },
    }
    optional = {
        "parentQueue": queue.parent_queue,
        "displayName": queue.display_name,
        "preemptMinRuntime": queue.preempt_min_runtime,
        "reclaimMinRuntime": queue.reclaim_min_runtime,
    }
    spec.update({key: value for key, value in optional.items() if value is not None})
    return spec


def queue_manifest(queue: QueueConfig) -> dict[str, Any]:
    """The whole object, as `kubectl apply` would take it."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": queue.name, "labels": dict(MANAGED_BY)},
        "spec": queue_spec(queue),
    }

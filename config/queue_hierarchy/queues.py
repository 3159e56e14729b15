"""KAI `Queue` entries, spelled exactly as the Queue CRD's spec so users can paste from KAI's docs."""

from typing import Literal

from pydantic import Field, ValidationInfo, model_validator

from config.issues import ConfigIssue
from config.types import (
    UNLIMITED,
    Amount,
    ConfigModel,
    GoDuration,
    Priority,
    QueueName,
    Weight,
    plain_number,
)

ResourceName = Literal["gpu", "cpu", "memory"]
RESOURCES: tuple[ResourceName, ...] = ("gpu", "cpu", "memory")

KAI_RULES_ONLY = "kai-rules-only"
"""Validation context key: accept what KAI accepts (a fair-share scenario), not only what stack config does."""

UNITS: dict[ResourceName, str] = {"gpu": "GPU", "cpu": "millicores", "memory": "MB"}
"""KAI's units: GPUs in devices (fractions allowed), CPU in millicores, memory in 10^6 bytes."""


class ResourceShare(ConfigModel):
    """One resource's share of the pool for a queue."""

    quota: Amount = Field(description="Guaranteed amount; -1 guarantees everything available.")
    limit: Amount = Field(default=UNLIMITED, description="Hard cap including over-quota use; -1 for no cap.")
    over_quota_weight: Weight = Field(default=1, description="Share of idle capacity relative to sibling queues.")

    @property
    def limit_below_quota(self) -> bool:
        """KAI accepts it (the queue then gets at most its limit); stack config refuses it as a mistake."""
        return UNLIMITED not in (self.limit, self.quota) and self.limit < self.quota

    @model_validator(mode="after")
    def _limit_not_below_quota(self, info: ValidationInfo) -> "ResourceShare":
        if self.limit_below_quota and not (info.context or {}).get(KAI_RULES_ONLY):
            raise ConfigIssue(
                ("limit",),
                self.limit,
                f"must be -1 (no cap) or at least the quota ({plain_number(self.quota)})",
            )
        return self


# KAI reads an unset field as 0 and enforces it, so a queue without cpu/memory
# would refuse every pod that requests any. -1/-1 means "not governed".
UNGOVERNED = ResourceShare(quota=UNLIMITED, limit=UNLIMITED, over_quota_weight=1)
NO_GPU_GUARANTEE = ResourceShare(quota=0, limit=UNLIMITED, over_quota_weight=1)


class QueueResources(ConfigModel):
    """Every Queue is rendered with all three resources, never with a missing one."""

    # Frozen, hence hashable, so pydantic hands out the one default without copying or calling anything: a tree
    # of 100,000 queues shares two objects.
    gpu: ResourceShare = NO_GPU_GUARANTEE
    cpu: ResourceShare = UNGOVERNED
    memory: ResourceShare = UNGOVERNED

    def share(self, resource: ResourceName) -> ResourceShare:
        share: ResourceShare = getattr(self, resource)
        return share


class QueueConfig(ConfigModel):
    """One entry of `gpu-tenancy:queues`."""

    name: QueueName
    parent_queue: QueueName | None = None
    priority: Priority = 100
    display_name: str | None = None
    preempt_min_runtime: GoDuration | None = None
    reclaim_min_runtime: GoDuration | None = None
    resources: QueueResources = Field(default_factory=QueueResources)

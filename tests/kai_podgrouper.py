"""The PodGroup KAI's pod-grouper makes for a pod without owners, as every pod a vCluster syncs is.

A stand-in, modelled on kai-scheduler/KAI-Scheduler @v0.16.8:
pkg/podgrouper/pod_controller.go (scheduler name, skip-podgrouper, isOrphanPodWithPodGroup, the
PodGroup name pg-<pod>-<uid>), pkg/podgrouper/podgrouper/plugins/defaultgrouper/default_grouper.go
(priority class: the label priorityClassName, then spec.priorityClassName, kept only if the class
exists, else train; preemptibility: the label, else by the class's value), the queue from the
label kai.scheduler/queue, and pkg/common/podgroup/preemptible.go (a value of 100 or more is
non-preemptible).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from config.upstream import (
    DEFAULT_PRIORITY_CLASS,
    KAI_PRIORITY_CLASSES,
    NON_PREEMPTIBLE_PRIORITY,
    POD_GROUP_ANNOTATION,
    PREEMPTIBILITY_LABEL,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    SCHEDULER_NAME,
)

DEFAULT_POD_GROUP_PRIORITY = 50
"""What the scheduler uses when the PodGroup's class does not exist and none is the cluster default:
pkg/scheduler/cache/cluster_info/cluster_info.go (DefaultPodGroupPriority) @v0.16.8."""


@dataclass(frozen=True)
class PodGroup:
    name: str
    queue: str
    priority_class: str
    preemptible: bool


def pod_group(pod: Mapping[str, Any], classes: Mapping[str, int] = KAI_PRIORITY_CLASSES) -> PodGroup | None:
    """The pod's PodGroup, or None when the pod-grouper leaves the pod alone.

    `classes` are the PriorityClasses that exist in the host cluster, by name and value.
    """
    meta, spec = pod["metadata"], pod["spec"]
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    if spec.get("schedulerName") != SCHEDULER_NAME or annotations.get("kai.scheduler/skip-podgrouper") == "true":
        return None
    if POD_GROUP_ANNOTATION in annotations and not meta.get("ownerReferences"):
        return None
    # A label that is there wins even when empty; the syncer clears spec.priorityClassName anyway.
    candidate = labels[PRIORITY_LABEL] if PRIORITY_LABEL in labels else spec.get("priorityClassName", "")
    priority_class = candidate if candidate in classes else DEFAULT_PRIORITY_CLASS
    stated = labels.get(PREEMPTIBILITY_LABEL, "")
    if stated in ("preemptible", "non-preemptible"):
        preemptible = stated == "preemptible"
    else:
        preemptible = classes.get(priority_class, DEFAULT_POD_GROUP_PRIORITY) < NON_PREEMPTIBLE_PRIORITY
    return PodGroup(
        name=f"pg-{meta['name']}-{meta['uid']}",
        queue=labels.get(QUEUE_LABEL, ""),
        priority_class=priority_class,
        preemptible=preemptible,
    )

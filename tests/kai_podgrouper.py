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


@dataclass(frozen=True)
class GangStart:
    queue: str
    priority_class: str
    min_member: int
    members: tuple[str, ...]
    starts: bool


def gang_starts(pods: list[dict[str, Any]], pod_groups: list[dict[str, Any]]) -> dict[str, GangStart]:
    """What KAI's scheduler makes of pods that name a PodGroup, per PodGroup name.

    Modelled on pkg/scheduler/cache/cluster_info/cluster_info.go snapshotPodGroups and indexers.go
    @v0.16.8: PodGroups are keyed by name alone and pods are joined to them by their annotation's
    value, across namespaces; a pod whose PodGroup does not exist is ignored (it waits, unscheduled);
    a group starts only when at least minMember of its pods can start, all together.
    """
    members: dict[str, list[str]] = {}
    for pod in pods:
        group = (pod["metadata"].get("annotations") or {}).get(POD_GROUP_ANNOTATION)
        if group:
            members.setdefault(group, []).append(f"{pod['metadata']['namespace']}/{pod['metadata']['name']}")
    found = {}
    for group in pod_groups:
        name, spec = group["metadata"]["name"], group["spec"]
        joined = tuple(sorted(members.get(name, [])))
        minimum = max(int(spec.get("minMember", 1)), 1)
        found[name] = GangStart(
            spec.get("queue", ""), spec.get("priorityClassName", ""), minimum, joined, len(joined) >= minimum
        )
    return found

"""Which PodGroups the gangs need, which to create and delete, and what to tell their pods: no I/O here.

Everything is derived from what the API server holds: tenant namespaces (labelled with
their tenant and queue), the pods the tenants' syncers made, and the PodGroups this
program made before (labelled as its own). Nothing is remembered but when a PodGroup
was first seen without pods, and which conditions were already reported, so a restart
loses nothing that matters: the grace period starts over, and a condition may be
reported once more.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Names the platform gives these keys (config/names.py, config/upstream.py; a test checks they agree).
TENANT_LABEL = "gpu-tenancy/tenant"
QUEUE_LABEL = "gpu-tenancy/queue"
POD_GROUP_ANNOTATION = "pod-group-name"
GANG_SIZE_ANNOTATION = "gpu-tenancy/gang-size"
LWS_SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"
PRIORITY_LABEL = "priorityClassName"
PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
DEFAULT_PRIORITY_CLASS = "train"
SYNCED_POD_LABEL = "vcluster.loft.sh/managed-by"
OWNED = ("app.kubernetes.io/managed-by", "gpu-tenancy-gang-controller")
"""On every PodGroup this program makes: it lists by this label, but a label proves nothing (made_here)."""
FIELD_MANAGER = "gpu-tenancy-gang-controller"
"""The field manager of this program's creates: the API server records it in managedFields."""
EMPTY_LABEL = "gpu-tenancy/gang-empty"
"""On a PodGroup of this program's that no pod uses now: the admission policy lets a pod of another size (or
priority) join it, and this program then fits the group to the new pods, so a job resubmitted with another shape
need not wait out the grace period."""
GROUP_LABEL = "gpu-tenancy/gang-of"
"""On a PodGroup: the tenant whose gang it is."""
POD_GROUP_API_VERSION = "scheduling.run.ai/v2alpha2"

Key = tuple[str, str]
"""(namespace, name) of a PodGroup."""


@dataclass(frozen=True)
class Tenant:
    name: str
    queue: str


@dataclass(frozen=True)
class GangPod:
    namespace: str
    name: str
    uid: str
    group: str
    size: int | None
    priority_class: str
    preemptibility: str

    @property
    def key(self) -> Key:
        return (self.namespace, self.group)


def tenants_of(namespaces: Iterable[Mapping[str, Any]]) -> dict[str, Tenant]:
    """Tenant namespaces by name; a namespace without both labels is not a tenant's."""
    found = {}
    for namespace in namespaces:
        labels = namespace.get("metadata", {}).get("labels") or {}
        if labels.get(TENANT_LABEL) and labels.get(QUEUE_LABEL):
            found[namespace["metadata"]["name"]] = Tenant(labels[TENANT_LABEL], labels[QUEUE_LABEL])
    return found


def _size(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() and int(text) > 0 else None


def gang_pod(pod: Mapping[str, Any], tenants: Mapping[str, Tenant]) -> GangPod | None:
    """The pod as a gang member, or None: not in a tenant namespace, not a gang, another tenant's name, or
    on its way out. A finished pod still counts, as KAI's own groups last as long as their pods."""
    meta = pod.get("metadata", {})
    tenant = tenants.get(meta.get("namespace", ""))
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    group = annotations.get(POD_GROUP_ANNOTATION, "")
    if tenant is None or not group.startswith(f"{tenant.name}."):
        return None
    if meta.get("deletionTimestamp"):
        return None
    return GangPod(
        namespace=meta["namespace"],
        name=meta["name"],
        uid=meta.get("uid", ""),
        group=group,
        size=_size(annotations.get(GANG_SIZE_ANNOTATION, annotations.get(LWS_SIZE_ANNOTATION))),
        priority_class=labels.get(PRIORITY_LABEL) or DEFAULT_PRIORITY_CLASS,
        preemptibility=labels.get(PREEMPTIBILITY_LABEL, ""),
    )


@dataclass
class Gang:
    """What the pods of one group ask for; `conflict` says why no PodGroup can be made for them."""

    namespace: str
    name: str
    queue: str
    pods: list[GangPod] = field(default_factory=list)

    @property
    def key(self) -> Key:
        return (self.namespace, self.name)

    def _one(self, what: str, values: set[Any]) -> str | None:
        if len(values) > 1:
            shown = ", ".join(sorted(str(value) for value in values))
            return f"the pods of gang {self.name} disagree on their {what} ({shown})"
        return None

    @property
    def conflict(self) -> str | None:
        sizes = {pod.size for pod in self.pods}
        if None in sizes:
            return f"a pod of gang {self.name} states no gang size"
        for what, values in (
            ("gang size", sizes),
            (PRIORITY_LABEL, {pod.priority_class for pod in self.pods}),
            (PREEMPTIBILITY_LABEL, {pod.preemptibility for pod in self.pods}),
        ):
            problem = self._one(what, values)
            if problem:
                return problem
        return None

    def pod_group(self) -> dict[str, Any]:
        """The PodGroup KAI schedules the gang by (scheduling.run.ai/v2alpha2; the scheduler reads spec)."""
        first = self.pods[0]
        spec: dict[str, Any] = {
            "minMember": first.size,
            "queue": self.queue,
            "priorityClassName": first.priority_class,
        }
        if first.preemptibility:
            spec["preemptibility"] = first.preemptibility
        return {
            "apiVersion": POD_GROUP_API_VERSION,
            "kind": "PodGroup",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {OWNED[0]: OWNED[1], GROUP_LABEL: self.name.split(".", 1)[0]},
            },
            "spec": spec,
        }


def made_here(pod_group: Mapping[str, Any]) -> bool:
    """Whether this program created the PodGroup, whatever labels it carries.

    KAI's pod-grouper copies an ownerless pod's labels and annotations onto its pg-<pod>-<uid> PodGroup
    (pkg/podgrouper/podgrouper/plugins/defaultgrouper/default_grouper.go CalcPodGroupLabels,
    CalcPodGroupAnnotations @v0.16.8), so a team can give one this program's label. It cannot give one
    what the pod-grouper always sets, an owner (the pod or its top owner: GetPodGroupMetadata), nor the
    API server's record of who created it (managedFields, written by the server with the creating
    request's fieldManager). This program's PodGroups have no owner and were created by FIELD_MANAGER.
    """
    metadata = pod_group.get("metadata") or {}
    if metadata.get("ownerReferences"):
        return False
    return any(entry.get("manager") == FIELD_MANAGER for entry in metadata.get("managedFields") or [])


def gangs_of(pods: Iterable[GangPod], tenants: Mapping[str, Tenant]) -> dict[Key, Gang]:
    gangs: dict[Key, Gang] = {}
    for pod in pods:
        gang = gangs.setdefault(pod.key, Gang(pod.namespace, pod.group, tenants[pod.namespace].queue))
        gang.pods.append(pod)
    return gangs


@dataclass
class Plan:
    create: list[dict[str, Any]] = field(default_factory=list)
    patch: list[tuple[Key, dict[str, Any]]] = field(default_factory=list)
    """Merge patches: an unused group marked empty, or an empty one fitted to its new pods and unmarked."""
    delete: list[Key] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Memory:
    """What survives between two reconciliations (and is lost, harmlessly, by a restart)."""

    empty_since: dict[Key, float] = field(default_factory=dict)
    reported: set[tuple[Key, str, str]] = field(default_factory=set)
    """(group, pod, what was said): each pod hears each state of its group once, late joiners too."""


def event(pod: GangPod, reason: str, message: str, kind: str = "Warning") -> dict[str, Any]:
    """A core/v1 Event about the host pod, which vCluster copies to the team's pod.

    vCluster syncs an Event from the tenant's host namespace only when its involvedObject names
    apiVersion v1 (loft-sh/vcluster pkg/controllers/resources/events/syncer.go @v0.35.1).
    """
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{pod.name}.", "namespace": pod.namespace},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": pod.namespace,
            "name": pod.name,
            "uid": pod.uid,
        },
        "reason": reason,
        "message": message,
        "type": kind,
        "source": {"component": OWNED[1]},
        "reportingComponent": OWNED[1],
        "count": 1,
    }


def scheduling_conditions(pod_group: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(identity, text) of each scheduling condition KAI's scheduler wrote on the PodGroup."""
    found = []
    for condition in (pod_group.get("status") or {}).get("schedulingConditions") or []:
        reasons = [r.get("message") or r.get("reason", "") for r in condition.get("reasons") or []]
        text = "; ".join(reason for reason in reasons if reason) or condition.get("message") or ""
        identity = f"{condition.get('nodePool', '')}/{condition.get('transitionID', '')}"
        if text:
            found.append((identity, text))
    return found


def plan(
    gangs: Mapping[Key, Gang],
    existing: Mapping[Key, Mapping[str, Any]],
    memory: Memory,
    *,
    now: float,
    grace_seconds: float,
) -> Plan:
    """What to do now, given every gang and every PodGroup this program made (made_here); updates `memory`."""
    result = Plan()
    for key, gang in gangs.items():
        memory.empty_since.pop(key, None)
        conflict = gang.conflict
        if conflict is not None:
            _report(
                result,
                memory,
                gang,
                reason="GangRefused",
                message=f"{conflict}: the gang waits until they agree",
                identity="conflict",
            )
            continue
        if key not in existing:
            result.create.append(gang.pod_group())
        elif is_empty(existing[key]):
            result.patch.append((key, _refit(existing[key], gang)))
        size = gang.pods[0].size
        message = f"in gang {gang.name}: its {size} pods start together, in queue {gang.queue}"
        _report(result, memory, gang, reason="GangFormed", message=message, identity="formed", kind="Normal")
        for identity, text in scheduling_conditions(existing.get(key, {})):
            _report(
                result, memory, gang, reason="GangUnschedulable", message=f"gang {gang.name}: {text}", identity=identity
            )
    for key in existing:
        if key in gangs:
            continue
        if not is_empty(existing[key]):
            result.patch.append((key, {"metadata": {"labels": {EMPTY_LABEL: "true"}}}))
        since = memory.empty_since.setdefault(key, now)
        if now - since >= grace_seconds:
            result.delete.append(key)
            memory.empty_since.pop(key)
            memory.reported = {entry for entry in memory.reported if entry[0] != key}
    return result


def is_empty(pod_group: Mapping[str, Any]) -> bool:
    return ((pod_group.get("metadata") or {}).get("labels") or {}).get(EMPTY_LABEL) == "true"


def _refit(pod_group: Mapping[str, Any], gang: Gang) -> dict[str, Any]:
    """The merge patch that unmarks an empty group, with the spec its new pods ask for where it differs."""
    patch: dict[str, Any] = {"metadata": {"labels": {EMPTY_LABEL: None}}}
    wanted = gang.pod_group()["spec"]
    have = pod_group.get("spec") or {}
    changed = {key: wanted.get(key) for key in ("minMember", "priorityClassName", "preemptibility")}
    changed = {key: value for key, value in changed.items() if have.get(key) != value}
    if changed:
        patch["spec"] = changed
    return patch


def _report(
    result: Plan, memory: Memory, gang: Gang, *, reason: str, message: str, identity: str, kind: str = "Warning"
) -> None:
    """An Event for each pod of the group that has not heard of this state yet."""
    for pod in gang.pods:
        marker = (gang.key, pod.name, f"{identity}:{message}")
        if marker not in memory.reported:
            memory.reported.add(marker)
            result.events.append(event(pod, reason, message, kind))

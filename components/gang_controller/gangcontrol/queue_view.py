"""What a team may read of its KAI queue from inside its vCluster: no I/O here.

Queues and PodGroups live on the host, where a team cannot look. The controller writes
this view to a ConfigMap in each tenant's host namespace, and the tenant's own syncer
copies it into the vCluster (`sync.fromHost.configMaps`), read-only: vCluster's
open-source build syncs no custom resource from the host, but a ConfigMap it does, and
it overwrites a team's edits (loft-sh/vcluster pkg/syncer/from_host_syncer.go @v0.35.1).

Each number is KAI's own: quota, limit and weight from the Queue's spec; what is in use
and asked for from the status KAI's queue controller writes (sums of its PodGroups'
`resourcesStatus`); the fair share from the scheduler's gauge, which it sets every session
(kai_queue_fair_share_gpu: pkg/scheduler/metrics/metrics.go @v0.16.8), since no object
holds it. A group waits when its pods ask for resources and KAI has allocated none:
KAI's pod-group controller counts a pod as allocated once it is bound or running
(pkg/podgroupcontroller/controllers/metadata/pod.go isAllocatedPod @v0.16.8), and the
scheduler's reasons stay on the group after it is scheduled
(pkg/scheduler/cache/status_updater/default_status_updater.go @v0.16.8), so the reasons
alone would show a running job as waiting.
"""

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from .gangs import Tenant, scheduling_conditions

VIEW_CONFIGMAP = "gpu-tenancy-queue"
"""The host ConfigMap, in the tenant's namespace; the vCluster shows it as gpu-tenancy/queue."""
GPU = "nvidia.com/gpu"
FAIR_SHARE_METRIC = "kai_queue_fair_share_gpu"
QUEUE_METRIC_LABEL = "queue_metadata_name"
"""The gauge's queue_name is the display name when one is set; queue_metadata_name is always the Queue's name."""
UNLIMITED = -1.0
OBJECT_NAME = "vcluster.loft.sh/object-name"
OBJECT_NAMESPACE = "vcluster.loft.sh/object-namespace"
"""What the syncer writes on a host pod: its name and namespace in the vCluster (loft-sh/vcluster
pkg/util/translate @v0.35.1). KAI's pod-grouper copies an ownerless pod's annotations onto its PodGroup
(pkg/podgrouper/podgrouper/plugins/defaultgrouper/default_grouper.go CalcPodGroupAnnotations @v0.16.8)."""
MAX_WAITING = 50
"""Waiting groups listed in full; beyond this only their count (a ConfigMap holds 1 MiB)."""

_SUFFIXES = {
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "": 1.0,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([a-zA-Z]*)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def quantity(text: Any) -> float:
    """A Kubernetes quantity as a number: '250m' is 0.25 (the forms the API server writes)."""
    if isinstance(text, int | float):
        return float(text)
    match = _QUANTITY.match(str(text).strip())
    if match and match.group(2) in _SUFFIXES:
        return float(match.group(1)) * _SUFFIXES[match.group(2)]
    return float(str(text))


def fair_shares(metrics: str) -> dict[str, float]:
    """Queue name -> its fair share of GPUs now, from the scheduler's /metrics (Prometheus text format)."""
    shares = {}
    for line in metrics.splitlines():
        if not line.startswith(FAIR_SHARE_METRIC + "{"):
            continue
        labels, _, rest = line[len(FAIR_SHARE_METRIC) + 1 :].partition("}")
        name = dict(_LABEL.findall(labels)).get(QUEUE_METRIC_LABEL)
        fields = rest.split()
        if name and fields:
            shares[name] = float(fields[0])
    return shares


@dataclass(frozen=True)
class Waiting:
    """A group of the team's pods that KAI has not started, and what its scheduler said."""

    what: str
    pods: int
    gpus: float
    reason: str


def _described(pod_group: Mapping[str, Any], tenant: Tenant) -> str:
    """The group as the team knows it: its gang (<tenant>.<namespace>.<job>: gang_rules.py) or its pod."""
    metadata = pod_group.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    name = str(metadata.get("name", ""))
    prefix = f"{tenant.name}."
    if name.startswith(prefix) and name.count(".") >= 2:
        namespace, job = name[len(prefix) :].split(".", 1)
        return f"gang {namespace}/{job}"
    if annotations.get(OBJECT_NAME):
        return f"pod {annotations.get(OBJECT_NAMESPACE, '')}/{annotations[OBJECT_NAME]}"
    return f"group {name}"


def waiting_of(pod_group: Mapping[str, Any], tenant: Tenant) -> Waiting | None:
    """The group if it waits: its pods ask for something and KAI has allocated it nothing."""
    status = pod_group.get("status") or {}
    resources = status.get("resourcesStatus") or {}
    requested = {key: quantity(value) for key, value in (resources.get("requested") or {}).items()}
    allocated = {key: quantity(value) for key, value in (resources.get("allocated") or {}).items()}
    if not any(requested.values()) or any(allocated.values()):
        return None
    return Waiting(
        what=_described(pod_group, tenant),
        pods=int((pod_group.get("spec") or {}).get("minMember") or 1),
        gpus=requested.get(GPU, 0.0),
        reason="; ".join(dict.fromkeys(text for _, text in scheduling_conditions(pod_group))) or "not scheduled yet",
    )


def _gpu_share(queue: Mapping[str, Any]) -> dict[str, float]:
    gpu = ((queue.get("spec") or {}).get("resources") or {}).get("gpu") or {}
    return {
        "quota": float(gpu.get("quota", 0)),
        "limit": float(gpu.get("limit", UNLIMITED)),
        "overQuotaWeight": float(gpu.get("overQuotaWeight", 0)),
    }


def _used(queue: Mapping[str, Any], field: str) -> float:
    return quantity(((queue.get("status") or {}).get(field) or {}).get(GPU, 0))


def queue_entry(
    name: str, queues: Mapping[str, Mapping[str, Any]], shares: Mapping[str, float] | None
) -> dict[str, Any]:
    """One queue's GPU figures; absent numbers are None (a Queue KAI has not seen, a fair share not scraped)."""
    queue = queues.get(name)
    if queue is None:
        return {"name": name, "found": False}
    return {
        "name": name,
        "found": True,
        "parent": (queue.get("spec") or {}).get("parentQueue"),
        **_gpu_share(queue),
        "fairShare": None if shares is None else shares.get(name),
        "inUse": _used(queue, "allocated"),
        "inUseNonPreemptible": _used(queue, "allocatedNonPreemptible"),
        "requested": _used(queue, "requested"),
    }


def chain(name: str, queues: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The queue and its parents, up to the root (a cycle, which KAI refuses, ends the walk)."""
    names: list[str] = []
    while name and name not in names:
        names.append(name)
        name = ((queues.get(name) or {}).get("spec") or {}).get("parentQueue") or ""
    return names


def view(
    tenant: Tenant,
    queues: Mapping[str, Mapping[str, Any]],
    shares: Mapping[str, float] | None,
    share_problem: str,
    waiting: Iterable[Waiting],
) -> dict[str, Any]:
    """Everything the team is shown, as data (the ConfigMap's queue.json)."""
    waiting = sorted(waiting, key=lambda w: w.what)
    return {
        "tenant": tenant.name,
        "queues": [queue_entry(name, queues, shares) for name in chain(tenant.queue, queues)],
        "fairShareUnknown": share_problem or None,
        "waiting": [asdict(w) for w in waiting[:MAX_WAITING]],
        "waitingCount": len(waiting),
    }


def _gpus(value: float | None) -> str:
    if value is None:
        return "unknown"
    if value == UNLIMITED:
        return "none"
    return f"{value:g}"


def summary(data: Mapping[str, Any]) -> str:
    """The view as a member reads it with `kubectl get configmap queue -n gpu-tenancy -o jsonpath=...`."""
    lines = []
    for index, queue in enumerate(data["queues"]):
        title = "Your queue" if index == 0 else "Its parent"
        if not queue["found"]:
            lines.append(f"{title} {queue['name']}: KAI has no such queue yet")
            continue
        fair = _gpus(queue["fairShare"])
        if queue["fairShare"] is None and data["fairShareUnknown"]:
            fair = f"unknown ({data['fairShareUnknown']})"
        lines += [
            f"{title} {queue['name']}, in GPUs:",
            f"  guaranteed (quota)   {_gpus(queue['quota'])}",
            f"  cap (limit)          {_gpus(queue['limit'])}",
            f"  over-quota weight    {queue['overQuotaWeight']:g}",
            f"  fair share now       {fair}",
            f"  in use               {_gpus(queue['inUse'])} (non-preemptible {_gpus(queue['inUseNonPreemptible'])})",
            f"  asked for            {_gpus(queue['requested'])} (running and pending)",
        ]
    count = data["waitingCount"]
    lines.append(f"Waiting: {count}" if count else "Waiting: nothing")
    for entry in data["waiting"]:
        lines.append(f"  {entry['what']} ({entry['pods']} pods, {entry['gpus']:g} GPUs): {entry['reason']}")
    if count > len(data["waiting"]):
        lines.append(f"  and {count - len(data['waiting'])} more")
    return "\n".join(lines) + "\n"


def configmap_data(data: Mapping[str, Any], checked: str) -> dict[str, str]:
    """The ConfigMap's data: the text, the JSON, and when the controller last looked."""
    return {
        "summary": summary(data),
        "queue.json": json.dumps(data, indent=2, sort_keys=True) + "\n",
        "checked": checked,
    }

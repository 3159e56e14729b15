"""The PromQL behind the dashboards and the cost report, in one place so both mean the same thing.

Queues meet teams through the tenant namespace's `gpu-tenancy/queue` label, which
kube-state-metrics exports as `label_gpu_tenancy_queue` on `kube_namespace_labels`
once it is allowed to (observability sets that). GPU utilisation and memory come from
dcgm-exporter, which knows pods only by the `nvidia.com/gpu` they were given: a KAI
fraction's use shows under KAI's reservation pod, not the team, so per-team utilisation
covers whole-GPU pods only.
"""

from collections.abc import Mapping

from config.types import UNLIMITED
from config.upstream import (
    DCGM_GPU_UTIL,
    DCGM_MEMORY_USED,
    KAI_QUEUE_ALLOCATED_GPUS,
    KAI_QUEUE_DESERVED_GPUS,
    KAI_QUEUE_FAIR_SHARE_GPU,
    KAI_QUEUE_INFO,
    KAI_QUEUE_LABEL,
    KSM_NAMESPACE_LABELS,
)

KSM_QUEUE_LABEL = "label_gpu_tenancy_queue"
KSM_TENANT_LABEL = "label_gpu_tenancy_tenant"
"""kube-state-metrics' names for those labels: `label_` + the key with every other character as `_`."""


def _queues(selector: str) -> str:
    return f'{KAI_QUEUE_LABEL}=~"{selector}"'


def allocated(selector: str = ".+") -> str:
    """GPUs allocated to each queue (fractions included; a parent's includes its children's)."""
    return f"sum by ({KAI_QUEUE_LABEL}) ({KAI_QUEUE_ALLOCATED_GPUS}{{{_queues(selector)}}})"


def deserved(selector: str = ".+") -> str:
    """Each queue's quota, as KAI reads it."""
    return f"sum by ({KAI_QUEUE_LABEL}) ({KAI_QUEUE_DESERVED_GPUS}{{{_queues(selector)}}})"


def fair_share(selector: str = ".+") -> str:
    """KAI's live division of the pool (the scheduler's proportion plugin)."""
    return f"sum by ({KAI_QUEUE_LABEL}) ({KAI_QUEUE_FAIR_SHARE_GPU}{{{_queues(selector)}}})"


def over_quota(selector: str = ".+") -> str:
    """1 while a queue holds more GPUs than its quota, else 0."""
    return f"({allocated(selector)} > bool on ({KAI_QUEUE_LABEL}) {deserved(selector)})"


def _per_queue(metric: str, selector: str) -> str:
    """A dcgm-exporter metric per queue: each GPU's series joined to its pod's namespace's queue label.

    kube-state-metrics gives one `kube_namespace_labels` series per namespace per replica: two replicas
    all the time, or one replica and its successor for the minutes of a rollout (their `pod` and
    `instance` labels differ). A join on `namespace` with two matches on the right is refused
    ("many-to-many matching not allowed"), so that side is reduced to one series per namespace first.
    """
    namespaces = f'max by (namespace, {KSM_QUEUE_LABEL}) ({KSM_NAMESPACE_LABELS}{{{KSM_QUEUE_LABEL}=~"{selector}"}})'
    return f"avg by ({KSM_QUEUE_LABEL}) ({metric} * on (namespace) group_left ({KSM_QUEUE_LABEL}) {namespaces})"


def utilisation(selector: str = ".+") -> str:
    """Mean GPU utilisation (%) of each queue's whole-GPU pods."""
    return _per_queue(DCGM_GPU_UTIL, selector)


def memory_used(selector: str = ".+") -> str:
    """Mean framebuffer memory used (MiB) per GPU of each queue's whole-GPU pods."""
    return _per_queue(DCGM_MEMORY_USED, selector)


def node_utilisation() -> str:
    return f"avg by (Hostname) ({DCGM_GPU_UTIL})"


def node_memory_used() -> str:
    return f"sum by (Hostname) ({DCGM_MEMORY_USED})"


def limits(limit_by_queue: Mapping[str, float], selector: str) -> str | None:
    """Each capped queue's limit as a series: no KAI metric carries it, but the stack config does.

    One constant per queue, labelled like KAI's metrics (label_replace on vector()), kept only for
    queues matching the selector; None when no queue is capped.
    """
    parts = [
        f'label_replace(vector({limit:g}), "{KAI_QUEUE_LABEL}", "{queue}", "", "")'
        for queue, limit in sorted(limit_by_queue.items())
        if limit != UNLIMITED
    ]
    if not parts:
        return None
    return f"({' or '.join(parts)}) and on ({KAI_QUEUE_LABEL}) {KAI_QUEUE_INFO}{{{_queues(selector)}}}"


def time_over_quota(selector: str) -> str:
    """The share (%) of the dashboard's range a queue spent above its quota, sampled each minute."""
    return f"avg_over_time({over_quota(selector)}[$__range:1m]) * 100"

"""The plan a reviewer reads: each leaf queue's share when all teams are busy, and when it is alone.

Both are set beside a rigid partition of the same GPUs, where a team only ever
gets its quota, which is what one cluster per team would give.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from config.queue_hierarchy.hierarchy import QueueTree
from config.queue_hierarchy.queues import QueueConfig
from config.types import UNLIMITED, plain_number
from fairshare.division import TimeBased, alone_shares, fair_shares
from fairshare.usage import PastUsage

HOURS_PER_MONTH = 730
"""The billing month of cloud price lists: 365 * 24 / 12."""


class QueuePlan(NamedTuple):
    """One queue's row of the plan: a tuple, the cheapest immutable record to build 100,000 of."""

    name: str
    parent: str | None
    quota: float
    limit: float
    weight: float
    priority: int
    saturated: float
    """Share when every leaf queue asks for the whole pool."""
    alone: float | None
    """Share when only this leaf asks for anything (None for parents)."""
    rigid: float | None
    """What a fixed partition by quota would give this leaf (None for parents)."""
    demand: float | None = None
    what_if: float | None = None
    """Share under the given demands, when a what-if was asked for."""
    used_gpu_hours: float | None = None
    """The queue's past use over the window, when usage was given."""
    usage_adjusted: float | None = None
    """Share when every leaf is busy, with time-based fairness weighing that past use."""

    @property
    def usage_change(self) -> float | None:
        """What past use adds to (or takes from) the usage-blind all-busy share."""
        return None if self.usage_adjusted is None else self.usage_adjusted - self.saturated


@dataclass(frozen=True)
class UsageNote:
    source: str
    k_value: float
    cluster_gpu_hours: float
    in_stack: bool
    """Whether the stack has time-based fairness on; if not, the usage-adjusted column is what turning it on gives."""


@dataclass(frozen=True)
class Plan:
    capacity: float
    queues: list[QueuePlan]
    saturated_utilisation: float
    rigid_utilisation: float
    what_if_utilisation: float | None = None
    usage: UsageNote | None = None
    """Where the past use came from, and the kValue it was weighed with."""

    def to_data(self, price: float | None = None) -> dict[str, Any]:
        """Plain JSON-able data: the `queuePlan` stack output, and `python -m fairshare --json` for a stack or a
        scenario; with a price, each leaf's guaranteed GPU-hours per month and their cost, as the table shows them."""
        data: dict[str, Any] = {
            "capacity": plain_number(self.capacity),
            "saturatedUtilisation": round(self.saturated_utilisation, 4),
            "rigidUtilisation": round(self.rigid_utilisation, 4),
        }
        if self.what_if_utilisation is not None:
            data["whatIfUtilisation"] = round(self.what_if_utilisation, 4)
        if price is not None:
            data |= {"pricePerGpuHour": price, "hoursPerMonth": HOURS_PER_MONTH}
        if self.usage is not None:
            data["usage"] = {
                "source": self.usage.source,
                "kValue": plain_number(self.usage.k_value),
                "clusterGpuHours": round(self.usage.cluster_gpu_hours, 2),
                "timeBasedInStack": self.usage.in_stack,
            }
        data["queues"] = {q.name: _queue_data(q, price) for q in self.queues}
        return data


def guaranteed_hours(queue: QueuePlan) -> float | None:
    """A leaf's guaranteed GPU-hours in a billing month, to the tenth as shown (None for a parent)."""
    return None if queue.rigid is None else round(queue.rigid * HOURS_PER_MONTH, 1)


def _queue_data(queue: QueuePlan, price: float | None) -> dict[str, Any]:
    data = {_camel(k): _rounded(v) for k, v in queue._asdict().items() if k != "name" and v is not None}
    if queue.usage_change is not None:
        data["usageChange"] = _rounded(queue.usage_change)
    hours = guaranteed_hours(queue)
    if price is not None and hours is not None:
        # The cost is the hours as shown times the price, so a reader's check of one against the other holds.
        data |= {"guaranteedGpuHoursPerMonth": hours, "guaranteedCostPerMonth": round(hours * price, 2)}
    return data


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part.title() for part in rest)


def _rounded(value: Any) -> Any:
    return round(value, 6) if isinstance(value, float) else value


def pool_capacity(queues: Sequence[QueueConfig]) -> float | None:
    """The GPUs the roots guarantee between them; None when a root's quota is unlimited."""
    roots = [q.resources.gpu.quota for q in queues if q.parent_queue is None]
    return None if UNLIMITED in roots else float(sum(roots))


def _rigid(queue: QueueConfig, capacity: float) -> float:
    quota = queue.resources.gpu.quota
    return capacity if quota == UNLIMITED else min(quota, capacity)


@dataclass(frozen=True)
class PastUse:
    """Time-based fairness for a plan: the past use read, and the kValue KAI weighs it with."""

    usage: PastUsage
    k_value: float
    in_stack: bool
    """Whether the stack has time-based fairness on (if not, the plan shows what turning it on would give)."""

    def time_based(self) -> TimeBased:
        return TimeBased(self.k_value, self.usage.shares())


def plan(
    queues: Sequence[QueueConfig],
    capacity: float,
    demand: Mapping[str, float] | None = None,
    past: PastUse | None = None,
    *,
    tree: QueueTree | None = None,
) -> Plan:
    """`past`: add each queue's all-busy share as KAI divides it given that past use (time-based fairness);
    `tree`: the queues' index, when the caller has one."""
    tree = tree or QueueTree(list(queues))
    leaves = tree.leaf_set
    busy = dict.fromkeys(leaves, capacity)
    saturated = fair_shares(queues, capacity, busy, tree=tree)
    by_itself = alone_shares(tree, capacity)
    adjusted = fair_shares(queues, capacity, busy, time_based=past.time_based(), tree=tree) if past else None
    what_if = fair_shares(queues, capacity, demand, tree=tree) if demand is not None else None
    rows = []
    for queue in queues:
        name, gpu = queue.name, queue.resources.gpu
        leaf = name in leaves
        # Positional, in QueuePlan's field order: 100,000 rows are built here.
        rows.append(
            QueuePlan(
                name,
                queue.parent_queue,
                gpu.quota,
                gpu.limit,
                gpu.over_quota_weight,
                queue.priority,
                saturated[name],
                by_itself[name] if leaf else None,
                _rigid(queue, capacity) if leaf else None,
                demand.get(name, 0.0) if demand is not None and leaf else None,
                what_if[name] if what_if is not None else None,
                past.usage.queues.get(name, 0.0) if past else None,
                adjusted[name] if adjusted is not None else None,
            )
        )
    used = sum(saturated[name] for name in leaves)
    rigid_used = min(capacity, sum(r.rigid or 0.0 for r in rows))
    return Plan(
        capacity=capacity,
        queues=rows,
        saturated_utilisation=used / capacity if capacity else 0.0,
        rigid_utilisation=rigid_used / capacity if capacity else 0.0,
        what_if_utilisation=(sum(what_if[n] for n in leaves) / capacity if capacity else 0.0) if what_if else None,
        usage=UsageNote(past.usage.source, past.k_value, past.usage.cluster_gpu_hours, past.in_stack) if past else None,
    )

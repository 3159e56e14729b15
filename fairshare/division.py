"""KAI's division of one resource among a queue hierarchy, as its `proportion` plugin computes it.

Follows pkg/scheduler/plugins/proportion/resource_division in KAI-Scheduler
v0.16, quirks included; with time-based fairness, past usage bends each round's weights:

- Top-down: the roots divide the capacity; a queue's children divide its fair share.
- Phase 1: each sibling gets min(quota, requestable), quota -1 meaning the whole
  amount; requestable is the queue's request capped by its limit.
- Phase 2: what is left goes to priority groups, highest first. Within a group,
  rounds hand out the remainder in proportion to each unsatisfied queue's share
  weight; a queue whose remaining request fits in its share takes it all, others get
  the share rounded down to whole units and keep the fraction as a remainder.
- A share weight is max(0, nWeight + k * (nWeight - nUsage)) (calcShareWeights): nWeight
  is the queue's overQuotaWeight over the group's weights still requesting, renormalised
  every round; nUsage is the queue's past use over the cluster's capacity in the same
  window (never renormalised, at every level of the tree). With k = 0 or no usage the
  weight is nWeight times a constant, which is the usage-blind division.
- Finally, once every group has had its rounds, the remainders, group by group from
  the highest priority: queues with the largest fractional remainder first (ties:
  older queue, then name; KAI breaks ties by creation time, then by UID, which a plan
  cannot know) each get min(1, what is left). This last step ignores request and
  limit, so a queue may end up to one unit above either: KAI's rounding slack.
- Nothing checks that quotas fit: a queue whose limit is below its quota gets at most
  its limit, and children whose quotas exceed their parent's share still get them.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from config.queue_hierarchy.hierarchy import QueueTree
from config.queue_hierarchy.queues import QueueConfig, ResourceName
from config.types import UNLIMITED


@dataclass(frozen=True)
class TimeBased:
    """What time-based fairness adds: KAI's kValue, and each queue's past use as a share of the cluster's."""

    k_value: float
    usage: Mapping[str, float]
    """Queue -> its use over the window divided by the cluster's capacity over it (0 when absent)."""


NO_USAGE = TimeBased(0.0, {})


@dataclass(slots=True)
class _Share:
    name: str
    order: int
    """Position in the queue list: KAI's creation order, older first."""
    priority: int
    quota: float
    limit: float
    weight: float
    request: float
    usage: float = 0.0
    fair_share: float = 0.0
    requestable: float = field(init=False)
    """The request capped by the limit, fixed for the division: once the queue has it, it is satisfied. The rounds
    below compare the two inline (`requestable > fair_share`: it still asks), once per queue and round."""

    def __post_init__(self) -> None:
        self.requestable = self.request if self.limit == UNLIMITED else min(self.request, self.limit)


def _give_quotas(amount: float, siblings: Sequence[_Share]) -> float:
    remaining = amount
    for share in siblings:
        quota = amount if share.quota == UNLIMITED else share.quota
        given = min(quota, share.requestable)
        share.fair_share += given
        remaining -= given
    return remaining


def _share_weights(group: Sequence[_Share], k_value: float) -> dict[str, float]:
    """calcShareWeights @v0.16.8: each unsatisfied queue's weight this round, bent by its past use."""
    asking = [s for s in group if s.requestable > s.fair_share]
    total_weight = sum([s.weight for s in asking])
    if not total_weight:
        return {}
    weights = {}
    for share in asking:
        normalised = share.weight / total_weight
        weights[share.name] = max(0.0, normalised + k_value * (normalised - share.usage))
    return weights


def _divide_up_to_fair_share(amount: float, group: Sequence[_Share], k_value: float) -> tuple[float, dict[str, float]]:
    """Rounds of weighted shares; returns what is left and each unsatisfied queue's fractional remainder."""
    remainders: dict[str, float] = {}
    while True:
        weights = _share_weights(group, k_value)
        weight_sum = sum(weights.values())
        if weight_sum == 0:
            break
        round_amount = amount
        another_round = False
        for share in group:
            if amount == 0:
                break
            requested = share.requestable - share.fair_share
            if requested <= 0 or share.weight == 0:  # satisfied, or weightless
                continue
            # KAI's order: the weight normalised first, then the round scaled by it (pkg/scheduler/plugins/proportion/
            # resource_division/resource_division.go divideUpToFairShare @v0.16.8); the rounding decides ties.
            fair = round_amount * (weights[share.name] / weight_sum)
            if requested <= fair:
                given = requested
                remainders.pop(share.name, None)
            else:
                given = float(int(fair)) if fair >= 1 else 0.0
                if fair - given > 0:
                    remainders[share.name] = fair - given
            if given == 0:
                continue
            share.fair_share += given
            amount -= given
            another_round = another_round or requested < fair
        if not another_round or amount == 0:
            break
    return amount, remainders


def _divide_remainders(amount: float, group: Sequence[_Share], remainders: Mapping[str, float]) -> float:
    by_name = {s.name: s for s in group}
    ordered = sorted(remainders, key=lambda name: (-remainders[name], by_name[name].order, name))
    for name in ordered:
        if amount <= 0:
            break
        given = min(1.0, amount)
        by_name[name].fair_share += given
        amount -= given
    return amount


def _divide_siblings(amount: float, siblings: Sequence[_Share], k_value: float) -> None:
    """Quotas first, then every priority group's rounds, highest first; only then the remainders.

    A lower priority group's rounds run before a higher group's remainders are paid, so the
    lower group may take the fractions the higher one left (divideOverQuotaResource @v0.16.8).
    """
    remaining = _give_quotas(amount, siblings)
    if remaining <= 0:
        return
    groups = {p: [s for s in siblings if s.priority == p] for p in sorted({s.priority for s in siblings}, reverse=True)}
    remainders: dict[int, dict[str, float]] = {}
    for priority, group in groups.items():
        remaining, remainders[priority] = _divide_up_to_fair_share(remaining, group, k_value)
    for priority, group in groups.items():
        if remaining <= 0:
            break
        if remainders[priority]:
            remaining = _divide_remainders(remaining, group, remainders[priority])


def _share(queue: QueueConfig, order: int, request: float, resource: ResourceName, usage: float) -> _Share:
    terms = getattr(queue.resources, resource)
    return _Share(queue.name, order, queue.priority, terms.quota, terms.limit, terms.over_quota_weight, request, usage)


def fair_shares(
    queues: Sequence[QueueConfig],
    capacity: float,
    demand: Mapping[str, float],
    resource: ResourceName = "gpu",
    time_based: TimeBased = NO_USAGE,
    *,
    tree: QueueTree | None = None,
) -> dict[str, float]:
    """Every queue's fair share of `capacity`, given each leaf queue's demand (absent = 0) and, with time-based
    fairness, each queue's past use. `tree`: the queues' index, when the caller has one to share."""
    tree = tree or QueueTree(list(queues))
    children, order, asked = tree.children, tree.index, demand.get
    used = time_based.usage.get if time_based.usage else None  # usage-blind: nothing to look up 100,000 times
    shares: dict[str, _Share] = {}
    for queue in reversed(tree.parents_first):  # children first: a parent requests what its children do
        name = queue.name
        kids = children[name]
        request = sum([shares[k.name].request for k in kids]) if kids else float(asked(name, 0.0))
        terms = getattr(queue.resources, resource)  # _share, inlined: this loop runs once per queue
        shares[name] = _Share(
            name,
            order[name],
            queue.priority,
            terms.quota,
            terms.limit,
            terms.over_quota_weight,
            request,
            used(name, 0.0) if used else 0.0,
        )
    k_value = time_based.k_value
    _divide_siblings(capacity, [shares[q.name] for q in queues if q.parent_queue is None], k_value)
    for queue in tree.parents_first:
        kids = children[queue.name]
        if kids:
            _divide_siblings(shares[queue.name].fair_share, [shares[k.name] for k in kids], k_value)
    return {q.name: shares[q.name].fair_share for q in queues}


def alone_shares(tree: QueueTree, capacity: float, resource: ResourceName = "gpu") -> dict[str, float]:
    """What each leaf gets when no other queue asks for anything, all leaves in one pass down the tree.

    Queues that ask for nothing get nothing, so a leaf's share depends on its path from the root
    alone; and every queue on that path requests the whole pool (the leaf's demand summed up), so
    a parent's share is the same whichever leaf below it asks. Each queue is divided once, as the
    only sibling asking, from its parent's share and its own quota, limit and weight: queues alike
    in those (teams of one department, set up alike) share one division.
    """
    got: dict[str, float] = {}
    divided: dict[tuple[float, float, float, float], float] = {}
    for queue in tree.parents_first:
        amount = capacity if queue.parent_queue is None else got[queue.parent_queue]
        terms = queue.resources.share(resource)
        key = (amount, terms.quota, terms.limit, terms.over_quota_weight)
        if key not in divided:
            share = _share(queue, 0, capacity, resource, 0.0)
            _divide_siblings(amount, [share], 0.0)
            divided[key] = share.fair_share
        got[queue.name] = divided[key]
    return {leaf: got[leaf] for leaf in tree.leaves}

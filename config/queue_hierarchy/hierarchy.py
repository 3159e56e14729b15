"""Checks on the queue tree as a whole.

KAI itself is lenient in ways that hurt: it never schedules into a non-leaf
queue (silently), drops a queue whose parent is missing together with its
children, and its check that children's quotas fit in the parent is an
off-by-default warning. So the tree is validated here, before anything exists.
"""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property, lru_cache

from config.issues import ConfigIssue
from config.queue_hierarchy.queues import RESOURCES, UNITS, QueueConfig, ResourceName
from config.types import UNLIMITED, plain_number

ADMISSION_PROBE_QUEUE = "gpu-tenancy-admission-probe"
"""Submitted as a dry run by KAI's readiness gate; a real queue of that name would block the gate."""

# KAI's chart creates its default queues on first install and keeps them (helm.sh/resource-policy: keep):
# kai-scheduler/KAI-Scheduler deployments/kai-scheduler/templates/default-queue.yaml @v0.16.8.
RESERVED_QUEUES = {
    "default-parent-queue": "is created and owned by the KAI chart",
    "default-queue": "is created and owned by the KAI chart",
    ADMISSION_PROBE_QUEUE: "is reserved for the KAI readiness gate's probe",
}

QUOTA_TOLERANCE = Decimal("0.000001")
"""Slack for decimal rounding in quota sums (3 x 0.3333 fits in 1), far below any real share."""


@dataclass(frozen=True)
class QueueTree:
    """An index over the queue list: who is whose child, and where each queue sits in the config."""

    queues: Sequence[QueueConfig]

    @cached_property
    def index(self) -> dict[str, int]:
        return {q.name: i for i, q in reversed(list(enumerate(self.queues)))}

    @cached_property
    def children(self) -> dict[str, list[QueueConfig]]:
        tree: dict[str, list[QueueConfig]] = {q.name: [] for q in self.queues}
        for queue in self.queues:
            if queue.parent_queue in tree:
                tree[queue.parent_queue].append(queue)
        return tree

    def is_leaf(self, name: str) -> bool:
        return not self.children.get(name)

    @cached_property
    def leaves(self) -> list[str]:
        return [q.name for q in self.queues if self.is_leaf(q.name)]

    @cached_property
    def leaf_set(self) -> frozenset[str]:
        """The leaves for membership tests: a plan of 100,000 queues asks once per queue."""
        return frozenset(self.leaves)

    @cached_property
    def parents_first(self) -> list[QueueConfig]:
        """Roots, then their children, and so on, keeping config order within a level.

        Assumes a sound tree (no cycles, no missing parents).
        """
        ordered: list[QueueConfig] = []
        level = [q for q in self.queues if q.parent_queue is None]
        while level:
            ordered.extend(level)
            level = [kid for parent in level for kid in self.children[parent.name]]
        return ordered


def structural_issues(queues: Sequence[QueueConfig]) -> list[ConfigIssue]:
    """Names, parents and cycles: problems that make the tree meaningless."""
    issues: list[ConfigIssue] = []
    seen: set[str] = set()
    names = {q.name for q in queues}
    for i, queue in enumerate(queues):
        if queue.name in seen:
            issues.append(
                ConfigIssue((i, "name"), queue.name, "is already used by an earlier queue: queue names must be unique")
            )
        seen.add(queue.name)
        if queue.name in RESERVED_QUEUES:
            issues.append(ConfigIssue((i, "name"), queue.name, f"{RESERVED_QUEUES[queue.name]}: choose another name"))
        parent = queue.parent_queue
        if parent is None:
            continue
        if parent == queue.name:
            issues.append(ConfigIssue((i, "parentQueue"), parent, "a queue cannot be its own parent"))
        elif parent not in names:
            issues.append(
                ConfigIssue(
                    (i, "parentQueue"),
                    parent,
                    f"names no queue in gpu-tenancy:queues (known: {', '.join(sorted(names))}); "
                    "KAI would silently drop this queue and its children",
                )
            )
    if not issues:
        issues.extend(_cycle_issues(queues))
    return issues


def _cycle_issues(queues: Sequence[QueueConfig]) -> list[ConfigIssue]:
    parent_of = {q.name: q.parent_queue for q in queues}
    tree = QueueTree(queues)  # its index is built only if a cycle is found
    reported: set[str] = set()
    rooted: set[str] = set()
    """Queues whose chain is known to end at a root: a walk that meets one stops there, so each queue is walked
    about once."""
    issues = []
    for queue in queues:
        chain = [queue.name]
        current = parent_of[queue.name]
        while current is not None and current not in rooted and current not in chain:
            chain.append(current)
            current = parent_of[current]
        if current is None or current in rooted:
            rooted.update(chain)
            continue
        if current in reported:
            continue
        cycle = chain[chain.index(current) :]
        reported.update(cycle)
        first = min(cycle, key=tree.index.__getitem__)
        loop = " -> ".join([*_rotate(cycle, first), first])
        issues.append(
            ConfigIssue(
                (tree.index[first], "parentQueue"),
                parent_of[first],
                f"makes a cycle ({loop}): every chain of parentQueue must end at a root queue",
            )
        )
    return issues


def _rotate(cycle: list[str], start: str) -> list[str]:
    i = cycle.index(start)
    return cycle[i:] + cycle[:i]


def _quota(queue: QueueConfig, resource: ResourceName) -> Decimal | None:
    """The queue's guarantee as an exact decimal, or None for unlimited (-1)."""
    quota = queue.resources.share(resource).quota
    return None if quota == UNLIMITED else _decimal(quota)


@lru_cache(maxsize=4096)
def _decimal(amount: float) -> Decimal:
    """The amount as written (0.33, not 0.330000000000000015...); teams alike share one conversion."""
    return Decimal(str(amount))


@dataclass(frozen=True)
class _Split:
    """How one parent's finite guarantee of one resource is split among its children."""

    index: int
    parent: QueueConfig
    resource: ResourceName
    budget: Decimal
    kids: Sequence[QueueConfig]
    quotas: Sequence[Decimal | None]

    @property
    def unlimited_child(self) -> bool:
        return any(q is None for q in self.quotas)

    @property
    def assigned(self) -> Decimal:
        return sum((q for q in self.quotas if q is not None), Decimal(0))

    def listing(self) -> str:
        return ", ".join(
            f"{kid.name} ({'-1' if q is None else _show(q)})" for kid, q in zip(self.kids, self.quotas, strict=True)
        )


def _show(amount: Decimal) -> int | float:
    return plain_number(float(amount))


def _splits(queues: Sequence[QueueConfig], tree: QueueTree) -> Iterator[_Split]:
    """Every (parent, resource) with children and a finite parent quota: where guarantees can be split."""
    for parent in queues:
        kids = tree.children[parent.name]
        if not kids:
            continue
        for resource in RESOURCES:
            budget = _quota(parent, resource)
            if budget is not None:
                quotas = [_quota(kid, resource) for kid in kids]
                yield _Split(tree.index[parent.name], parent, resource, budget, kids, quotas)


def overcommit_issues(queues: Sequence[QueueConfig], tree: QueueTree | None = None) -> list[ConfigIssue]:
    """Children may not be guaranteed more than their parent is. `tree`: the queues' index, if the caller has it."""
    issues = []
    for split in _splits(queues, tree or QueueTree(queues)):
        unit = UNITS[split.resource]
        if split.unlimited_child:
            message = (
                f"is a finite guarantee, but its children ask for an unlimited one: {split.listing()}. "
                "Give each child a quota, or set this quota to -1"
            )
        elif split.assigned > split.budget + QUOTA_TOLERANCE:
            total = _show(split.assigned)
            message = (
                f"is less than its children are guaranteed in total ({total} {unit}: {split.listing()}). "
                f"Lower the children's quotas or raise this one to at least {total}"
            )
        else:
            continue
        path = (split.index, "resources", split.resource, "quota")
        issues.append(ConfigIssue(path, split.parent.resources.share(split.resource).quota, message))
    return issues


def unassigned_warnings(queues: Sequence[QueueConfig]) -> list[str]:
    """Parents whose guarantee is only partly handed to their children.

    Not an error: the remainder is still shared as over-quota capacity, but no
    team is promised it, which is usually not what the budget meant.
    """
    warnings = []
    for split in _splits(queues, QueueTree(queues)):
        spare = split.budget - split.assigned
        if not split.unlimited_child and spare > QUOTA_TOLERANCE:
            unit = UNITS[split.resource]
            warnings.append(
                f"queue {split.parent.name!r}: its children are guaranteed {_show(split.assigned)} of its "
                f"{split.resource} quota of {_show(split.budget)} {unit}; {_show(spare)} {unit} is guaranteed "
                "to no child and is only shared as over-quota capacity"
            )
    return warnings

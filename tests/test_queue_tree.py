"""The queue tree rules, tested on the pure model: guarantees fit, order is parents first."""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from config.queue_hierarchy.hierarchy import QueueTree, overcommit_issues, unassigned_warnings
from config.queue_hierarchy.queues import QueueConfig


def _tree(parent_quota: float, child_quotas: list[float], resource: str = "gpu") -> list[QueueConfig]:
    def queue(name: str, quota: float, parent: str | None = None) -> QueueConfig:
        data: dict[str, Any] = {"name": name, "resources": {resource: {"quota": quota}}}
        if parent:
            data["parentQueue"] = parent
        return QueueConfig.model_validate(data)

    return [queue("org", parent_quota)] + [queue(f"team-{i}", quota, "org") for i, quota in enumerate(child_quotas)]


@pytest.mark.parametrize(
    ("parent", "children", "fits"),
    [
        pytest.param(1, [0.33, 0.33, 0.33], True, id="tutorial-thirds"),
        pytest.param(1, [0.3333, 0.3333, 0.3333], True, id="four-digit-thirds"),
        pytest.param(0.3, [0.1, 0.2], True, id="binary-float-rounding"),
        pytest.param(1, [0.5, 0.5], True, id="exactly-full"),
        pytest.param(1, [0.5, 0.51], False, id="one-percent-over"),
        pytest.param(1, [0.3334, 0.3334, 0.3334], False, id="a-hair-over"),
        pytest.param(-1, [5, 5], True, id="unlimited-parent"),
        pytest.param(2, [-1], False, id="unlimited-child-of-finite-parent"),
        pytest.param(4000, [2000, 2000], True, id="cpu-millicores"),
    ],
)
def test_children_cannot_overcommit_parent_quota(parent: float, children: list[float], fits: bool) -> None:
    issues = overcommit_issues(_tree(parent, children))
    assert (not issues) == fits, [i.message for i in issues]
    if issues:
        assert issues[0].path == (0, "resources", "gpu", "quota")


def test_overcommit_is_checked_for_every_resource() -> None:
    issues = overcommit_issues(_tree(8000, [6000, 6000], resource="memory"))
    assert [issue.path for issue in issues] == [(0, "resources", "memory", "quota")]


@pytest.mark.parametrize(
    ("parent", "children", "warned"),
    [
        pytest.param(1, [0.33, 0.33, 0.33], True, id="one-hundredth-unassigned"),
        pytest.param(1, [0.5, 0.5], False, id="fully-assigned"),
        pytest.param(-1, [0.5], False, id="unlimited-parent-has-no-remainder"),
    ],
)
def test_partly_assigned_guarantee_is_a_warning(parent: float, children: list[float], warned: bool) -> None:
    assert bool(unassigned_warnings(_tree(parent, children))) == warned


@st.composite
def _forests(draw: st.DrawFn) -> list[QueueConfig]:
    """Random valid trees, listed in a random order (children may come before parents)."""
    count = draw(st.integers(1, 12))
    names = [f"q{i}" for i in range(count)]
    queues = [
        QueueConfig(name=name, parent_queue=draw(st.sampled_from([None, *names[:i]])) if i else None)
        for i, name in enumerate(names)
    ]
    return draw(st.permutations(queues))


@given(_forests())
def test_parents_are_always_created_before_their_children(queues: list[QueueConfig]) -> None:
    ordered = QueueTree(queues).parents_first
    assert sorted(q.name for q in ordered) == sorted(q.name for q in queues)
    position = {q.name: i for i, q in enumerate(ordered)}
    for queue in queues:
        if queue.parent_queue:
            assert position[queue.parent_queue] < position[queue.name]


@given(_forests())
def test_leaves_are_exactly_the_queues_nobody_names_as_parent(queues: list[QueueConfig]) -> None:
    parents = {q.parent_queue for q in queues}
    assert set(QueueTree(queues).leaves) == {q.name for q in queues} - parents

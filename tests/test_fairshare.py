"""The fair-share model against KAI's own examples and invariants, and the planner's CLI contract."""

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from config.issues import ConfigError
from config.queue_hierarchy.hierarchy import QueueTree
from config.queue_hierarchy.queues import QueueConfig
from config.sources import load_settings
from fairshare.cli import main
from fairshare.division import alone_shares, fair_shares
from fairshare.plan import plan
from harness import dev_settings

SLACK = 1e-9


def queue(
    name: str, quota: float, limit: float = -1, weight: float = 1, parent: str | None = None, priority: int = 100
) -> QueueConfig:
    return QueueConfig.model_validate(
        {
            "name": name,
            "parentQueue": parent,
            "priority": priority,
            "resources": {"gpu": {"quota": quota, "limit": limit, "overQuotaWeight": weight}},
        }
    )


def dev_queues() -> list[QueueConfig]:
    return [QueueConfig.model_validate(q) for q in dev_settings()["queues"]]


def test_kais_documented_example_gives_70_and_30() -> None:
    queues = [queue("a", 10, weight=3), queue("b", 10, weight=1)]
    assert fair_shares(queues, 100, {"a": 100, "b": 100}) == {"a": 70, "b": 30}


def test_three_saturated_teams_share_the_gpu_up_to_kais_rounding() -> None:
    shares = fair_shares(dev_queues(), 1, dict.fromkeys(["team-nlp", "team-vision", "team-recommender"], 1.0))
    # Each gets its 0.33; the last 0.01 is a remainder, handed whole to the oldest queue.
    assert shares["team-nlp"] == pytest.approx(0.34)
    assert shares["team-vision"] == pytest.approx(0.33)
    assert shares["team-recommender"] == pytest.approx(0.33)
    assert shares["ml-org"] == pytest.approx(1.0)


@pytest.mark.parametrize(("limit", "burst"), [(1, 1.0), (0.5, 0.5), (-1, 1.0)])
def test_a_team_alone_bursts_up_to_its_limit(limit: float, burst: float) -> None:
    queues = [queue("org", 1), queue("solo", 0.33, limit=limit, parent="org"), queue("idle", 0.33, parent="org")]
    assert fair_shares(queues, 1, {"solo": 1})["solo"] == pytest.approx(burst)


def test_priority_groups_are_served_highest_first() -> None:
    queues = [queue("low", 0, priority=100), queue("high", 0, priority=200), queue("mid", 0, priority=150)]
    assert fair_shares(queues, 10, {"low": 10, "high": 6, "mid": 10}) == {"low": 0, "high": 6, "mid": 4}


def test_a_three_level_hierarchy_divides_top_down() -> None:
    queues = [
        queue("org", 8),
        queue("research", 6, parent="org"),
        queue("prod", 2, parent="org"),
        queue("nlp", 3, parent="research"),
        queue("vision", 3, parent="research", weight=2),
        queue("serving", 2, parent="prod"),
    ]
    shares = fair_shares(queues, 8, {"nlp": 8, "vision": 8, "serving": 0})
    assert shares["org"] == 8
    assert (shares["research"], shares["prod"]) == (8, 0)
    assert shares["nlp"] + shares["vision"] == shares["research"]
    # The 2 idle GPUs split 1:2 is 0.67 and 1.33: vision gets 1 whole GPU in the round; the
    # last GPU goes to the largest fractional remainder, nlp's 0.67.
    assert (shares["nlp"], shares["vision"]) == (3 + 1, 3 + 1)
    assert shares["serving"] == 0


@st.composite
def trees(draw: st.DrawFn) -> tuple[list[QueueConfig], float, dict[str, float]]:
    """A root per department, teams under each, quotas that fit, random limits, weights, priorities, requests."""
    capacity = draw(st.integers(1, 16))
    queues, demand = [], {}
    departments = draw(st.integers(1, 3))
    for d in range(departments):
        dept_quota = draw(st.sampled_from([0, 0.5, 1, 2, 4]))
        queues.append(queue(f"d{d}", dept_quota, priority=draw(st.sampled_from([50, 100]))))
        teams = draw(st.integers(1, 3))
        for t in range(teams):
            # Rounded down, so the children's quotas always fit in the department's, as config requires.
            quota = math.floor(dept_quota / teams * draw(st.sampled_from([0, 0.5, 1])) * 10_000) / 10_000
            limit = draw(st.sampled_from([-1, max(quota, 1), max(quota, 3)]))
            name = f"t{d}-{t}"
            queues.append(queue(name, quota, limit=limit, weight=draw(st.sampled_from([0, 1, 2, 3])), parent=f"d{d}"))
            demand[name] = draw(st.sampled_from([0, 0.25, 1, 2.5, 8, 100]))
    return queues, float(capacity), demand


@settings(max_examples=150, deadline=None, derandomize=True)
@given(case=trees())
def test_fair_share_invariants(case: tuple[list[QueueConfig], float, dict[str, float]]) -> None:
    queues, capacity, demand = case
    shares = fair_shares(queues, capacity, demand)
    roots = [q for q in queues if q.parent_queue is None]
    quotas_fit = sum(q.resources.gpu.quota for q in roots) <= capacity
    if quotas_fit:  # KAI hands out root quotas even beyond the capacity; config leaves that to the operator.
        assert sum(shares[q.name] for q in roots) <= capacity + SLACK
    for parent in roots:
        children = [q for q in queues if q.parent_queue == parent.name]
        assert sum(shares[c.name] for c in children) <= shares[parent.name] + SLACK
    requests = {**demand, **{p.name: sum(demand[c.name] for c in queues if c.parent_queue == p.name) for p in roots}}
    for q in queues:
        gpu = q.resources.gpu
        if gpu.limit != -1:
            assert shares[q.name] <= gpu.limit + 1 + SLACK, "beyond the limit by more than KAI's rounding slack"
        if quotas_fit:
            assert shares[q.name] >= min(gpu.quota, requests[q.name]) - SLACK


@settings(max_examples=150, deadline=None, derandomize=True)
@given(case=trees())
def test_a_team_alone_gets_what_the_whole_tree_would_give_it(case: tuple[list[QueueConfig], float, Any]) -> None:
    """The plan divides each queue once, as the only one asking; the whole tree's division must agree."""
    queues, capacity, _ = case
    tree = QueueTree(queues)
    by_itself = alone_shares(tree, capacity)
    for leaf in tree.leaves:
        assert by_itself[leaf] == fair_shares(queues, capacity, {leaf: capacity})[leaf]


def test_the_plan_sets_each_team_beside_a_rigid_partition() -> None:
    result = plan(dev_queues(), 1)
    rows = {q.name: q for q in result.queues}
    assert rows["team-nlp"].alone == pytest.approx(1.0)
    assert rows["team-nlp"].rigid == 0.33
    assert result.saturated_utilisation == pytest.approx(1.0)
    assert result.rigid_utilisation == pytest.approx(0.99)


def test_cli_prints_the_table_for_a_stack(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--stack", "dev"]) == 0
    out = capsys.readouterr().out
    assert "team-nlp alone: 1.00 GPU (rigid partition: 0.33)" in out
    assert "All teams busy: 100% of the pool in use (rigid partition by quota: 99%)" in out


def test_cli_what_if(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--stack", "dev", "--demand", "team-nlp=1", "--demand", "team-vision=0.2", "--json"]) == 0
    queues = json.loads(capsys.readouterr().out)["queues"]
    assert queues["team-vision"]["whatIf"] == pytest.approx(0.2)
    assert queues["team-nlp"]["whatIf"] == pytest.approx(0.8)
    assert queues["team-recommender"]["whatIf"] == 0


def _scenario(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(document))
    return path


def _what_if(out: str) -> dict[str, float]:
    """Each queue's share of its scenario's requests, from the plan's JSON."""
    return {name: queue["whatIf"] for name, queue in json.loads(out)["queues"].items()}


def test_cli_scenario_json_contract(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = {
        "capacity": 100,
        "queues": [
            {"name": "1", "resources": {"gpu": {"quota": 10, "overQuotaWeight": 3}}, "request": 100},
            {"name": "b", "resources": {"gpu": {"quota": 10, "overQuotaWeight": 1}}, "request": 100},
        ],
    }
    assert main(["--scenario", str(_scenario(tmp_path, document)), "--json"]) == 0
    assert _what_if(capsys.readouterr().out) == {"1": 70, "b": 30}


def _gpu(quota: float, limit: float = -1, weight: float = 1) -> dict[str, Any]:
    return {"gpu": {"quota": quota, "limit": limit, "overQuotaWeight": weight}}


def _departments(capacity: float, weights: tuple[float, float]) -> dict[str, Any]:
    """Two departments (quotas 3 and 1) with one team each, both guaranteed 2: more than d2 is."""
    return {
        "capacity": capacity,
        "queues": [
            {"name": "d1", "resources": _gpu(3, weight=weights[0])},
            {"name": "d2", "resources": _gpu(1, weight=weights[1])},
            {"name": "q1", "parentQueue": "d1", "resources": _gpu(2), "request": 100},
            {"name": "q2", "parentQueue": "d2", "resources": _gpu(2), "request": 100},
        ],
    }


# KAI's own tests of trees stack config refuses (kai-scheduler/KAI-Scheduler @v0.16.8,
# pkg/scheduler/plugins/proportion/resource_division/resource_division_test.go "doesn't give more
# GPUs than allowed"; proportion_test.go "deserved department quota", "over-quota", "over-quota
# weight", "over-quota weight - reversed"), with the fair shares those tests assert.
KAI_SCENARIOS = [
    pytest.param(
        {"capacity": 3, "queues": [{"name": "q", "resources": _gpu(3, limit=2, weight=0), "request": 2}]},
        {"q": 2},
        id="limit-below-quota",
    ),
    pytest.param(_departments(4, (1, 1)), {"d1": 3, "q1": 3, "d2": 1, "q2": 2}, id="child-above-its-department"),
    pytest.param(_departments(12, (1, 1)), {"d1": 7, "q1": 7, "d2": 5, "q2": 5}, id="over-quota"),
    pytest.param(_departments(12, (1, 7)), {"d1": 4, "q1": 4, "d2": 8, "q2": 8}, id="over-quota-weight"),
    pytest.param(_departments(12, (7, 1)), {"d1": 10, "q1": 10, "d2": 2, "q2": 2}, id="over-quota-weight-reversed"),
]


@pytest.mark.parametrize(("document", "expected"), KAI_SCENARIOS)
def test_a_scenario_kai_accepts_gets_kais_shares_and_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], document: Any, expected: dict[str, float]
) -> None:
    assert main(["--scenario", str(_scenario(tmp_path, document)), "--json"]) == 0
    captured = capsys.readouterr()
    assert _what_if(captured.out) == expected
    assert "would refuse" in captured.err
    assert main(["--scenario", str(_scenario(tmp_path, document))]) == 0, "the table takes such trees too"


def test_stack_config_still_refuses_what_a_scenario_only_warns_about() -> None:
    config = dev_settings()
    config["queues"][1]["resources"]["gpu"] = {"quota": 0.33, "limit": 0.2}
    with pytest.raises(ConfigError, match=r"queues\[1\]\.resources\.gpu\.limit"):
        load_settings(config)


def test_lower_priorities_take_what_higher_ones_leave_before_their_remainders() -> None:
    """KAI runs every priority group's rounds before any group's remainders (divideOverQuotaResource)."""
    queues = [
        queue("h1", 0, priority=200),
        queue("h2", 0, priority=200),
        queue("l", 0, priority=100),
    ]
    assert fair_shares(queues, 1, {"h1": 5, "h2": 5, "l": 5}) == {"h1": 0, "h2": 0, "l": 1}


@pytest.mark.parametrize(
    ("document", "hint"),
    [
        ({"capacity": 1, "queues": [{"name": "A"}]}, "queues[0].name"),
        ({"capacity": -1, "queues": [{"name": "a"}]}, "capacity"),
        ({"capacity": 1, "queues": [{"name": "a", "request": -2}]}, "queues[0].request"),
        (
            {
                "capacity": 1,
                "queues": [{"name": "p"}, {"name": "c", "parentQueue": "p"}, {"name": "x", "parentQueue": "q"}],
            },
            "parentQueue",
        ),
        (
            {"capacity": 1, "queues": [{"name": "p", "request": 1}, {"name": "c", "parentQueue": "p"}]},
            "queues[0].request",
        ),
        ("not an object", "must be a mapping"),
    ],
)
def test_cli_invalid_scenario_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], document: Any, hint: str
) -> None:
    assert main(["--scenario", str(_scenario(tmp_path, document)), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1
    assert hint in captured.err


def test_cli_bad_stack_is_the_same_clean_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--stack", "nosuchstack"]) == 2
    assert "Pulumi.nosuchstack.yaml does not exist" in capsys.readouterr().err

"""Fair over time: KAI's usage-based fair share, from config to the shard, and a planner that knows past usage.

KAI ships no numeric table for time-based fairness (resource_division_test.go passes kValue
0 everywhere, the env-tests write CSVs and assert nothing). So the cases here are: the
end-to-end test's scenario (test/e2e/suites/timeaware/timeaware_test.go @v0.16.8), the
numbers its comment works through, and cases derived from calcShareWeights line by line.
"""

import json
import math
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from config.kai_scheduler.fairness import USAGE_ALLOCATION_METRIC, USAGE_CAPACITY_METRIC, FairnessConfig
from config.queue_hierarchy.hierarchy import QueueTree
from config.queue_hierarchy.queues import QueueConfig
from fairshare.cli import main
from fairshare.division import TimeBased, _Share, _share_weights, fair_shares
from fairshare.prometheus import Prometheus
from fairshare.usage import read_usage_file, read_usage_prometheus, usage_document, usage_query, with_parents
from harness import ProgramRun, dev_settings, run_main
from tests.charts import crd_errors
from tests.real_prometheus import Series, real_prometheus
from tests.stacks import releases

SHARD = "kubernetes:kai.scheduler/v1:SchedulingShardPatch"


def _queue(
    name: str, *, parent: str | None = None, quota: float = 0, limit: float = -1, weight: float = 1
) -> QueueConfig:
    gpu = {"quota": quota, "limit": limit, "overQuotaWeight": weight}
    return QueueConfig.model_validate({"name": name, "parentQueue": parent, "resources": {"gpu": gpu}})


# --- the division, as calcShareWeights bends it ----------------------------------------------------------------


def test_the_e2e_comments_weights() -> None:
    """timeaware_test.go's comment at k=100: queue-a (weight 10000, all of the past use) 0.9899, queue-b 0.0101."""
    a = _Share("a", 0, 100, 0, -1, 10000, 100, usage=1.0)
    b = _Share("b", 1, 100, 0, -1, 1, 100, usage=0.0)
    weights = _share_weights([a, b], k_value=100)
    assert weights["a"] == pytest.approx(0.9899, abs=1e-4)
    assert weights["b"] == pytest.approx(0.0101, abs=1e-4)


E2E = [
    _queue("root", quota=-1),
    _queue("queue-a", parent="root", weight=10000),
    _queue("queue-b", parent="root", weight=1),
]


@pytest.mark.parametrize(
    ("k_value", "b_gets"),
    [
        # Usage-blind, queue-b's 1/10001 of the pool rounds to nothing: queue-a keeps all 8 GPUs.
        (0.0, 0.0),
        # The e2e test's own kValue: queue-a, which used everything, weighs 0 until queue-b has its GPU.
        (10000.0, 1.0),
    ],
)
def test_the_e2e_scenario_a_queue_that_used_nothing_reclaims_a_gpu(k_value: float, b_gets: float) -> None:
    """queue-a filled every GPU for the whole window; queue-b then asks for one. With time-based fairness its fair
    share is that GPU, which the reclaim the test waits for gives it."""
    usage = TimeBased(k_value, {"queue-a": 1.0, "root": 1.0})
    shares = fair_shares(E2E, 8, {"queue-a": 8, "queue-b": 1}, time_based=usage)
    assert shares["queue-b"] == b_gets
    assert shares["queue-a"] == 8 - b_gets


def test_a_queue_that_used_more_than_twice_its_share_weighs_nothing_while_others_ask() -> None:
    """max(0, nWeight + k(nWeight - nUsage)) at k=1: nWeight 0.5, nUsage 0.75 -> 0.25; nUsage 1 -> 0 (floored)."""
    a = _Share("a", 0, 100, 0, -1, 1, 10, usage=1.0)
    b = _Share("b", 1, 100, 0, -1, 1, 10, usage=0.0)
    assert _share_weights([a, b], k_value=1) == {"a": 0.0, "b": 1.0}
    a.usage = 0.75
    assert _share_weights([a, b], k_value=1) == {"a": 0.25, "b": 1.0}


def test_when_every_weight_floors_to_nothing_the_rest_stays_undivided() -> None:
    """shareWeightsSum == 0 ends the rounds (divideUpToFairShare): past the quotas nothing more is handed out."""
    queues = [_queue("root", quota=-1), _queue("a", parent="root", quota=1), _queue("b", parent="root", quota=1)]
    shares = fair_shares(queues, 10, {"a": 10, "b": 10}, time_based=TimeBased(10, {"a": 0.9, "b": 0.9}))
    assert (shares["a"], shares["b"]) == (1.0, 1.0)


def test_weights_are_renormalised_each_round_usage_is_not() -> None:
    """Once b is satisfied, a is alone: its nWeight becomes 1 and, with usage 0.5 at k=1, weight 1.5 of 1.5."""
    queues = [_queue("root", quota=-1), _queue("a", parent="root"), _queue("b", parent="root")]
    shares = fair_shares(queues, 10, {"a": 10, "b": 2}, time_based=TimeBased(1, {"a": 0.5}))
    assert (shares["a"], shares["b"]) == (8.0, 2.0)


@st.composite
def _trees(draw: st.DrawFn) -> list[QueueConfig]:
    count = draw(st.integers(min_value=2, max_value=5))
    leaves = [
        _queue(
            f"q{i}",
            parent="root",
            quota=draw(st.sampled_from([0, 0.5, 1, 2])),
            limit=draw(st.sampled_from([-1, 2, 4, 8])),
            weight=draw(st.sampled_from([0, 1, 2, 5])),
        )
        for i in range(count)
    ]
    return [_queue("root", quota=-1), *leaves]


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_without_usage_or_with_k_zero_the_division_is_the_usage_blind_one(data: st.DataObject) -> None:
    """k=0: nWeight + 0 = nWeight. No usage: every weight is (1+k) nWeight, the same proportions."""
    queues = data.draw(_trees())
    capacity = data.draw(st.sampled_from([4, 8, 16]))
    demand = {q.name: data.draw(st.sampled_from([0, 1, 3, 16])) for q in queues[1:]}
    blind = fair_shares(queues, capacity, demand)
    usage = {q.name: data.draw(st.floats(0, 1)) for q in queues[1:]}
    assert fair_shares(queues, capacity, demand, time_based=TimeBased(0, usage)) == blind
    # k=1 doubles every weight, exact in binary floating point: bit for bit the blind division.
    assert fair_shares(queues, capacity, demand, time_based=TimeBased(1, {})) == blind
    # Another k scales the weights by 1+k only up to rounding, which can make or break an exact tie between two
    # remainders (divideRemainingResource); KAI itself then moves up to one GPU between queues, the total kept.
    k = data.draw(st.floats(0, 50))
    bent = fair_shares(queues, capacity, demand, time_based=TimeBased(k, {}))
    assert sum(bent.values()) == pytest.approx(sum(blind.values()))
    assert all(abs(bent[q] - blind[q]) <= 1 for q in blind)


def test_kai_normalises_a_weight_before_scaling_the_round() -> None:
    """The case hypothesis once found: with k=1.5, round 2 gives q1 exactly 0.75 and q3 3.75, as KAI computes
    `amount * (weight / sum)` (resource_division.go divideUpToFairShare @v0.16.8); q1 and q3 then tie at a 0.75
    remainder and the older q1 takes the whole GPU. `amount * weight / sum` made q1's 0.7499999999999999."""
    queues = [_queue("root", quota=-1)] + [
        _queue(f"q{i}", parent="root", quota=0.5 if i == 3 else 0, weight=w) for i, w in enumerate([0, 1, 5, 5, 0])
    ]
    shares = fair_shares(queues, 16, {"q1": 3, "q2": 3, "q3": 16}, time_based=TimeBased(1.5, {}))
    assert (shares["q1"], shares["q2"], shares["q3"]) == (2.0, 3.0, 11.0)


def test_a_parents_use_is_its_childrens_unless_given() -> None:
    tree = QueueTree([_queue("root", quota=-1), _queue("a", parent="root"), _queue("b", parent="root")])
    assert with_parents({"a": 3, "b": 4}, tree)["root"] == 7
    assert with_parents({"a": 3, "root": 5}, tree)["root"] == 5


# --- config ---------------------------------------------------------------------------------------------------


def test_the_defaults_are_kais_own() -> None:
    fairness = FairnessConfig()
    assert (fairness.time_based, fairness.window_size, fairness.window_type) == (False, "1w", "sliding")
    assert (fairness.half_life_period, fairness.k_value) == (None, 1.0)


# --- the shard ------------------------------------------------------------------------------------------------


def _time_based(**fairness: Any) -> dict[str, Any]:
    config = dev_settings()
    config["fairness"] = {"timeBased": True, **fairness}
    return config


def _shard(run: ProgramRun) -> dict[str, Any]:
    return dict(run.one(SHARD).inputs)


def test_the_platform_owns_the_default_shard_and_takes_over_a_kept_one() -> None:
    run = run_main(dev_settings())
    shard = _shard(run)
    assert shard["metadata"]["name"] == "default"
    # A patch with patchForce upserts the shard an earlier release left (helm.sh/resource-policy: keep).
    assert shard["metadata"]["annotations"]["pulumi.com/patchForce"] == "true"
    assert shard["spec"] == {"partitionLabelValue": "", "placementStrategy": {"gpu": "binpack", "cpu": "binpack"}}
    release = run.one("kubernetes:helm.sh/v3:Release", "kai-release")
    assert release.inputs["values"]["defaultShard"] == {"enabled": False}
    # Applied after the release (its CRD, and Helm keeping the old shard), before the gate that waits for its scheduler.
    by_urn = {r.urn: r.name for r in run.registrations}
    assert "kai-release" in {by_urn[d] for d in run.one(SHARD).dependencies}
    gate = run.one("kubernetes:batch/v1:Job", "kai-gate")
    assert "kai-shard" in {by_urn.get(d) for d in gate.dependencies}


def test_time_based_fairness_points_the_shard_at_the_stacks_prometheus() -> None:
    run = run_main(_time_based(windowSize="3d", halfLifePeriod="24h", kValue=2))
    spec = _shard(run)["spec"]
    assert spec["kValue"] == 2
    assert spec["usageDBConfig"] == {
        "clientType": "prometheus",
        "connectionString": "http://kube-prometheus-stack-prometheus.observability.svc:9090",
        "usageParams": {
            "windowSize": "3d",
            "windowType": "sliding",
            "halfLifePeriod": "24h",
            "extraParams": {"gpuAllocationMetric": USAGE_ALLOCATION_METRIC, "gpuCapacityMetric": USAGE_CAPACITY_METRIC},
        },
    }


def test_an_existing_prometheus_is_the_one_named() -> None:
    config = _time_based()
    url = "http://kube-prom-stack-kube-prome-prometheus.observability.svc:9090"
    config["observability"] = {"mode": "existing", "prometheusUrl": url}
    assert _shard(run_main(config))["spec"]["usageDBConfig"]["connectionString"] == url


def test_the_scheduler_values_still_reach_the_shard() -> None:
    config = dev_settings()
    config["kaiScheduler"] = {"values": {"scheduler": {"placementStrategy": "spread", "args": {"v": "4"}}}}
    spec = _shard(run_main(config))["spec"]
    assert spec["placementStrategy"] == {"gpu": "spread", "cpu": "spread"}
    assert spec["args"] == {"v": "4"}


# --- the planner ----------------------------------------------------------------------------------------------


def test_the_planner_reads_a_usage_file_and_says_who_gains(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    usage = tmp_path / "usage.json"
    usage.write_text(json.dumps({"clusterGpuHours": 168, "queues": {"team-nlp": 150, "team-vision": 0}}))
    assert main(["--stack", "dev", "--usage", str(usage), "--capacity", "3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["usage"]["kValue"] == 1
    queues = data["queues"]
    assert queues["team-nlp"]["usedGpuHours"] == 150
    assert queues["team-nlp"]["usageAdjusted"] <= queues["team-nlp"]["saturated"]
    assert main(["--stack", "dev", "--usage", str(usage)]) == 0
    text = capsys.readouterr().out
    assert "busy, with usage" in text
    assert "Time-based fairness is off in this stack" in text


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"queues": {"team-nlp": 1}}, "clusterGpuHours"),
        ({"clusterGpuHours": 0, "queues": {}}, "no GPUs in the window"),
        ({"clusterGpuHours": 10, "queues": {"team-x": 1}}, "'team-x' is not a queue"),
        ({"clusterGpuHours": 10, "queues": {"team-nlp": -1}}, "finite number >= 0"),
        ({"clusterGpuHours": 10, "queues": {"team-nlp": 11}}, "more than the cluster's 10"),
        ([], "give {"),
    ],
)
def test_a_bad_usage_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], document: Any, message: str
) -> None:
    usage = tmp_path / "usage.json"
    usage.write_text(json.dumps(document))
    assert main(["--stack", "dev", "--usage", str(usage)]) == 2
    error = capsys.readouterr().err
    assert message in error
    assert error.count("\n") == 1


def test_usage_prints_a_usage_file_from_prometheus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    now = int(time.time())
    with real_prometheus(tmp_path, _history(now), now - 8 * HOUR, now) as url:
        assert main(["usage", "--prometheus", url, "--stack", "dev"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["window"] == "1w"
    assert set(document["queues"]) == {"ml-org", "team-nlp", "team-vision"}
    assert main(["usage", "--prometheus", "http://127.0.0.1:9", "--stack", "dev"]) == 2
    assert "cannot reach Prometheus" in capsys.readouterr().err


def test_usage_goes_with_a_stack(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--scenario", "examples/scenario.json", "--usage", "examples/usage.json"]) == 2
    assert "go with --stack" in capsys.readouterr().err


def test_the_query_is_kais_with_decay() -> None:
    """querySlidingTimeWindow and getExponentialDecayQuery @v0.16.8, for now = 1700000000 and a 1h half-life."""
    fairness = FairnessConfig(time_based=True, window_size="1w", half_life_period="1h")
    assert usage_query("m", fairness, 1_700_000_000) == (
        "sum_over_time((((m) * (0.5^((1700000000 - time()) / 3600.000000))))[1w:1m0s])"
    )
    assert usage_query("m", FairnessConfig(), 1) == "sum_over_time((m)[1w:1m0s])"


# --- a real Prometheus ----------------------------------------------------------------------------------------

HOUR = 3600
RESTART = 2 * HOUR
"""The queue-controller restarts two hours before now: team-nlp's series changes pod, and for five minutes both
report (the old pod's last scrape still within the lookback)."""


def _history(now: float) -> list[Series]:
    def nlp_before(t: float) -> float | None:
        return 2 if t < now - RESTART + 300 else None

    def nlp_after(t: float) -> float | None:
        return 2 if t >= now - RESTART else None

    def allocated(name: str, labels: dict[str, str], value: float) -> Series:
        return Series("kai_queue_allocated_gpus", {"queue_name": name, **labels}, lambda t: value)

    return [
        Series("kai_queue_allocated_gpus", {"queue_name": "team-nlp", "pod": "qc-1"}, nlp_before),
        Series("kai_queue_allocated_gpus", {"queue_name": "team-nlp", "pod": "qc-2"}, nlp_after),
        allocated("team-vision", {"pod": "qc-1"}, 1),
        allocated("ml-org", {"pod": "qc-1"}, 3),
        # Two kube-state-metrics replicas report the node's 4 GPUs.
        Series(
            "kube_node_status_capacity", {"node": "gpu-1", "resource": "nvidia_com_gpu", "pod": "ksm-a"}, lambda t: 4
        ),
        Series(
            "kube_node_status_capacity", {"node": "gpu-1", "resource": "nvidia_com_gpu", "pod": "ksm-b"}, lambda t: 4
        ),
    ]


def test_the_planner_reads_usage_from_a_real_prometheus_as_the_shard_tells_kai_to(tmp_path: Path) -> None:
    """Over a 6-hour window, team-nlp held 2 GPUs throughout and team-vision 1, out of 4: nUsage 0.5 and 0.25. The
    shard's own metrics give exactly that; KAI's defaults would double the capacity (two kube-state-metrics) and
    keep one of team-nlp's two series, under-counting it."""
    run = run_main(_time_based(windowSize="6h"))
    params = _shard(run)["spec"]["usageDBConfig"]["usageParams"]
    fairness = FairnessConfig(time_based=True, window_size=params["windowSize"])
    now = int(time.time())
    tree = QueueTree([QueueConfig.model_validate(q) for q in dev_settings()["queues"]])
    with real_prometheus(tmp_path, _history(now), now - 8 * HOUR, now) as url:
        prometheus = Prometheus(url, {})
        metrics = params["extraParams"]
        usage = read_usage_prometheus(
            prometheus,
            fairness,
            allocation=metrics["gpuAllocationMetric"],
            capacity=metrics["gpuCapacityMetric"],
            now=now,
            tree=tree,
        )
        default = read_usage_prometheus(
            prometheus,
            fairness,
            allocation="kai_queue_allocated_gpus",
            capacity='sum(kube_node_status_capacity{resource="nvidia_com_gpu"})',
            now=now,
            tree=tree,
        )
    shares = usage.shares()
    assert shares["team-nlp"] == pytest.approx(0.5, abs=0.01)
    assert shares["team-vision"] == pytest.approx(0.25, abs=0.01)
    assert usage.cluster_gpu_hours == pytest.approx(4 * 6, abs=0.2)
    assert default.shares()["team-vision"] == pytest.approx(0.125, abs=0.01), "capacity counted twice"
    # The snapshot `python -m fairshare usage` writes reads back as the same use.
    snapshot = tmp_path / "usage.json"
    snapshot.write_text(json.dumps(usage_document(usage, "6h", now)))
    again = read_usage_file(snapshot, tree)
    assert again.shares() == pytest.approx(shares, abs=1e-4)
    assert "window 6h" in again.source
    assert default.shares()["team-nlp"] < 0.25, "one of two series kept"
    assert not math.isclose(default.shares()["team-nlp"], shares["team-nlp"])


def test_the_time_based_shard_is_one_kais_crd_accepts() -> None:
    """Validated against the SchedulingShard CRD rendered by real Helm from the pinned KAI chart."""
    (release,) = [r for r in releases("brev") if r.resource == "kai-release"]
    (crd,) = [
        o
        for o in release.render(crds=True)
        if o["kind"] == "CustomResourceDefinition" and o["spec"]["names"]["kind"] == "SchedulingShard"
    ]
    shard = _shard(run_main(_time_based(halfLifePeriod="24h", kValue=2.5)))
    assert crd_errors(crd, {key: shard[key] for key in ("apiVersion", "kind", "metadata", "spec")}) == []


def test_the_pr_comment_shows_the_usage_column_its_chart_and_who_gains(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    usage = tmp_path / "usage.json"
    usage.write_text(
        json.dumps(
            {
                "window": "1w",
                "takenAt": "2026-12-01T00:00:00Z",
                "clusterGpuHours": 168,
                "queues": {"team-nlp": 160, "team-vision": 0, "team-recommender": 0},
            }
        )
    )
    assert main(["--stack", "dev", "--usage", str(usage), "--capacity", "1", "--format", "markdown"]) == 0
    markdown = capsys.readouterr().out
    assert "| busy, with usage | change |" in markdown
    assert '"team-nlp  busy 0.34 / alone 1.00 / with past use 0.33"' in markdown, "the chart's label says it too"
    assert "window 1w takenAt 2026-12-01T00:00:00Z" in markdown
    assert "Loses: team-nlp" in markdown

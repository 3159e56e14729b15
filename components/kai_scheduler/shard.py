"""KAI's `default` SchedulingShard, owned by the platform rather than by the chart.

The chart's default shard carries the scheduler.* values but neither `kValue` nor
`usageDBConfig`, and is kept on uninstall (`helm.sh/resource-policy: keep`:
deployments/kai-scheduler/templates/default-shard.yaml @v0.16.8). The platform turns it
off (`defaultShard.enabled: false`) and applies its own `default` shard, with the same
fields from the same values, plus time-based fairness when the stack asks for it. KAI's
operator turns the shard into the scheduler's config: kValue into the proportion plugin's
arguments, usageDBConfig as is (pkg/operator/operands/scheduler/resources_for_shard.go
configMapForShard @v0.16.8).

A shard that an earlier release of this stack left behind (kept by Helm) is taken over,
not re-created: the shard is a server-side-apply patch with patchForce, which upserts an
existing object and takes its fields from Helm's field manager (pulumi-kubernetes
provider/pkg/await/await.go Creation: a plain create of an existing object fails with
AlreadyExists unless upsertExistingObjects; a Patch resource always upserts; read at
v4.32.0). Like the chart's kept shard, it stays when the stack is destroyed: the patch
relinquishes its fields (ssa.Relinquish) and the cluster-scoped object remains.
"""

from typing import Any

from config.kai_scheduler.fairness import USAGE_ALLOCATION_METRIC, USAGE_CAPACITY_METRIC, FairnessConfig

SHARD_NAME = "default"
PATCH_FORCE = {"pulumi.com/patchForce": "true"}
CHART_PLACEMENT_STRATEGY = "binpack"
"""scheduler.placementStrategy's default (deployments/kai-scheduler/values.yaml @v0.16.8)."""
SHARD_FROM_VALUES = ("args", "plugins", "actions", "scenarioSearchBudgets")
"""The scheduler.* values the chart's template copies into the shard as they are."""


def shard_spec(scheduler_values: dict[str, Any], fairness: FairnessConfig, prometheus: str | None) -> dict[str, Any]:
    """The spec the chart's template would render from scheduler.*, and time-based fairness when it is on."""
    spec: dict[str, Any] = {"partitionLabelValue": ""}
    strategy = scheduler_values.get("placementStrategy", CHART_PLACEMENT_STRATEGY)
    if strategy:
        spec["placementStrategy"] = {"gpu": strategy, "cpu": strategy}
    for key in SHARD_FROM_VALUES:
        if scheduler_values.get(key):
            spec[key] = scheduler_values[key]
    if fairness.time_based and prometheus is not None:
        spec["kValue"] = fairness.k_value
        spec["usageDBConfig"] = usage_db_config(fairness, prometheus)
    return spec


def usage_db_config(fairness: FairnessConfig, prometheus: str) -> dict[str, Any]:
    """usagedb/api/interface.go UsageDBConfig and UsageParams @v0.16.8, by their JSON names."""
    params: dict[str, Any] = {
        "windowSize": fairness.window_size,
        "windowType": fairness.window_type,
        "extraParams": {"gpuAllocationMetric": USAGE_ALLOCATION_METRIC, "gpuCapacityMetric": USAGE_CAPACITY_METRIC},
    }
    if fairness.half_life_period is not None:
        params["halfLifePeriod"] = fairness.half_life_period
    return {"clientType": "prometheus", "connectionString": prometheus, "usageParams": params}

"""`gpu-tenancy:fairness`: KAI's time-based fair share, which lets past use bend the division of idle GPUs.

KAI divides what is left after quotas by overQuotaWeight. With time-based fairness each
round's weight becomes max(0, nWeight + k * (nWeight - nUsage)), nUsage being the queue's
GPU use over a window as a share of the cluster's (pkg/scheduler/plugins/proportion/
resource_division/resource_division.go calcShareWeights @v0.16.8). The names below are
KAI's own (SchedulingShard spec.kValue and spec.usageDBConfig.usageParams:
pkg/apis/kai/v1/schedulingshard_types.go, pkg/scheduler/cache/usagedb/api/interface.go).

Defaults, and why:
- `timeBased: false`: KAI's own default; turning it on changes what teams get, so it is
  a decision for a reviewed pull request.
- `windowSize: 1w`: KAI's default (usagedb/api/defaults.go), and the week the PR comment
  and the cost report already speak of.
- `windowType: sliding`: KAI's default, and the only one that works at the pinned versions
  (see below).
- no `halfLifePeriod`: KAI's default; a week's window already forgets.
- `kValue: 1`: the proportion plugin's default (proportion.go kValue 1.0): a queue that
  used exactly its weight's share keeps its weight; one that used nothing gets up to twice
  it; one that used twice its share gets none until it falls back.
"""

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from config.issues import ConfigIssue, ConfigIssues
from config.types import ConfigModel, GoDuration

_PROMETHEUS_DURATION = re.compile(
    r"^(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?$"
)
"""prometheus-operator's Duration, the type of usageParams.windowSize (monitoringv1.Duration)."""
_UNIT_SECONDS = {"y": 365 * 86400, "w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
_GO_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
QUERY_RESOLUTION_SECONDS = 60
"""KAI's usage query samples each minute (extraParams queryResolution, default 1m: usagedb/prometheus)."""
USAGE_ALLOCATION_METRIC = "max by (queue_name) (kai_queue_allocated_gpus)"
"""KAI keeps the last series it reads per queue_name, without aggregating (usagedb/prometheus/prometheus.go
queryResourceUsage @v0.16.8); a queue-controller rollout or restart leaves two series for one queue for a while, and
the one kept may be the stale one. Both report the same allocation, so the largest is the queue's."""
USAGE_CAPACITY_METRIC = 'sum(max by (node) (kube_node_status_capacity{resource="nvidia_com_gpu"}))'
"""KAI's default sums kube-state-metrics' capacity series (gpuCapacityMetric); two kube-state-metrics replicas, or one
and its successor during a rollout, would count every GPU twice and halve every queue's usage."""
BROKEN_WINDOW_TYPES = ("tumbling", "cron")
"""KAI's usage DB sends these windows as `sum_over_time(<instant vector>)` in a range query and then requires a
vector back (createTumblingWindowQueryFunction, queryResourceUsage @v0.16.8, unchanged in v0.17.0): Prometheus refuses
the query, every usage fetch fails, and usage stays empty, which is the usage-blind division without saying so."""


def _prometheus_duration(value: str) -> str:
    if not value or not _PROMETHEUS_DURATION.match(value):
        raise PydanticCustomError(
            "prometheus_duration", "is not a Prometheus duration: use e.g. 12h, 3d or 1w (units y w d h m s ms)", {}
        )
    return value


PrometheusDuration = Annotated[str, AfterValidator(_prometheus_duration)]


def prometheus_seconds(value: str) -> float:
    return sum(float(n) * _UNIT_SECONDS[unit] for n, unit in re.findall(r"(\d+)(ms|y|w|d|h|m|s)", value))


def go_seconds(value: str) -> float:
    return sum(
        float(n) * _GO_UNIT_SECONDS[unit] for n, unit in re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)", value)
    )


class FairnessConfig(ConfigModel):
    """`gpu-tenancy:fairness`: whether, and how, past GPU use bends each queue's share of idle GPUs."""

    time_based: bool = Field(
        default=False, description="Let each queue's recent GPU use lower or raise its over-quota share (KAI's kValue)."
    )
    window_size: PrometheusDuration = Field(
        default="1w", description="How far back use counts, as a Prometheus duration (e.g. 3d, 1w)."
    )
    window_type: Literal["sliding", "tumbling", "cron"] = Field(
        default="sliding", description="sliding: the last windowSize, always. tumbling and cron are refused (see docs)."
    )
    half_life_period: GoDuration | None = Field(
        default=None, description="Use this old counts half as much, as a Go duration (e.g. 24h); none: no decay."
    )
    k_value: float = Field(
        default=1.0,
        ge=0,
        le=100,
        allow_inf_nan=False,
        description="How much past use counts against a queue's weight; 0 makes the division usage-blind.",
    )
    cron_string: str | None = Field(default=None, description="windowType cron's reset schedule (refused, as cron).")

    @property
    def window_seconds(self) -> float:
        return prometheus_seconds(self.window_size)

    @model_validator(mode="after")
    def _windows_make_sense(self) -> "FairnessConfig":
        issues = []
        if self.window_type in BROKEN_WINDOW_TYPES:
            issues.append(
                ConfigIssue(
                    ("windowType",),
                    self.window_type,
                    "fails every usage fetch in KAI v0.16.8 and v0.17.0 (its usage DB sends the window as a range "
                    "query of sum_over_time over an instant vector), so usage would silently stay empty: use sliding",
                )
            )
        if self.cron_string is not None:
            issues.append(ConfigIssue(("cronString",), self.cron_string, "is only for windowType cron: remove it"))
        if self.window_seconds < QUERY_RESOLUTION_SECONDS:
            issues.append(
                ConfigIssue(
                    ("windowSize",),
                    self.window_size,
                    "is shorter than KAI's one-minute usage sample, so no use is ever seen: use at least 1m "
                    "(a day or more for a fair share that means anything)",
                )
            )
        if self.half_life_period is not None and go_seconds(self.half_life_period) <= 0:
            issues.append(
                ConfigIssue(("halfLifePeriod",), self.half_life_period, "must be longer than 0: remove it for no decay")
            )
        if issues:
            raise ConfigIssues(issues)
        return self

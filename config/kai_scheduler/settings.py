"""`gpu-tenancy:kaiScheduler`: overrides for the KAI Scheduler release, and the values the platform keeps."""

from typing import Any

from pydantic import Field, model_validator

from config.issues import ConfigIssues
from config.owned_values import OwnedValues, owned_value_issues
from config.types import ConfigModel, KubernetesName
from config.upstream import KAI_CHART

KAI_OWNED_VALUES: OwnedValues = {
    ("global", "gpuSharing"): "fractional GPUs (the gpu-fraction annotation) need KAI's GPU sharing",
    ("podgrouper", "queueLabelKey"): "tenants' pods are pinned to their queue with the label kai.scheduler/queue",
    ("global", "namespaceLabelSelector"): (
        "KAI's admission and pod-grouper would ignore tenant namespaces outside the selector"
    ),
    ("global", "podLabelSelector"): "KAI's admission and pod-grouper would ignore tenant pods outside the selector",
    ("kaiConfigDeployer", "enabled"): "the readiness gate waits for the kai-config object this hook applies",
    ("global", "blockNvidiaVisibleDevices"): (
        "it gives every container of a fraction pod that asks for no GPU NVIDIA_VISIBLE_DEVICES=void, "
        "which tenant admission requires"
    ),
    ("admission", "gpuFractionRuntimeClassName"): "tenant admission allows fraction pods exactly the nvidia class",
    ("global", "resourceReservation", "appLabel"): (
        "tenant admission refuses the label that marks KAI's reservation pods, by its default value"
    ),
    ("defaultShard",): "the platform owns the default SchedulingShard; set its usage settings in gpu-tenancy:fairness",
    ("scheduler", "plugins", "proportion", "arguments"): (
        "the shard's kValue is passed here, and a map here would replace it whole (pkg/apis/kai/v1/"
        "schedulingshard_types.go setDefaultPlugins): set gpu-tenancy:fairness.kValue instead"
    ),
}
"""KAI chart values the platform relies on (deployments/kai-scheduler/values.yaml @v0.16.8)."""


class KaiSchedulerConfig(ConfigModel):
    """`gpu-tenancy:kaiScheduler`: optional overrides for the KAI Scheduler release."""

    chart: str = Field(default=KAI_CHART, min_length=1, description="Chart reference (OCI or repo/name).")
    namespace: KubernetesName = "kai-scheduler"
    values: dict[str, Any] = Field(
        default_factory=dict,
        description="Helm values deep-merged over the defaults ({global: {gpuSharing: true}}).",
    )
    ready_timeout_seconds: int = Field(
        default=900, ge=60, le=3600, description="How long to wait for KAI to admit Queues."
    )

    @model_validator(mode="after")
    def _platform_values_kept(self) -> "KaiSchedulerConfig":
        issues = owned_value_issues(self.values, KAI_OWNED_VALUES)
        if issues:
            raise ConfigIssues(issues)
        return self

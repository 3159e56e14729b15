"""Versions and KAI Scheduler settings: what gets installed on the host cluster, pinned."""

import re
from typing import Annotated, Any

from pydantic import AfterValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from config.host import Microk8sChannel
from config.issues import ConfigIssues
from config.owned_values import OwnedValues, owned_value_issues
from config.types import ConfigModel, KubernetesName, PinnedVersion
from config.upstream import KAI_CHART, MIN_KUBECTL_MINOR


def _recent_kubectl(value: str) -> str:
    minor = re.match(r"^v?1\.(\d+)\.", value)
    if not minor or int(minor.group(1)) < MIN_KUBECTL_MINOR:
        raise PydanticCustomError(
            "kubectl_version",
            "is too old for the readiness gates: they use `kubectl wait --for=create`, "
            "which needs kubectl v1.{minor}.0 or newer (e.g. v1.36.0)",
            {"minor": MIN_KUBECTL_MINOR},
        )
    return value


KubectlVersion = Annotated[PinnedVersion, AfterValidator(_recent_kubectl)]

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
}
"""KAI chart values the platform relies on (deployments/kai-scheduler/values.yaml @v0.16.4)."""


class VersionsConfig(ConfigModel):
    """`gpu-tenancy:versions`: every upstream release the stack installs, pinned exactly."""

    kai_scheduler: PinnedVersion = Field(description="KAI Scheduler Helm chart version, e.g. v0.16.4.")
    kubectl: KubectlVersion = Field(
        default="v1.36.0",
        description="Tag of registry.k8s.io/kubectl, the image of in-cluster readiness gates.",
    )
    microk8s: Microk8sChannel | None = Field(
        default=None, description="MicroK8s snap channel, e.g. 1.36/stable; required in brev and ssh modes."
    )
    vcluster: PinnedVersion | None = Field(
        default=None, description="vCluster chart version, e.g. 0.35.1; required when there are tenants."
    )
    gpu_operator: PinnedVersion | None = Field(
        default=None, description="GPU Operator chart version, e.g. v26.3.3; required unless gpuOperator.mode is skip."
    )
    kube_prometheus_stack: PinnedVersion | None = Field(
        default=None, description="kube-prometheus-stack chart version, e.g. 88.5.3; required by observability install."
    )


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

"""Versions and KAI Scheduler settings: what gets installed on the host cluster, pinned."""

from typing import Any

from pydantic import Field

from config.host import Microk8sChannel
from config.types import ConfigModel, KubernetesName, PinnedVersion

KAI_CHART = "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler"


class VersionsConfig(ConfigModel):
    """`gpu-tenancy:versions`: every upstream release the stack installs, pinned exactly."""

    kai_scheduler: PinnedVersion = Field(description="KAI Scheduler Helm chart version, e.g. v0.16.4.")
    kubectl: PinnedVersion = Field(
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

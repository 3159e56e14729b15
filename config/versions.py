"""`gpu-tenancy:versions`: every upstream release the stack installs, pinned exactly, for every component."""

import re
from typing import Annotated

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from config.gpu_host.host import Microk8sChannel
from config.types import ChartVersionWithoutV, ChartVersionWithV, ConfigModel, PinnedVersion
from config.upstream import KAI_RETRACTED_VERSIONS, MIN_KUBECTL_MINOR


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


def _not_retracted(value: str) -> str:
    if value in KAI_RETRACTED_VERSIONS:
        raise PydanticCustomError(
            "kai_version",
            "was tagged by mistake on KAI v0.10 code and is retracted upstream: pin the newest patch of a real "
            "line instead, e.g. v0.16.8",
        )
    return value


KaiVersion = Annotated[ChartVersionWithV, AfterValidator(_not_retracted)]


class VersionsConfig(ConfigModel):
    """`gpu-tenancy:versions`: every upstream release the stack installs, pinned exactly."""

    kai_scheduler: KaiVersion = Field(description="KAI Scheduler Helm chart version, e.g. v0.16.8.")
    kubectl: KubectlVersion = Field(
        default="v1.36.0",
        description="Tag of registry.k8s.io/kubectl, the image of in-cluster readiness gates.",
    )
    microk8s: Microk8sChannel | None = Field(
        default=None,
        # to_camel would make it `microk8S`, which would then be accepted and suggested for a typo.
        alias="microk8s",
        description="MicroK8s snap channel, e.g. 1.36/stable; required in brev and ssh modes.",
    )
    vcluster: ChartVersionWithoutV | None = Field(
        default=None, description="vCluster chart version, e.g. 0.35.1; required when there are tenants."
    )
    gpu_operator: ChartVersionWithV | None = Field(
        default=None, description="GPU Operator chart version, e.g. v26.3.3; required unless gpuOperator.mode is skip."
    )
    kube_prometheus_stack: ChartVersionWithoutV | None = Field(
        default=None, description="kube-prometheus-stack chart version, e.g. 88.5.3; required by observability install."
    )
    grafana: PinnedVersion = Field(
        default="13.2.0",
        description="Tag of docker.io/grafana/grafana for the team views (the appVersion of the grafana chart that "
        "kube-prometheus-stack 88.5.3 brings).",
    )
    prom_label_proxy: PinnedVersion = Field(
        default="v0.14.0",
        description="Tag of quay.io/prometheuscommunity/prom-label-proxy, which holds each team to its own series.",
    )

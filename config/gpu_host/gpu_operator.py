"""`gpu-tenancy:gpuOperator` and `gpu-tenancy:gpuGate`: NVIDIA's GPU stack on the host, and the proof it works."""

from typing import Any, Literal

from pydantic import Field, model_validator

from config.issues import ConfigIssue
from config.types import ConfigModel, HelmReleaseName, KubernetesName
from config.upstream import SET_AS_DEFAULT_ENVS


class GpuOperatorConfig(ConfigModel):
    """`gpu-tenancy:gpuOperator`: install NVIDIA's GPU Operator, adopt an existing install, or leave it alone."""

    mode: Literal["install", "adopt", "skip"] = Field(
        default="install",
        description="install: this stack owns the release. adopt: track an existing release without ever "
        "changing or uninstalling it. skip: leave the cluster's GPU stack alone.",
    )
    release_name: HelmReleaseName = "gpu-operator"
    namespace: KubernetesName = "gpu-operator-resources"
    values: dict[str, Any] = Field(
        default_factory=dict,
        description="Helm values deep-merged over the defaults; toolkit.env entries are merged by name.",
    )

    @model_validator(mode="after")
    def _nvidia_never_the_default_runtime(self) -> "GpuOperatorConfig":
        toolkit = self.values.get("toolkit")
        env = toolkit.get("env") if isinstance(toolkit, dict) else None
        for index, entry in enumerate(env if isinstance(env, list) else []):
            name = entry.get("name") if isinstance(entry, dict) else None
            if name in SET_AS_DEFAULT_ENVS:
                raise ConfigIssue(
                    ("values", "toolkit", "env", index, "name"),
                    name,
                    "would let the toolkit make nvidia containerd's default runtime, and then any pod with a "
                    "CUDA image (ENV NVIDIA_VISIBLE_DEVICES=all) gets every GPU outside KAI: remove it",
                )
        return self


class GpuGateConfig(ConfigModel):
    """`gpu-tenancy:gpuGate`: the Job that proves every GPU node advertises its GPUs before KAI is installed."""

    timeout_seconds: int = Field(default=900, ge=60, le=3600)

    @model_validator(mode="before")
    @classmethod
    def _no_probe_image(cls, data: Any) -> Any:
        if isinstance(data, dict) and "image" in data:
            raise ConfigIssue(
                ("image",),
                data["image"],
                "is no longer used: the gate checks each GPU node's allocatable GPUs and the operator's "
                "device plugin, toolkit and validator instead of running a GPU pod; remove the key",
            )
        return data

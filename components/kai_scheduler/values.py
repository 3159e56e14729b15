"""Helm values for the KAI Scheduler release."""

from typing import Any

from components.shared.merge import deep_merge
from config.kai_scheduler.settings import KaiSchedulerConfig


def kai_release_values(settings: KaiSchedulerConfig, *, cdi_enabled: bool | None) -> dict[str, Any]:
    """The project's defaults with the stack's own `values` deep-merged last.

    `cdi_enabled` is None when this stack does not install the GPU Operator: KAI's
    operator then reads the operator's ClusterPolicy itself
    (kai-scheduler/KAI-Scheduler pkg/operator/operands/binder/resources.go isCdiEnabled @v0.16.8).
    """
    defaults: dict[str, Any] = {
        "global": {
            # Fractional GPUs (`gpu-fraction` annotation) need KAI's GPU sharing; it is off in the chart
            # (deployments/kai-scheduler/values.yaml global.gpuSharing: false @v0.16.8).
            "gpuSharing": True,
            # KAI's deviceaccess: NVIDIA_VISIBLE_DEVICES=void on every container of a KAI pod that asks for no
            # GPU, which the tenant admission policy then requires under an nvidia runtime (config/upstream.py).
            "blockNvidiaVisibleDevices": True,
        },
        # The platform applies the default SchedulingShard itself (components/kai_scheduler/shard.py).
        "defaultShard": {"enabled": False},
    }
    if cdi_enabled is not None:
        # With CDI the binder must name a fraction's GPU as k8s.device-plugin.nvidia.com/gpu=<UUID>, which
        # the nvidia runtime resolves; a bare UUID fails: pkg/binder/plugins/gpusharing/gpu_sharing.go @v0.16.8.
        defaults["binder"] = {"cdiEnabled": cdi_enabled}
    return deep_merge(defaults, settings.values)

"""Helm values for the KAI Scheduler release."""

from typing import Any

from components.merge import deep_merge
from config.platform import KaiSchedulerConfig

DEFAULT_VALUES: dict[str, Any] = {
    # Fractional GPUs (`gpu-fraction` annotation) need KAI's GPU sharing; it is off in the chart.
    "global": {"gpuSharing": True},
}


def kai_release_values(settings: KaiSchedulerConfig) -> dict[str, Any]:
    """The project's defaults with the stack's own `values` deep-merged last."""
    return deep_merge(DEFAULT_VALUES, settings.values)

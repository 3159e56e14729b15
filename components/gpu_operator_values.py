"""Helm values for NVIDIA's GPU Operator, as this platform needs them."""

from typing import Any

from components.merge import deep_merge
from config.host import GpuOperatorConfig

GPU_OPERATOR_REPO = "https://helm.ngc.nvidia.com/nvidia"
GPU_OPERATOR_CHART = "gpu-operator"

MICROK8S_ARGS = "/var/snap/microk8s/current/args"
MICROK8S_CONTAINERD_SOCKET = "/var/snap/microk8s/common/run/containerd.sock"

# Why the template, not args/containerd.toml (the tutorial's path): MicroK8s renders
# containerd.toml from containerd-template.toml every time its containerd starts,
# so an edit to containerd.toml is lost at the first restart (canonical/microk8s#4171),
# and the toolkit restarts containerd to apply its change. The MicroK8s nvidia
# add-on points the toolkit at the template for that reason.
#
# Why RUNTIME_CONFIG_SOURCE: since toolkit 1.17 the operator reads the current
# config by running `containerd config dump`, which cannot reach MicroK8s'
# snap-confined containerd; `file=<rendered containerd.toml>` makes it read the
# effective config instead, while it still writes to the template. This is the
# setting NVIDIA tested on MicroK8s (NVIDIA/nvidia-container-toolkit#1251), and the
# operator mounts that host path into the toolkit pod since v25.10 (NVIDIA/gpu-operator#1758).
MICROK8S_TOOLKIT_ENV = [
    {"name": "CONTAINERD_CONFIG", "value": f"{MICROK8S_ARGS}/containerd-template.toml"},
    {"name": "RUNTIME_CONFIG_SOURCE", "value": f"file={MICROK8S_ARGS}/containerd.toml"},
    {"name": "CONTAINERD_SOCKET", "value": MICROK8S_CONTAINERD_SOCKET},
    # nvidia becomes containerd's default runtime, so tenant pods need no runtimeClassName.
    {"name": "CONTAINERD_SET_AS_DEFAULT", "value": "1"},
]


def gpu_operator_values(settings: GpuOperatorConfig, *, microk8s: bool) -> dict[str, Any]:
    """Defaults for a host whose image ships the driver, with the user's values merged last.

    On clusters this stack did not build, the toolkit keeps the operator's own
    containerd paths: only MicroK8s moves them.
    """
    defaults: dict[str, Any] = {
        "driver": {"enabled": False},
        "operator": {"defaultRuntime": "containerd"},
        "cdi": {"enabled": True},
    }
    if microk8s:
        defaults["toolkit"] = {"env": MICROK8S_TOOLKIT_ENV}
    return deep_merge(defaults, settings.values)

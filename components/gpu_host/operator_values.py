"""Helm values for NVIDIA's GPU Operator, as this platform needs them."""

from collections.abc import Sequence
from typing import Any

from components.shared.helm import ReleaseSpec
from components.shared.merge import deep_merge
from config.gpu_host.gpu_operator import GpuOperatorConfig
from config.upstream import GPU_OPERATOR_CHART, GPU_OPERATOR_REPO, NVIDIA_DEFAULT_RUNTIME_ENV

MICROK8S_ARGS = "/var/snap/microk8s/current/args"
MICROK8S_CONTAINERD_SOCKET = "/var/snap/microk8s/common/run/containerd.sock"

NEVER_THE_DEFAULT_RUNTIME = [{"name": NVIDIA_DEFAULT_RUNTIME_ENV, "value": "false"}]
"""nvidia as containerd's default runtime would hand every GPU to any pod whose image sets
NVIDIA_VISIBLE_DEVICES=all (every CUDA image does), outside KAI. The operator sets this
itself only under cdi.enabled, and the toolkit defaults to true (see config/upstream.py),
so it is stated for every mode and the config refuses to change it."""

# Why the template, not args/containerd.toml (the tutorial's path): MicroK8s renders
# containerd.toml from containerd-template.toml every time its containerd starts,
# so an edit to containerd.toml is lost at the first restart (canonical/microk8s#4171),
# and the toolkit restarts containerd to apply its change.
# Why RUNTIME_CONFIG_SOURCE: the toolkit otherwise reads the current config with
# `containerd config dump`, which cannot reach MicroK8s' snap-confined containerd;
# `file=<rendered containerd.toml>` makes it read the effective config instead, through
# the toolkit pod's read-only /host mount (NVIDIA/gpu-operator controllers/object_controls.go
# transformForRuntime @v26.3.3). MicroK8s' own nvidia add-on passes the same three:
# canonical/microk8s-core-addons addons/nvidia/enable @f689811 (main, 2026-05-20).
MICROK8S_TOOLKIT_ENV = [
    {"name": "CONTAINERD_CONFIG", "value": f"{MICROK8S_ARGS}/containerd-template.toml"},
    {"name": "RUNTIME_CONFIG_SOURCE", "value": f"file={MICROK8S_ARGS}/containerd.toml"},
    {"name": "CONTAINERD_SOCKET", "value": MICROK8S_CONTAINERD_SOCKET},
]


def _merge_env(defaults: Sequence[dict[str, Any]], overrides: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Environment lists merged by name: a user entry replaces ours of that name, others are added."""
    names = {entry.get("name") for entry in overrides}
    return [entry for entry in defaults if entry["name"] not in names] + list(overrides)


def gpu_operator_values(settings: GpuOperatorConfig, *, microk8s: bool) -> dict[str, Any]:
    """Defaults for a host whose image ships the driver, with the user's values merged last.

    On clusters this stack did not build, the toolkit keeps the operator's own
    containerd paths: only MicroK8s moves them.
    """
    env = NEVER_THE_DEFAULT_RUNTIME + (MICROK8S_TOOLKIT_ENV if microk8s else [])
    defaults: dict[str, Any] = {
        "driver": {"enabled": False},
        "cdi": {"enabled": True},
        "toolkit": {"env": env},
    }
    merged = deep_merge(defaults, settings.values)
    user_toolkit = settings.values.get("toolkit")
    user_env = user_toolkit.get("env") if isinstance(user_toolkit, dict) else None
    if isinstance(user_env, list):
        merged["toolkit"]["env"] = _merge_env(env, user_env)
    return merged


def operator_release_spec(settings: GpuOperatorConfig, *, version: str | None, microk8s: bool) -> ReleaseSpec:
    return ReleaseSpec(
        name=settings.release_name,
        chart=GPU_OPERATOR_CHART,
        repo=GPU_OPERATOR_REPO,
        version=version or "",
        values=gpu_operator_values(settings, microk8s=microk8s),
    )


def installed_operator_runs_cdi(settings: GpuOperatorConfig, *, microk8s: bool) -> bool | None:
    """Whether the operator this stack installs runs CDI; None when this stack does not install one."""
    if settings.mode != "install":
        return None
    return gpu_operator_values(settings, microk8s=microk8s)["cdi"].get("enabled") is True

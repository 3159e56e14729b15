"""The values each chart is installed with: the keys exist upstream, and what the platform relies on holds."""

from typing import Any

import pytest
import yaml

from harness import ProgramRun, dev_settings, run_main
from tests.charts import chart_text
from tests.conftest import FAKE_KUBECONFIG, GPU_OPERATOR_CHART

RELEASE = "kubernetes:helm.sh/v3:Release"

TOOLKIT_READS = {
    # nvidia-ctk-installer's flags: NVIDIA/nvidia-container-toolkit cmd/nvidia-ctk-installer/container/runtime/
    # runtime.go and container/container.go @v1.19.1 (the toolkit GPU Operator v26.3.3 ships).
    "RUNTIME_CONFIG",
    "CONTAINERD_CONFIG",
    "RUNTIME_SOCKET",
    "CONTAINERD_SOCKET",
    "RUNTIME_CONFIG_SOURCE",
    "RUNTIME_CONFIG_SOURCES",
    "NVIDIA_RUNTIME_SET_AS_DEFAULT",
}


def _operator_values(run: ProgramRun) -> dict[str, Any]:
    values: dict[str, Any] = run.one(RELEASE, "host-gpu-operator").inputs["values"]
    return values


def _kai_values(run: ProgramRun) -> dict[str, Any]:
    values: dict[str, Any] = run.one(RELEASE, "kai-release").inputs["values"]
    return values


def _run(host: dict[str, Any] | None = None, secrets: dict[str, str] | None = None, **changes: Any) -> ProgramRun:
    config = dev_settings()
    if host:
        config["host"] = host
    config.update(changes)
    return run_main(config, secrets or {})


EXISTING = {"mode": "kubeconfig", "address": "203.0.113.10"}, {"kubeconfig": FAKE_KUBECONFIG}


def _env(values: dict[str, Any]) -> dict[str, str]:
    return {entry["name"]: entry["value"] for entry in values["toolkit"]["env"]}


@pytest.mark.parametrize("existing", [False, True], ids=["microk8s", "existing-cluster"])
def test_nvidia_is_never_containerds_default_runtime(existing: bool) -> None:
    """As the default runtime, nvidia would hand every GPU to any pod with a CUDA image, outside KAI."""
    run = _run(*EXISTING) if existing else _run()
    env = _env(_operator_values(run))
    assert env["NVIDIA_RUNTIME_SET_AS_DEFAULT"] == "false"
    assert not {"CONTAINERD_SET_AS_DEFAULT", "DOCKER_SET_AS_DEFAULT"} & env.keys()
    assert ("CONTAINERD_CONFIG" in env) != existing, "only MicroK8s moves the toolkit's containerd paths"


def test_the_toolkit_is_pointed_at_microk8s_containerd() -> None:
    env = _env(_operator_values(_run()))
    assert env == {
        "NVIDIA_RUNTIME_SET_AS_DEFAULT": "false",
        "CONTAINERD_CONFIG": "/var/snap/microk8s/current/args/containerd-template.toml",
        "RUNTIME_CONFIG_SOURCE": "file=/var/snap/microk8s/current/args/containerd.toml",
        "CONTAINERD_SOCKET": "/var/snap/microk8s/common/run/containerd.sock",
    }
    assert set(env) <= TOOLKIT_READS


def test_a_users_toolkit_env_is_merged_by_name() -> None:
    user = [{"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"}, {"name": "X", "value": "1"}]
    env = _env(_operator_values(_run(gpuOperator={"values": {"toolkit": {"env": user}}})))
    assert env["CONTAINERD_SOCKET"] == "/run/k3s/containerd/containerd.sock"
    assert env["X"] == "1"
    assert env["NVIDIA_RUNTIME_SET_AS_DEFAULT"] == "false"
    assert env["CONTAINERD_CONFIG"].endswith("containerd-template.toml")


def _paths(values: Any, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    if not isinstance(values, dict):
        return set()
    return {p for key, value in values.items() for p in {(*prefix, key), *_paths(value, (*prefix, key))}}


def test_gpu_operator_values_only_use_keys_the_chart_defines() -> None:
    chart = yaml.safe_load(chart_text(GPU_OPERATOR_CHART, "gpu-operator/values.yaml"))
    unknown = _paths(_operator_values(_run())) - _paths(chart)
    assert not unknown, f"keys the GPU Operator chart does not define: {sorted(unknown)}"


@pytest.mark.parametrize(
    ("operator", "binder"),
    [
        pytest.param({}, {"cdiEnabled": True}, id="installed-with-cdi"),
        pytest.param({"values": {"cdi": {"enabled": False}}}, {"cdiEnabled": False}, id="installed-without-cdi"),
        pytest.param({"mode": "adopt"}, None, id="adopted-kai-detects"),
    ],
)
def test_kais_binder_names_gpus_the_way_the_installed_operator_runs(
    operator: dict[str, Any], binder: dict[str, Any] | None
) -> None:
    assert _kai_values(_run(gpuOperator=operator)).get("binder") == binder


def test_without_an_operator_of_ours_a_user_may_state_cdi_for_kai() -> None:
    versions = {k: v for k, v in dev_settings()["versions"].items() if k != "gpuOperator"}
    run = _run(
        gpuOperator={"mode": "skip"}, versions=versions, kaiScheduler={"values": {"binder": {"cdiEnabled": True}}}
    )
    assert _kai_values(run)["binder"] == {"cdiEnabled": True}

"""GpuHost under mocks: the resource graph of each host mode, its order, its secrets and its triggers."""

import itertools
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from components.gpu_host import GpuHost, GpuHostArgs
from config.sources import load_settings
from tests.conftest import FAKE_KUBECONFIG, dev_settings
from tests.harness import FAKE_HOST_KEY, FAKE_HOST_KUBECONFIG, ProgramRun, Registration, run_main, run_pulumi

REMOTE = "command:remote:Command"
LOCAL = "command:local:Command"
RELEASE = "kubernetes:helm.sh/v3:Release"
NAMESPACE = "kubernetes:core/v1:Namespace"
JOB = "kubernetes:batch/v1:Job"
PROVIDER = "pulumi:providers:kubernetes"

SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nssh-mode\n-----END OPENSSH PRIVATE KEY-----\n"
SSH = ({"mode": "ssh", "address": "203.0.113.20"}, {"sshPrivateKey": SSH_KEY})
KUBECONFIG = ({"mode": "kubeconfig"}, {"kubeconfig": FAKE_KUBECONFIG})
BOOTSTRAP_STEPS = ["preflight", "microk8s", "addons", "kubeconfig", "gpu-operator-check"]


def _run(host: dict[str, Any] | None = None, secrets: dict[str, str] | None = None, **changes: Any) -> ProgramRun:
    config = dev_settings()
    if host is not None:
        config["host"] = host
    for key, value in changes.items():
        section, _, field = key.partition("__")
        if field:
            config.setdefault(section, {})[field] = value
        else:
            config[section] = value
    return run_main(config, secrets or {})


@pytest.fixture(scope="module")
def dev_run() -> ProgramRun:
    return _run()


@pytest.fixture(scope="module")
def ssh_run() -> ProgramRun:
    return _run(*SSH)


@pytest.fixture(scope="module")
def kubeconfig_run() -> ProgramRun:
    return _run(*KUBECONFIG)


def _steps(run: ProgramRun) -> dict[str, Registration]:
    return {r.name.removeprefix("host-"): r for r in run.of_type(REMOTE)}


def test_dev_stack_is_one_chain_from_brev_to_kai(dev_run: ProgramRun) -> None:
    chain = [
        dev_run.one(LOCAL, "host-brev-instance"),
        dev_run.one(LOCAL, "host-brev-ssh"),
        *(dev_run.one(REMOTE, f"host-{step}") for step in BOOTSTRAP_STEPS),
        dev_run.one(NAMESPACE, "host-gpu-operator"),
        dev_run.one(RELEASE, "host-gpu-operator"),
        dev_run.one(JOB, "host-gpu-gate"),
        dev_run.one(NAMESPACE, "kai-namespace"),
        dev_run.one(RELEASE, "kai-release"),
    ]
    for earlier, later in itertools.pairwise(chain):
        assert later.depends_on(earlier), f"{later.name} does not wait for {earlier.name}"
    assert dev_run.one(PROVIDER, "host-cluster").depends_on(dev_run.one(REMOTE, "host-kubeconfig"))


@pytest.mark.parametrize(
    ("mode", "local", "remote"),
    [
        ("brev", {"brev-instance", "brev-ssh"}, set(BOOTSTRAP_STEPS)),
        ("ssh", set(), set(BOOTSTRAP_STEPS)),
        ("kubeconfig", set(), set()),
    ],
)
def test_each_mode_runs_only_its_own_commands(
    mode: str, local: set[str], remote: set[str], request: pytest.FixtureRequest
) -> None:
    run: ProgramRun = request.getfixturevalue({"brev": "dev_run", "ssh": "ssh_run"}.get(mode, "kubeconfig_run"))
    assert {r.name.removeprefix("host-") for r in run.of_type(LOCAL)} == local
    assert set(_steps(run)) == remote
    # Whatever the mode, KAI is installed through the host's provider, after the GPU gate.
    kai = run.one(NAMESPACE, "kai-namespace")
    assert kai.depends_on(run.one(JOB, "host-gpu-gate"))
    assert kai.provider.startswith(run.one(PROVIDER, "host-cluster").urn)


@pytest.mark.parametrize(
    ("fixture", "key", "address", "user"),
    [("dev_run", FAKE_HOST_KEY, "198.51.100.7", "ubuntu"), ("ssh_run", SSH_KEY, "203.0.113.20", "ubuntu")],
)
def test_the_private_key_travels_only_inside_a_secret_connection(
    fixture: str, key: str, address: str, user: str, request: pytest.FixtureRequest
) -> None:
    run: ProgramRun = request.getfixturevalue(fixture)
    for name, step in _steps(run).items():
        assert "connection" in step.secret_inputs, name
        connection = step.inputs["connection"]
        assert (connection["host"], connection["user"], connection["port"]) == (address, user, 22), name
        assert connection["privateKey"] == key, name
        assert key not in step.inputs["create"], name


def test_command_outputs_that_carry_credentials_are_secret(dev_run: ProgramRun) -> None:
    assert "stdout" in dev_run.one(LOCAL, "host-brev-ssh").additional_secret_outputs
    assert "stdout" in dev_run.one(REMOTE, "host-kubeconfig").additional_secret_outputs


@pytest.mark.parametrize(
    ("fixture", "kubeconfig", "address", "identifier"),
    [
        ("dev_run", FAKE_HOST_KUBECONFIG, "198.51.100.7", "brev/gpu-tenancy-dev"),
        ("ssh_run", FAKE_HOST_KUBECONFIG, "203.0.113.20", "ssh/203.0.113.20"),
        ("kubeconfig_run", FAKE_KUBECONFIG, "203.0.113.10", "kubeconfig/existing-cluster"),
    ],
)
def test_every_mode_hands_over_a_secret_kubeconfig_and_a_stable_cluster_identity(
    fixture: str, kubeconfig: str, address: str, identifier: str, request: pytest.FixtureRequest
) -> None:
    run: ProgramRun = request.getfixturevalue(fixture)
    provider = run.one(PROVIDER, "host-cluster")
    assert provider.inputs["kubeconfig"] == kubeconfig
    assert "kubeconfig" in provider.secret_inputs
    # The identity does not come from the kubeconfig, so a regenerated kubeconfig replaces nothing.
    assert provider.inputs["clusterIdentifier"] == identifier
    assert run.exports["hostKubeconfig"].value == kubeconfig
    assert run.exports["hostKubeconfig"].secret
    assert run.exports["hostAddress"].value == address
    assert not run.exports["hostAddress"].secret


def test_an_existing_cluster_can_name_the_address_teams_use() -> None:
    run = _run({"mode": "kubeconfig", "address": "gpu.example.com"}, KUBECONFIG[1])
    assert run.exports["hostAddress"].value == "gpu.example.com"


def _script(step: Registration) -> str:
    shell, flag, script = shlex.split(step.inputs["create"])
    assert (shell, flag) == ("bash", "-c")
    return script


def test_rendered_scripts_carry_the_configured_versions_and_pass_bash_n(dev_run: ProgramRun) -> None:
    steps = _steps(dev_run)
    assert "MICROK8S_CHANNEL=1.36/stable\n" in _script(steps["microk8s"])
    assert "EXPECT_GPU=L40S\n" in _script(steps["preflight"])
    assert "MIN_GPU_MEMORY_MIB=45000\n" in _script(steps["preflight"])
    assert "ADDRESS=198.51.100.7\n" in _script(steps["kubeconfig"])
    assert "ADDONS='dns hostpath-storage'\n" in _script(steps["addons"])
    shellcheck = Path(sys.executable).parent / "shellcheck"
    for name, step in steps.items():
        script = _script(step)
        assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0, name
        if shellcheck.exists():
            result = subprocess.run([str(shellcheck), "-"], input=script, text=True, capture_output=True, check=False)
            assert result.returncode == 0, f"{name}: {result.stdout}"


def _triggers(run: ProgramRun) -> dict[str, Any]:
    return {name: step.inputs.get("triggers") for name, step in _steps(run).items()}


@pytest.mark.parametrize(
    ("change", "rerun"),
    [
        pytest.param(
            {"versions__microk8s": "1.37/stable"}, {"preflight", "addons", "kubeconfig", "gpu-operator-check"}
        ),
        pytest.param({"versions__gpuOperator": "v26.3.4"}, {"gpu-operator-check"}),
        pytest.param({"versions__kaiScheduler": "v0.16.5"}, set()),
        pytest.param({"tenants": []}, set()),
    ],
    ids=["microk8s", "gpu-operator", "kai", "tenants"],
)
def test_triggers_change_only_when_a_relevant_version_changes(
    dev_run: ProgramRun, change: dict[str, Any], rerun: set[str]
) -> None:
    before, after = _triggers(dev_run), _triggers(_run(**change))
    assert {name for name in before if before[name] != after[name]} == rerun


def test_the_microk8s_step_upgrades_in_place_and_tears_down_only_on_destroy(dev_run: ProgramRun) -> None:
    """A trigger would replace the step, running its teardown (snap remove) on a version bump."""
    microk8s = _steps(dev_run)["microk8s"]
    assert not microk8s.inputs.get("triggers")
    assert "microk8s-installed" in microk8s.inputs["delete"]
    upgraded = _steps(_run(versions__microk8s="1.37/stable"))["microk8s"]
    assert "MICROK8S_CHANNEL=1.37/stable\n" in _script(upgraded)


def test_brev_keeps_the_instance_on_destroy_unless_asked(dev_run: ProgramRun) -> None:
    instance = dev_run.one(LOCAL, "host-brev-instance")
    assert "DELETE_ON_DESTROY=false\n" in instance.inputs["delete"]
    host = {**dev_settings()["host"], "deleteOnDestroy": True}
    assert "DELETE_ON_DESTROY=true\n" in _run(host).one(LOCAL, "host-brev-instance").inputs["delete"]


MICROK8S_TOOLKIT = [
    {"name": "CONTAINERD_CONFIG", "value": "/var/snap/microk8s/current/args/containerd-template.toml"},
    {"name": "RUNTIME_CONFIG_SOURCE", "value": "file=/var/snap/microk8s/current/args/containerd.toml"},
    {"name": "CONTAINERD_SOCKET", "value": "/var/snap/microk8s/common/run/containerd.sock"},
    {"name": "CONTAINERD_SET_AS_DEFAULT", "value": "1"},
]


def test_the_gpu_operator_is_installed_for_microk8s_as_the_tutorial_does(dev_run: ProgramRun) -> None:
    release = dev_run.one(RELEASE, "host-gpu-operator").inputs
    assert (release["chart"], release["repositoryOpts"], release["version"]) == (
        "gpu-operator",
        {"repo": "https://helm.ngc.nvidia.com/nvidia"},
        "v26.3.3",
    )
    assert (release["name"], release["namespace"]) == ("gpu-operator", "gpu-operator-resources")
    assert release["values"] == {
        "driver": {"enabled": False},
        "operator": {"defaultRuntime": "containerd"},
        "cdi": {"enabled": True},
        "toolkit": {"env": MICROK8S_TOOLKIT},
    }
    labels = dev_run.one(NAMESPACE, "host-gpu-operator").inputs["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert labels["app.kubernetes.io/part-of"] == "gpu-tenancy", "the operator check recognises this label"


def test_on_an_existing_cluster_the_operator_keeps_its_own_containerd_paths(kubeconfig_run: ProgramRun) -> None:
    values = kubeconfig_run.one(RELEASE, "host-gpu-operator").inputs["values"]
    assert "toolkit" not in values
    run = _run(*KUBECONFIG, gpuOperator={"values": {"toolkit": {"enabled": False}, "dcgmExporter": {"enabled": False}}})
    values = run.one(RELEASE, "host-gpu-operator").inputs["values"]
    assert values["toolkit"] == {"enabled": False}
    assert values["dcgmExporter"] == {"enabled": False}
    assert values["driver"] == {"enabled": False}


def test_adopting_an_operator_imports_it_unchanged_and_never_deletes_it() -> None:
    run = _run(gpuOperator={"mode": "adopt"})
    release = run.one(RELEASE, "host-gpu-operator")
    assert release.import_id == "gpu-operator-resources/gpu-operator"
    assert release.retain_on_delete
    assert {"values", "version", "chart"} <= set(release.ignore_changes)
    assert "host-gpu-operator" not in {r.name for r in run.of_type(NAMESPACE)}, "the namespace is not ours to create"
    assert "gpu-operator-check" not in _steps(run), "adopting expects an operator to be there"
    assert run.one(JOB, "host-gpu-gate").depends_on(release)


def test_skipping_the_operator_still_proves_the_gpu_before_kai() -> None:
    config_versions = {k: v for k, v in dev_settings()["versions"].items() if k != "gpuOperator"}
    run = _run(gpuOperator={"mode": "skip"}, versions=config_versions)
    assert not [r for r in run.of_type(RELEASE) if r.name == "host-gpu-operator"]
    assert "gpu-operator-check" not in _steps(run)
    assert run.one(NAMESPACE, "kai-namespace").depends_on(run.one(JOB, "host-gpu-gate"))


def test_the_gate_asks_for_a_whole_gpu_on_a_labelled_node(dev_run: ProgramRun) -> None:
    pod = dev_run.one(JOB, "host-gpu-gate").inputs["spec"]["template"]["spec"]
    (probe,) = pod["initContainers"]
    assert probe["resources"]["limits"] == {"nvidia.com/gpu": 1}
    assert probe["command"][0] == "nvidia-smi"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["securityContext"]["runAsNonRoot"] is True


def test_the_gpu_output_is_read_from_the_gates_inventory_after_the_gate(dev_run: ProgramRun) -> None:
    reads = [r for r in dev_run.registrations if r.read and r.name.startswith("host-")]
    assert [(r.name, r.import_id) for r in reads] == [("host-gpu-gate-inventory", "gpu-tenancy-system/gpu-inventory")]
    job_index = dev_run.registrations.index(dev_run.one(JOB, "host-gpu-gate"))
    assert dev_run.registrations.index(reads[0]) > job_index
    assert dev_run.exports["gpu"].value == {
        "gpu-node-1": {"name": "NVIDIA-L40S", "memoryMiB": 46068, "driverVersion": "580.95.05", "count": 1}
    }


def _gate_fingerprint(run: ProgramRun) -> str:
    annotations: dict[str, str] = run.one(JOB, "host-gpu-gate").inputs["spec"]["template"]["metadata"]["annotations"]
    return annotations["gpu-tenancy/gpu-stack"]


def test_the_gate_runs_again_when_the_gpu_stack_changes_and_only_then(dev_run: ProgramRun) -> None:
    base = _gate_fingerprint(dev_run)
    assert _gate_fingerprint(_run(versions__gpuOperator="v26.3.4")) != base
    assert _gate_fingerprint(_run(gpuGate={"image": "nvcr.io/nvidia/cuda:13.0.2-base-ubuntu24.04"})) != base
    assert _gate_fingerprint(_run(versions__kaiScheduler="v0.16.5")) == base


def test_preflight_facts_are_component_outputs() -> None:
    settings = load_settings(dev_settings())

    def build() -> dict[str, Any]:
        host = GpuHost(
            "host",
            GpuHostArgs(
                host=settings.host,
                versions=settings.versions,
                gpu_operator=settings.gpu_operator,
                gpu_gate=settings.gpu_gate,
            ),
        )
        return {"preflight": host.preflight}

    preflight = run_pulumi(build).exports["preflight"].value
    assert (preflight["gpuName"], preflight["gpuMemoryMiB"], preflight["driverVersion"]) == (
        "NVIDIA L40S",
        46068,
        "580.95.05",
    )

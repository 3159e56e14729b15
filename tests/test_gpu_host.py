"""GpuHost under mocks: the resource graph of each host mode, its order, its secrets and its triggers."""

import itertools
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from components.gpu_host.component import GpuHost, GpuHostArgs
from config.sources import load_settings
from harness import FAKE_HOST_KEY, FAKE_HOST_KUBECONFIG, ProgramRun, Registration, dev_settings, run_main, run_pulumi
from harness.mocks import script_input
from tests.conftest import FAKE_KUBECONFIG

REMOTE = "command:remote:Command"
LOCAL = "command:local:Command"
RELEASE = "kubernetes:helm.sh/v3:Release"
NAMESPACE = "kubernetes:core/v1:Namespace"
JOB = "kubernetes:batch/v1:Job"
PROVIDER = "pulumi:providers:kubernetes"

SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nssh-mode\n-----END OPENSSH PRIVATE KEY-----\n"
SSH = ({"mode": "ssh", "address": "203.0.113.20"}, {"sshPrivateKey": SSH_KEY})
KUBECONFIG = ({"mode": "kubeconfig", "address": "203.0.113.10"}, {"kubeconfig": FAKE_KUBECONFIG})
BOOTSTRAP_STEPS = ["preflight", "microk8s", "kubelet", "addons", "kubeconfig", "gpu-operator-check"]


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
        dev_run.one(LOCAL, "host-brev-running"),
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
        ("brev", {"brev-instance", "brev-running"}, {*BOOTSTRAP_STEPS, "drift-check"}),
        ("ssh", set(), {*BOOTSTRAP_STEPS, "drift-check"}),
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


def test_command_outputs_that_carry_credentials_are_secret_and_never_logged(dev_run: ProgramRun) -> None:
    """pulumi-command streams stdout into `pulumi up`'s output unless told not to; secretness covers state only."""
    command = dev_run.one(REMOTE, "host-kubeconfig")
    assert "stdout" in command.additional_secret_outputs
    assert command.inputs["logging"] == "stderr"
    ((_, resolve),) = [(t, a) for t, a in dev_run.invokes if t == "command:local:run"]
    assert resolve["logging"] == "stderr", "the Brev instance's private key is never streamed"
    assert dev_run.exports["hostKubeconfig"].secret


def test_the_brev_address_is_resolved_on_every_run_and_followed_everywhere() -> None:
    """A stopped and started instance may come back at another address: every step and endpoint follows it."""
    moved = run_main(dev_settings(), previous={"brevAddress": "198.51.100.99"})
    assert {r.inputs["connection"]["host"] for r in moved.of_type(REMOTE)} == {"198.51.100.99"}
    assert set(moved.exports["tenantEndpoints"].value.values()) <= {
        f"https://198.51.100.99:{p['https']}" for p in moved.exports["nodePorts"].value.values()
    }
    assert script_input(moved.one(REMOTE, "host-kubeconfig").inputs["create"], "ADDRESS") == "198.51.100.99"


def test_scripts_that_run_on_the_operators_machine_are_posix_sh(dev_run: ProgramRun) -> None:
    """macOS runs /bin/bash 3.2: the local scripts are POSIX sh, run by /bin/sh (tests run them under dash)."""
    for command in dev_run.of_type(LOCAL):
        assert command.inputs["interpreter"] == ["/bin/sh", "-c"], command.name
        assert command.inputs["create"].startswith("#!/bin/sh\n"), command.name
    for token, args in dev_run.invokes:
        if token == "command:local:run":
            assert args["interpreter"] == ["/bin/sh", "-c"]
            assert args["command"].startswith("#!/bin/sh\n")


@pytest.mark.parametrize(
    ("fixture", "kubeconfig", "address", "identifier"),
    [
        ("dev_run", FAKE_HOST_KUBECONFIG, "198.51.100.7", "brev/gpu-tenancy-dev"),
        ("ssh_run", FAKE_HOST_KUBECONFIG.replace("198.51.100.7", "203.0.113.20"), "203.0.113.20", "ssh/203.0.113.20"),
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


def test_an_existing_cluster_names_the_address_teams_use() -> None:
    run = _run({"mode": "kubeconfig", "address": "gpu.example.com"}, KUBECONFIG[1])
    assert run.exports["hostAddress"].value == "gpu.example.com"
    assert run.exports["tenantEndpoints"].value["team-nlp"].startswith("https://gpu.example.com:")


def test_without_tenants_an_existing_cluster_defaults_to_its_api_servers_host() -> None:
    run = _run({"mode": "kubeconfig"}, KUBECONFIG[1], tenants=[])
    assert run.exports["hostAddress"].value == "203.0.113.10"


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
            {"versions__microk8s": "1.37/stable"},
            {"preflight", "kubelet", "addons", "kubeconfig", "gpu-operator-check"},
        ),
        pytest.param({"versions__gpuOperator": "v26.3.4"}, {"gpu-operator-check"}),
        pytest.param({"versions__kaiScheduler": "v0.17.0"}, set()),
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


def test_an_update_of_the_brev_instance_carries_the_created_marker_on(dev_run: ProgramRun) -> None:
    """pulumi-command runs `update` (or else `create` again, with no memory) on an input change."""
    instance = dev_run.one(LOCAL, "host-brev-instance").inputs
    assert instance["update"] == instance["create"]
    assert "ACTION=ensure\n" in instance["update"]
    assert "ACTION=delete\n" in instance["delete"]
    assert instance["addPreviousOutputInEnv"] is True


@pytest.mark.parametrize(
    ("host_change", "replaced", "delete_on_destroy"),
    [
        ({"deleteOnDestroy": True}, False, "true"),
        ({"name": "gpu-tenancy-dev-2"}, True, "false"),
        ({"gpuName": "H100"}, True, "false"),
        ({"cloud": "aws"}, True, "false"),
        ({"instanceType": "gpu-l40s-a.1gpu"}, True, "false"),
    ],
    ids=["delete-on-destroy", "rename", "gpu", "cloud", "instance-type"],
)
def test_another_instance_replaces_the_brev_resource_and_a_setting_updates_it(
    dev_run: ProgramRun, host_change: dict[str, Any], replaced: bool, delete_on_destroy: str
) -> None:
    """A replacement runs the old resource's delete step, so a renamed instance is not silently orphaned."""
    before = dev_run.one(LOCAL, "host-brev-instance").inputs
    after = _run({**dev_settings()["host"], **host_change}).one(LOCAL, "host-brev-instance").inputs
    assert (before["triggers"] != after["triggers"]) == replaced
    assert f"DELETE_ON_DESTROY={delete_on_destroy}\n" in after["delete"]


def test_the_gpu_operator_is_installed_from_ngc_into_a_privileged_namespace_of_ours(dev_run: ProgramRun) -> None:
    release = dev_run.one(RELEASE, "host-gpu-operator")
    inputs = release.inputs
    assert (inputs["chart"], inputs["repositoryOpts"], inputs["version"]) == (
        "gpu-operator",
        {"repo": "https://helm.ngc.nvidia.com/nvidia"},
        "v26.3.3",
    )
    assert (inputs["name"], inputs["namespace"]) == ("gpu-operator", "gpu-operator-resources")
    namespace = dev_run.one(NAMESPACE, "host-gpu-operator")
    labels = namespace.inputs["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert labels["app.kubernetes.io/part-of"] == "gpu-tenancy", "the operator check recognises this label"
    assert release.depends_on(namespace), "the release is uninstalled before its namespace is deleted"


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


def test_the_gpu_output_reads_each_node_this_stack_built_after_the_gate(dev_run: ProgramRun) -> None:
    reads = [r for r in dev_run.registrations if r.read and r.type == "kubernetes:core/v1:Node"]
    assert [(r.name, r.import_id) for r in reads] == [("host-gpu-node", "gpu-node-1")]
    job_index = dev_run.registrations.index(dev_run.one(JOB, "host-gpu-gate"))
    assert dev_run.registrations.index(reads[0]) > job_index
    assert dev_run.exports["gpu"].value == {
        "gpu-node-1": {"name": "NVIDIA-L40S", "memoryMiB": 46068, "driverVersion": "580.95.05", "count": 1}
    }


def test_an_existing_clusters_nodes_are_not_listed(kubeconfig_run: ProgramRun) -> None:
    assert not [r for r in kubeconfig_run.registrations if r.read and r.type == "kubernetes:core/v1:Node"]
    assert kubeconfig_run.exports["gpu"].value is None


def _gate_fingerprint(run: ProgramRun) -> str:
    annotations: dict[str, str] = run.one(JOB, "host-gpu-gate").inputs["spec"]["template"]["metadata"]["annotations"]
    return annotations["gpu-tenancy/vouches-for"]


@pytest.mark.parametrize(
    ("change", "reruns"),
    [
        ({"versions__gpuOperator": "v26.3.4"}, True),
        ({"gpuOperator": {"values": {"dcgmExporter": {"enabled": False}}}}, True),
        ({"versions__microk8s": "1.37/stable"}, True),
        ({"versions__kaiScheduler": "v0.17.0"}, False),
        ({"tenants": []}, False),
    ],
    ids=["operator-version", "operator-values", "microk8s", "kai", "tenants"],
)
def test_the_gpu_gate_runs_again_when_the_gpu_stack_changes_and_only_then(
    dev_run: ProgramRun, change: dict[str, Any], reruns: bool
) -> None:
    assert (_gate_fingerprint(_run(**change)) != _gate_fingerprint(dev_run)) == reruns


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

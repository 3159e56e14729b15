"""Host scripts on a stand-in machine: what they run, what they leave alone, and how they fail."""

import base64
from pathlib import Path

import pytest

from components.host_facts import parse_brev_ssh, parse_preflight
from components.host_scripts import remote_command
from tests.fake_host import FakeHost, fake_host

CHANNEL = "1.36/stable"
L40S = "NVIDIA L40S, 46068, 580.95.05"


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    return fake_host(tmp_path)


def test_inputs_are_pinned_in_the_script_text_and_cannot_inject_commands(host: FakeHost) -> None:
    hostile = "1.36/stable'; touch injected; echo '"
    result = host.run("microk8s-addons.sh", {"ADDONS": hostile})
    assert not (host.root / "injected").exists()
    assert result.returncode == 0
    remote = remote_command("microk8s-install.sh", {"MICROK8S_CHANNEL": CHANNEL, "MARKER_DIR": "/m"})
    assert remote.startswith("bash -c ")
    assert "MICROK8S_CHANNEL=1.36/stable" in remote


# --- MicroK8s ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("installed", "expected", "absent", "marker"),
    [
        pytest.param(
            "", f"snap install microk8s --classic --channel={CHANNEL}", "snap refresh microk8s", True, id="fresh"
        ),
        pytest.param(CHANNEL, "snap refresh --hold microk8s", "snap install", False, id="already-there"),
        pytest.param("1.35/stable", f"snap refresh microk8s --channel={CHANNEL}", "snap install", False, id="upgrade"),
    ],
)
def test_microk8s_install_is_idempotent_and_always_held(
    host: FakeHost, installed: str, expected: str, absent: str, marker: bool
) -> None:
    host.state["FAKE_SNAP_CHANNEL"] = installed
    markers = host.root / "markers"
    result = host.run("microk8s-install.sh", {"MICROK8S_CHANNEL": CHANNEL, "MARKER_DIR": str(markers)})
    assert result.returncode == 0, result.stderr
    calls = host.calls()
    assert any(call.endswith(expected) for call in calls), calls
    assert not any(absent in call for call in calls), calls
    assert "snap refresh --hold microk8s" in calls
    assert "microk8s status --wait-ready --timeout 600" in calls
    assert (markers / "microk8s-installed").exists() == marker


@pytest.mark.parametrize("installed_by_stack", [True, False])
def test_teardown_removes_microk8s_only_if_this_stack_installed_it(host: FakeHost, installed_by_stack: bool) -> None:
    markers = host.root / "markers"
    markers.mkdir()
    if installed_by_stack:
        (markers / "microk8s-installed").touch()
    result = host.run("microk8s-remove.sh", {"MARKER_DIR": str(markers)})
    assert result.returncode == 0, result.stderr
    removed = any(call.startswith("snap remove") for call in host.calls())
    assert removed == installed_by_stack


def test_addons_already_enabled_are_left_alone(host: FakeHost) -> None:
    host.state["FAKE_ENABLED"] = "dns"
    result = host.run("microk8s-addons.sh", {"ADDONS": "dns hostpath-storage"})
    assert result.returncode == 0, result.stderr
    enabled = [call for call in host.calls() if call.startswith("microk8s enable")]
    assert enabled == ["microk8s enable hostpath-storage"]


# --- kubeconfig and the API certificate --------------------------------------------------------


def _certs(host: FakeHost) -> Path:
    certs = host.root / "certs"
    certs.mkdir()
    (certs / "server.crt").write_text("certificate")
    (certs / "csr.conf.template").write_text(
        "[ alt_names ]\nDNS.1 = kubernetes\nIP.1 = 127.0.0.1\nIP.2 = 10.152.183.1\n#MOREIPS\n\n[ v3_ext ]\n"
    )
    host.state["MICROK8S_CERTS"] = str(certs)
    return certs / "csr.conf.template"


@pytest.mark.parametrize(
    ("address", "entry"),
    [("198.51.100.7", "IP.3 = 198.51.100.7"), ("gpu-1.example.com", "DNS.2 = gpu-1.example.com")],
)
def test_a_missing_address_is_added_to_the_certificate_once(host: FakeHost, address: str, entry: str) -> None:
    template = _certs(host)
    for _ in range(2):
        result = host.run("kubeconfig.sh", {"ADDRESS": address, "API_PORT": "16443"})
        assert result.returncode == 0, result.stderr
    assert template.read_text().splitlines().count(entry) == 1, template.read_text()
    assert template.read_text().index(entry) < template.read_text().index("[ v3_ext ]")
    assert "microk8s refresh-certs --cert server.crt" in host.calls()
    assert f"server: https://{address}:16443" in result.stdout


def test_an_address_already_in_the_certificate_changes_nothing(host: FakeHost) -> None:
    template = _certs(host)
    before = template.read_text()
    host.state["FAKE_EXTRA_SAN"] = "IP Address:198.51.100.7"
    result = host.run("kubeconfig.sh", {"ADDRESS": "198.51.100.7", "API_PORT": "16443"})
    assert result.returncode == 0, result.stderr
    assert template.read_text() == before
    assert not any("refresh-certs" in call for call in host.calls())
    assert "server: https://198.51.100.7:16443" in result.stdout
    assert "10.0.0.5" not in result.stdout


# --- preflight ---------------------------------------------------------------------------------

PREFLIGHT = {"EXPECT_GPU": "L40S", "MIN_GPU_MEMORY_MIB": "45000", "UBUNTU_RELEASE": "24.04"}


def test_preflight_reports_the_gpu_it_found(host: FakeHost) -> None:
    host.state["FAKE_GPUS"] = L40S
    result = host.run("preflight.sh", PREFLIGHT)
    assert result.returncode == 0, result.stderr
    facts = parse_preflight(result.stdout)
    assert (facts["gpuName"], facts["gpuMemoryMiB"], facts["driverVersion"]) == ("NVIDIA L40S", 46068, "580.95.05")
    assert facts["hostname"] == "gpu-node-1"


@pytest.mark.parametrize(
    ("gpus", "inputs", "message"),
    [
        pytest.param("NVIDIA A10G, 23028, 580.95.05", {}, "asks for 'L40S'", id="wrong-model"),
        pytest.param(L40S, {"MIN_GPU_MEMORY_MIB": "80000"}, "less than host.expect.minGpuMemoryMiB", id="too-small"),
        pytest.param(f"{L40S}\\nNVIDIA A10G, 23028, 580.95.05", {}, "asks for 'L40S'", id="one-of-two-wrong"),
        pytest.param("", {}, "cannot talk to the driver", id="driver-broken"),
    ],
)
def test_preflight_refuses_a_host_that_does_not_match(
    host: FakeHost, gpus: str, inputs: dict[str, str], message: str
) -> None:
    host.state["FAKE_GPUS"] = gpus
    result = host.run("preflight.sh", {**PREFLIGHT, **inputs})
    assert result.returncode != 0
    assert message in result.stderr


def test_preflight_without_a_driver_says_how_to_get_one(tmp_path: Path) -> None:
    host = fake_host(tmp_path, without=("nvidia-smi",))
    result = host.run("preflight.sh", PREFLIGHT)
    assert result.returncode != 0
    assert "no NVIDIA driver" in result.stderr


# --- Brev --------------------------------------------------------------------------------------

BREV = {"BREV_NAME": "gpu-tenancy-dev", "BREV_GPU_NAME": "L40S", "BREV_CLOUD": "nebius", "BREV_INSTANCE_TYPE": ""}


@pytest.mark.parametrize(
    ("instances", "inputs", "created", "create_call"),
    [
        pytest.param("other", {}, True, "brev create gpu-tenancy-dev --gpu-name L40S --provider nebius", id="new"),
        pytest.param(
            "",
            {"BREV_INSTANCE_TYPE": "gpu-l40s-a.1gpu"},
            True,
            "brev create gpu-tenancy-dev --gpu-name L40S --provider nebius --type gpu-l40s-a.1gpu",
            id="new-with-type",
        ),
        pytest.param("other gpu-tenancy-dev", {}, False, None, id="exists"),
    ],
)
def test_brev_creates_the_instance_only_when_it_does_not_exist(
    host: FakeHost, instances: str, inputs: dict[str, str], created: bool, create_call: str | None
) -> None:
    host.state["FAKE_BREV_INSTANCES"] = instances
    result = host.run("brev-instance.sh", {**BREV, **inputs})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"created={str(created).lower()}"
    creates = [call for call in host.calls() if call.startswith("brev create")]
    assert creates == ([create_call] if create_call else [])


def test_brev_not_logged_in_says_how_to_log_in(host: FakeHost) -> None:
    host.state["FAKE_BREV_LOGGED_OUT"] = "1"
    result = host.run("brev-instance.sh", BREV)
    assert result.returncode != 0
    assert "brev login --token" in result.stderr


def test_brev_missing_says_how_to_install_it(tmp_path: Path) -> None:
    host = fake_host(tmp_path, without=("brev",))
    result = host.run("brev-instance.sh", BREV)
    assert result.returncode != 0
    assert "not installed" in result.stderr


@pytest.mark.parametrize(
    ("delete_on_destroy", "created_output", "deleted"),
    [("true", "created=true", True), ("true", "created=false", False), ("false", "created=true", False)],
)
def test_brev_deletes_only_what_it_created_and_only_when_asked(
    host: FakeHost, delete_on_destroy: str, created_output: str, deleted: bool
) -> None:
    host.state["PULUMI_COMMAND_STDOUT"] = created_output
    result = host.run("brev-delete.sh", {"BREV_NAME": "gpu-tenancy-dev", "DELETE_ON_DESTROY": delete_on_destroy})
    assert result.returncode == 0, result.stderr
    assert ("brev delete gpu-tenancy-dev" in host.calls()) == deleted


def test_brev_ssh_details_come_from_brevs_ssh_config(host: FakeHost) -> None:
    key = host.root / "brev.pem"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n")
    host.state["FAKE_IDENTITY"] = "~/brev.pem"
    result = host.run("brev-ssh.sh", {"BREV_NAME": "gpu-tenancy-dev"})
    assert result.returncode == 0, result.stderr
    endpoint = parse_brev_ssh(result.stdout)
    assert (endpoint.address, endpoint.user, endpoint.port) == ("198.51.100.7", "ubuntu", 22)
    assert endpoint.private_key == key.read_text()
    assert base64.b64encode(key.read_bytes()).decode() in result.stdout
    assert "brev refresh" in host.calls()


def test_brev_behind_a_proxy_command_points_to_ssh_mode(host: FakeHost) -> None:
    host.state["FAKE_IDENTITY"] = str(host.root / "missing.pem")
    host.state["FAKE_PROXY"] = "cloudflared access ssh --hostname %h"
    result = host.run("brev-ssh.sh", {"BREV_NAME": "gpu-tenancy-dev"})
    assert result.returncode != 0
    assert "ProxyCommand" in result.stderr
    assert "host.mode ssh" in result.stderr


# --- GPU Operator and the GPU inventory --------------------------------------------------------

CHECK = {"NAMESPACE": "gpu-operator-resources", "PART_OF": "gpu-tenancy"}


@pytest.mark.parametrize(
    ("namespaces", "part_of", "clear"),
    [
        pytest.param("", "", True, id="none-installed"),
        pytest.param("gpu-operator-resources", "gpu-tenancy", True, id="our-own-earlier-install"),
        pytest.param("gpu-operator-resources", "", False, id="microk8s-addon-in-same-namespace"),
        pytest.param("gpu-operator", "gpu-tenancy", False, id="elsewhere"),
    ],
)
def test_a_foreign_gpu_operator_stops_the_install_with_the_fix(
    host: FakeHost, namespaces: str, part_of: str, clear: bool
) -> None:
    host.state.update(FAKE_OPERATOR_NAMESPACES=namespaces, FAKE_NAMESPACE_PART_OF=part_of)
    result = host.run("gpu-operator-check.sh", CHECK)
    assert (result.returncode == 0) == clear, result.stderr
    if not clear:
        assert "gpuOperator.mode to adopt" in result.stderr


def test_the_inventory_needs_a_node_labelled_for_gpus(host: FakeHost) -> None:
    inputs = {"INVENTORY": "gpu-inventory", "NAMESPACE": "gpu-tenancy-system"}
    assert host.run("gpu-inventory.sh", inputs).returncode != 0
    host.state["FAKE_GPU_NODES"] = "gpu-node-1\\tNVIDIA-L40S\\t46068\\t580.95.05\\t1\\n"
    result = host.run("gpu-inventory.sh", inputs)
    assert result.returncode == 0, result.stderr
    assert any(call.startswith("kubectl create configmap gpu-inventory") for call in host.calls())

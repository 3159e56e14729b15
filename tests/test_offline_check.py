"""`python -m harness.check <stack>`: a newcomer's own stack file, validated and planned without Pulumi or a cloud."""

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import ROOT, dev_settings, run_main
from harness.check import check, stack_file_of

Document = dict[str, Any]


def _host(host: dict[str, Any], **secure: str) -> Callable[[Document], None]:
    def edit(document: Document) -> None:
        document["config"]["gpu-tenancy:host"] = host
        for key, value in secure.items():
            document["config"][f"gpu-tenancy:{key}"] = {"secure": value} if value.startswith("v1:") else value

    return edit


def _set(path: tuple[str | int, ...], value: Any) -> Callable[[Document], None]:
    def edit(document: Document) -> None:
        node = document["config"]
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return edit


KUBECONFIG_HOST = {"mode": "kubeconfig", "address": "203.0.113.10"}
SSH_HOST = {"mode": "ssh", "address": "203.0.113.10"}

REFUSED = [
    (
        "bad-value",
        _set(("gpu-tenancy:host", "workers"), "two"),
        "gpu-tenancy:host.workers = 'two': must be a whole number",
    ),
    ("missing-credential", _host(KUBECONFIG_HOST), "gpu-tenancy:kubeconfig is required"),
    (
        "plain-text-credential",
        _host(SSH_HOST, sshPrivateKey="-----BEGIN"),
        "gpu-tenancy:sshPrivateKey is stored in plain",
    ),
    (
        "overcommitted-queues",
        _set(("gpu-tenancy:queues", 1, "resources", "gpu", "quota"), 0.9),
        "gpu-tenancy:queues[0].resources.gpu.quota",
    ),
]


def _write(tmp_path: Path, edit: Callable[[Document], None], name: str = "mine") -> Path:
    document = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    edit(document)
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.mark.parametrize(("edit", "complaint"), [pytest.param(e, c, id=i) for i, e, c in REFUSED])
def test_a_stack_with_a_config_error_exits_non_zero_with_one_line_and_lists_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Callable[[Document], None], complaint: str
) -> None:
    assert check(str(_write(tmp_path, edit))) == 1
    out, err = capsys.readouterr()
    assert out == "", "nothing is listed for a stack that would not run"
    problems = [line for line in err.splitlines() if line.startswith("  - ")]
    assert len(problems) == 1, err
    assert complaint in problems[0], err


def test_a_missing_stack_file_is_a_config_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert check(str(tmp_path / "Pulumi.absent.yaml")) == 1
    assert "does not exist" in capsys.readouterr().err


def test_the_reference_stack_lists_every_resource_a_first_up_creates(capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = stack_file_of(str(ROOT / "Pulumi.dev.yaml"))
    assert check(str(path)) == 0
    out, err = capsys.readouterr()
    created = [r for r in run_main(dev_settings(), {}, preview=True).registrations if not r.read]
    assert f"`pulumi up` would create {len(created)} resources" in out
    for registration in created:
        assert f"{registration.type}  {registration.name}\n" in out, registration.name
    for team in ("team-nlp", "team-vision", "team-recommender"):
        assert f"gpu-tenancy:index:VClusterTenant  {team}\n" in out
    assert "tenantKubeconfigs" in out
    assert "warning: queue 'ml-org'" in err, "the program's warnings are shown, as `pulumi preview` shows them"


def test_an_encrypted_credential_is_stood_in_for_and_said_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = _write(tmp_path, _host(KUBECONFIG_HOST, kubeconfig="v1:AAAAencrypted"))
    assert check(str(stack)) == 0
    out = capsys.readouterr().out
    assert "Stood in for the encrypted kubeconfig: `pulumi preview` checks the real one." in out
    assert "command:remote:Command" not in out, "a kubeconfig host installs nothing over SSH"


@pytest.mark.parametrize(
    ("host", "key"), [(SSH_HOST, "sshPrivateKey"), (KUBECONFIG_HOST, "kubeconfig")], ids=["ssh", "kubeconfig"]
)
def test_a_stack_without_its_credential_yet_is_checked_with_a_stand_in_that_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], host: Document, key: str
) -> None:
    """Setting a secret needs the Pulumi CLI; a newcomer checks the rest of the stack first, and is told what was
    stood in for. Without the flag the same stack is refused, naming the credential."""
    stack = _write(tmp_path, _host(host))
    assert check(str(stack)) == 1
    assert f"gpu-tenancy:{key} is required" in capsys.readouterr().err
    assert check(str(stack), stand_in_secrets=True) == 0
    out = capsys.readouterr().out
    assert f"Stood in for {key}, which the stack does not set yet (--stand-in-secrets)" in out
    assert "is valid" in out


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("dev", ("Pulumi.dev.yaml", "dev")),
        ("stacks/Pulumi.prod-eu.yaml", ("Pulumi.prod-eu.yaml", "prod-eu")),
    ],
)
def test_a_stack_is_named_by_name_or_by_file(argument: str, expected: tuple[str, str]) -> None:
    path, stack = stack_file_of(argument)
    assert (path.name, stack) == expected


def test_the_readme_command_runs_from_the_repository_root() -> None:
    """The command as a newcomer types it, in a process of its own."""
    finished = subprocess.run(
        [sys.executable, "-m", "harness.check", "dev"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert finished.returncode == 0, finished.stderr
    assert "Pulumi.dev.yaml is valid" in finished.stdout
    assert "venv/bin/python -m harness.check dev" in (ROOT / "README.md").read_text()

"""Stack files as committed: valid, explicit about providers, and free of plain-text credentials."""

from pathlib import Path

import pytest
import yaml

from config.issues import ConfigError
from config.sources import read_stack_file
from harness import ROOT
from tests.conftest import FAKE_KUBECONFIG

STACK_FILES = sorted(ROOT.glob("Pulumi.*.yaml"))


@pytest.mark.parametrize("stack_file", STACK_FILES, ids=lambda p: p.name)
def test_every_stack_file_is_valid_and_never_uses_the_ambient_kubeconfig(stack_file: Path) -> None:
    read_stack_file(stack_file)
    config = yaml.safe_load(stack_file.read_text())["config"]
    assert "kubernetes" in config["pulumi:disable-default-providers"]


def test_a_plain_text_kubeconfig_in_a_stack_file_is_refused(tmp_path: Path) -> None:
    document = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    document["config"]["gpu-tenancy:kubeconfig"] = FAKE_KUBECONFIG
    leaked = tmp_path / "Pulumi.leak.yaml"
    leaked.write_text(yaml.safe_dump(document))
    with pytest.raises(ConfigError, match=r"gpu-tenancy:kubeconfig is stored in plain text"):
        read_stack_file(leaked)


def test_an_encrypted_kubeconfig_in_a_stack_file_is_accepted(tmp_path: Path) -> None:
    document = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    document["config"]["gpu-tenancy:host"] = {"mode": "kubeconfig", "address": "203.0.113.10"}
    document["config"]["gpu-tenancy:kubeconfig"] = {"secure": "v1:AAAA"}
    stack = tmp_path / "Pulumi.enc.yaml"
    stack.write_text(yaml.safe_dump(document))
    assert read_stack_file(stack).queues


def _stack_file(tmp_path: Path, text: str) -> Path:
    """Pulumi.dev.yaml with `text` appended under `config:` (or, unindented, at the top level)."""
    stack = tmp_path / "Pulumi.edited.yaml"
    stack.write_text((ROOT / "Pulumi.dev.yaml").read_text() + text)
    return stack


@pytest.mark.parametrize(
    ("appended", "complaint"),
    [
        pytest.param(
            "  gpu-tenancy:versions:\n    microk8s: 1.35/stable\n",
            r"the key 'gpu-tenancy:versions' appears twice .*Pulumi refuses that",
            id="duplicate-key",
        ),
        pytest.param(
            "  vcluster:\n    minGpuFraction: 1\n",
            r"gpu-tenancy:vcluster\.minGpuFraction = 1: must be less than 1",
            id="key-without-namespace-is-the-project's",
        ),
        pytest.param(
            "  versions:\n    microk8s: 1.35/stable\n",
            r"gpu-tenancy:versions is set twice in Pulumi\.edited\.yaml, as 'gpu-tenancy:versions' and 'versions'",
            id="same-key-with-and-without-namespace",
        ),
        pytest.param(
            "  gpu-tenancy:vcluster:\n    maxFinishedPods: 030100\n",
            r"gpu-tenancy:vcluster\.maxFinishedPods = 030100: a number with a leading zero, which Pulumi "
            r"reads as the octal 12352; write 30100",
            id="leading-zero-is-octal-to-pulumi",
        ),
        pytest.param(
            "  gpu-tenancy:vcluster:\n    blockedEgress: [09]\n",
            r"gpu-tenancy:vcluster\.blockedEgress\[0\] = 09: .* reads as the float 9\.0; write 9, "
            r"or quote it \(\"09\"\)",
            id="leading-zero-that-is-no-octal",
        ),
        pytest.param(
            "  gpu-tenancy:queues:extra: 1\n",
            r"'gpu-tenancy:queues:extra' in Pulumi\.edited\.yaml is not a config key Pulumi can read",
            id="key-pulumi-cannot-parse",
        ),
    ],
)
def test_a_stack_file_pulumi_would_read_differently_is_refused_offline(
    tmp_path: Path, appended: str, complaint: str
) -> None:
    with pytest.raises(ConfigError, match=complaint):
        read_stack_file(_stack_file(tmp_path, appended))


def test_yes_stays_a_string_as_in_pulumi(tmp_path: Path) -> None:
    """YAML 1.1 (PyYAML's) reads `yes` as true; Pulumi's YAML 1.2 keeps the string, and a strict bool refuses it."""
    stack = _stack_file(tmp_path, "")
    stack.write_text(stack.read_text().replace("deleteOnDestroy: false", "deleteOnDestroy: yes"))
    assert yaml.safe_load(stack.read_text())["config"]["gpu-tenancy:host"]["deleteOnDestroy"] is True
    with pytest.raises(ConfigError, match=r"gpu-tenancy:host\.deleteOnDestroy = 'yes': must be true or false"):
        read_stack_file(stack)


def test_a_brev_name_of_yes_is_a_name(tmp_path: Path) -> None:
    stack = _stack_file(tmp_path, "")
    stack.write_text(stack.read_text().replace("name: gpu-tenancy-dev", "name: yes"))
    host = read_stack_file(stack).host
    assert getattr(host, "name", None) == "yes"


@pytest.mark.parametrize(
    ("appended", "warning"),
    [
        pytest.param(
            "observability:\n  retentionDays: 10\n",
            "'observability' at the top level of Pulumi.edited.yaml is ignored by Pulumi: indent it under `config:`",
            id="setting-outside-config",
        ),
        pytest.param(
            "  kubernetes:observability:\n    retentionDays: 10\n",
            "config key 'kubernetes:observability' is not read: this program reads gpu-tenancy:observability",
            id="setting-in-another-namespace",
        ),
    ],
)
def test_a_setting_pulumi_never_hands_the_program_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], appended: str, warning: str
) -> None:
    read_stack_file(_stack_file(tmp_path, appended))
    assert f"warning: {warning}" in capsys.readouterr().err

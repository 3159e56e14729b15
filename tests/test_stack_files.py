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

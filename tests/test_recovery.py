"""The ways through docs/operations.md's recovery runbook names exist: its commands target what the program makes.

A runbook that names a resource the program no longer has, or a variable the provider does not read,
dead-ends at 3 a.m.; these tests keep it true.
"""

import os
import re
from unittest import mock

import pytest

from harness import FAKE_HOST_KEY, ROOT, ProgramRun, dev_settings, run_main

RUNBOOK = (ROOT / "docs" / "operations.md").read_text()
STATE_DELETE = re.compile(r"pulumi state delete '(urn:pulumi:<stack>::[^']+)'")


@pytest.fixture(scope="module")
def with_worker() -> ProgramRun:
    config = {
        **dev_settings(),
        "host": {"mode": "ssh", "address": "203.0.113.20", "workers": [{"address": "10.0.0.6"}]},
    }
    return run_main(config, {"sshPrivateKey": FAKE_HOST_KEY}, stack="prod")


def test_a_dead_worker_needs_no_state_surgery(with_worker: ProgramRun) -> None:
    """No step's delete runs on the worker over SSH (tests/test_workers.py), so the runbook deletes nothing from
    the state by hand: dropping the worker from config is the whole of it."""
    assert STATE_DELETE.findall(RUNBOOK) == []
    on_worker = {
        r.name
        for r in with_worker.registrations
        if r.type == "command:remote:Command"
        and r.inputs["connection"]["host"] == "10.0.0.6"
        and r.inputs.get("delete")
    }
    assert on_worker == set()
    assert "retiredWorkers" in RUNBOOK


def test_the_runbook_forgets_a_dead_cluster_with_the_tool_the_repository_ships() -> None:
    """The dead-cluster steps: export, forget, import (tests/test_dead_cluster.py tests the tool)."""
    for command in (
        "pulumi stack export --file before.json",
        "python3 -m ops.forget_cluster before.json > after.json",
        "pulumi stack import --file after.json",
    ):
        assert command in RUNBOOK
    assert (ROOT / "ops" / "forget_cluster.py").is_file()


def test_pulumi_k8s_delete_unreachable_reaches_every_kubernetes_provider() -> None:
    """The program sets no deleteUnreachable of its own: the variable the runbook names is what decides."""
    assert "PULUMI_K8S_DELETE_UNREACHABLE=true" in RUNBOOK
    plain = run_main(dev_settings(), shared=False)
    providers = plain.of_type("pulumi:providers:kubernetes")
    assert providers
    assert all("deleteUnreachable" not in p.inputs for p in providers)
    with mock.patch.dict(os.environ, {"PULUMI_K8S_DELETE_UNREACHABLE": "true"}):
        forced = run_main(dev_settings(), shared=False)
    # Provider config travels as strings.
    assert all(
        p.inputs.get("deleteUnreachable") in (True, "true") for p in forced.of_type("pulumi:providers:kubernetes")
    )


def test_the_drift_check_the_runbook_replaces_is_one_the_program_makes() -> None:
    (template,) = re.findall(r"--replace '(urn:pulumi:<stack>::[^']+)'", RUNBOOK)
    run = run_main(dev_settings(), stack="prod")
    assert template.replace("<stack>", "prod") in {r.urn for r in run.registrations}

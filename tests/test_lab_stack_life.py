"""The life of the reference stack on the real engine, against a lab: preview, up, up again, destroy.

`python -m harness.lab pulumi --stack dev -- ARGS` is the lab's CLI (v3.274.0) with its Kubernetes provider
(v4.25.0) on a lab copy of Pulumi.dev.yaml (harness/lab/engine_stack.py says what the copy changes, and why).
Each stage runs once, in order, as a user would run them; the tests read what each one did. The program's own
URNs (as the mocks record them, which the URN test keeps) are the ones the real engine plans.
"""

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import ROOT, run_pulumi
from harness.lab.engine_stack import lab_program
from tests.lab import Lab, private_lab

STACK = "dev"
TENANT_NAMESPACES = ("vcluster-team-nlp", "vcluster-team-vision", "vcluster-team-recommender")


@dataclass(frozen=True)
class Stage:
    """One CLI command's exit status and what it printed."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


@dataclass(frozen=True)
class Life:
    lab: Lab
    copy: Path
    stages: dict[str, Stage]


def _pulumi(lab: Lab, *args: str) -> Stage:
    command = [sys.executable, "-m", "harness.lab", "pulumi", "--state", str(lab.state), "--stack", STACK, "--"]
    done = subprocess.run([*command, *args], cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False)
    return Stage(done.returncode, done.stdout, done.stderr)


def _namespaces(lab: Lab) -> set[str]:
    return {n["metadata"]["name"] for n in lab.admin.list("v1", "Namespace")}


@pytest.fixture(scope="module")
def life() -> Iterator[Life]:
    with private_lab("stack-life", kai_crds=False) as lab:
        shutil.rmtree(lab.state / "engine", ignore_errors=True)  # a new cluster: a new stack
        stages: dict[str, Stage] = {}
        stages["preview"] = _pulumi(lab, "preview", "--json")
        stages["up"] = _pulumi(lab, "up", "--yes", "--skip-preview")
        stages["namespaces-after-up"] = Stage(0, json.dumps(sorted(_namespaces(lab))), "")
        stages["preview-again"] = _pulumi(lab, "preview", "--json", "--expect-no-changes")
        stages["export"] = _pulumi(lab, "stack", "export")
        stages["destroy"] = _pulumi(lab, "destroy", "--yes", "--skip-preview")
        stages["namespaces-after-destroy"] = Stage(0, json.dumps(sorted(_namespaces(lab))), "")
        yield Life(lab, lab.state / "engine" / "stacks" / STACK, stages)


def _ran(life: Life, stage: str) -> Stage:
    done = life.stages[stage]
    assert done.code == 0, f"`pulumi {stage}` exited {done.code}:\n{done.stdout[-6000:]}\n{done.stderr[-6000:]}"
    return done


def _steps(stage: Stage) -> dict[str, str]:
    return {step["urn"]: step["op"] for step in stage.json().get("steps") or []}


def test_a_fresh_preview_plans_to_create_every_resource_the_program_registers_by_its_own_urn(life: Life) -> None:
    steps = _steps(_ran(life, "preview"))
    document = yaml.safe_load((life.copy / f"Pulumi.{STACK}.yaml").read_text())
    settings = {key.removeprefix("gpu-tenancy:"): value for key, value in document["config"].items()}
    settings.pop("kubeconfig")
    kubeconfig = (life.lab.state / "kubeconfig").read_text()
    modelled = run_pulumi(lab_program, config=settings, secrets={"kubeconfig": kubeconfig}, stack=STACK, preview=True)
    expected = {r.urn for r in modelled.registrations if not r.read}
    planned = {urn for urn, op in steps.items() if op != "read" and "pulumi:pulumi:Stack" not in urn}
    assert planned == expected, {"only planned": planned - expected, "only registered": expected - planned}
    assert {op for urn, op in steps.items() if urn in expected} == {"create"}, steps


def test_up_creates_the_platform_and_a_second_preview_plans_no_change(life: Life) -> None:
    _ran(life, "up")
    namespaces = set(json.loads(life.stages["namespaces-after-up"].stdout))
    assert {"kai-scheduler", *TENANT_NAMESPACES} <= namespaces, namespaces
    again = _ran(life, "preview-again")
    changed = {urn: op for urn, op in _steps(again).items() if op not in {"same", "read"}}
    assert changed == {}, changed


def test_destroy_leaves_nothing_of_the_stack_in_the_lab(life: Life) -> None:
    _ran(life, "destroy")
    left = set(json.loads(life.stages["namespaces-after-destroy"].stdout))
    before = set(json.loads(life.stages["namespaces-after-up"].stdout))
    assert not (left & ({"kai-scheduler", *TENANT_NAMESPACES})), left
    assert left < before


def test_the_exported_state_holds_no_credential_in_plain_text(life: Life) -> None:
    """`pulumi stack export` is what an operator attaches to a ticket: the host's kubeconfig and every tenant's
    stay ciphertext in it."""
    exported = _ran(life, "export").stdout
    kubeconfig = yaml.safe_load((life.lab.state / "kubeconfig").read_text())
    user = kubeconfig["users"][0]["user"]
    plain = [value for key, value in user.items() if key.endswith("-data") and "key" in key]
    assert plain, "the lab's kubeconfig carries its client key inline"
    assert not [value for value in plain if value in exported]
    state = json.loads(exported)
    secrets = json.dumps(state).count("4dabf18193072939515e22adb298388d")  # Pulumi's secret signature
    assert secrets > 0, "the credentials are there, as secrets"

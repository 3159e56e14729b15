"""A host that is rebuilt, or gone: old tenants stay until the new ones pass their gates, and a dead cluster can be
forgotten so that the restore `up` and `destroy` finish without it (ops/forget_cluster.py).

The state is modelled as `pulumi stack export` writes it (apitype DeploymentV3: each resource's urn, type, parent,
provider reference `<urn>::<id>` and dependencies, in registration order), and the engine's plan as
tests/engine_rules.py reproduces it from its source; tests/test_lab_engine.py runs the remedy on the real engine.
"""

import json
from pathlib import Path
from typing import Any

import pytest

from harness import ProgramRun, dev_settings, run_main
from ops.forget_cluster import forget, main
from tests.engine_rules import plan

RELEASE = "kubernetes:helm.sh/v3:Release"
JOB = "kubernetes:batch/v1:Job"


def _rebuilt() -> dict[str, Any]:
    config = dev_settings()
    config["host"] = {**config["host"], "name": f"{config['host']['name']}-2"}
    return config


@pytest.fixture(scope="module")
def before() -> ProgramRun:
    return run_main(dev_settings())


@pytest.fixture(scope="module")
def after() -> ProgramRun:
    return run_main(_rebuilt())


STACK = "urn:pulumi:dev::gpu-tenancy::pulumi:pulumi:Stack::gpu-tenancy-dev"


def export(run: ProgramRun) -> dict[str, Any]:
    resources: list[dict[str, Any]] = [{"urn": STACK, "custom": False, "type": "pulumi:pulumi:Stack"}]
    for r in run.registrations:
        resource: dict[str, Any] = {
            "urn": r.urn,
            "custom": not r.type.startswith("gpu-tenancy:"),
            "type": r.type,
            "dependencies": sorted(r.dependencies),
        }
        if r.read:
            resource["external"] = True
        if r.parent:
            resource["parent"] = r.parent
        if r.provider:
            resource["provider"] = r.provider
        resources.append(resource)
    return {"version": 3, "deployment": {"manifest": {}, "resources": resources}}


def verify_integrity(document: dict[str, Any]) -> list[str]:
    """What `pulumi stack import` refuses: a parent, provider or dependency that is not an earlier resource
    (pulumi/pulumi pkg/resource/deploy/snapshot.go VerifyIntegrity)."""
    seen: set[str] = set()
    problems = []
    for resource in document["deployment"]["resources"]:
        refs = [*resource.get("dependencies", []), resource.get("parent") or ""]
        if resource.get("provider"):
            refs.append(resource["provider"].rsplit("::", 1)[0])
        problems += [f"{resource['urn']} -> {ref}" for ref in refs if ref and ref not in seen]
        seen.add(resource["urn"])
    return problems


def _steps(before: ProgramRun, after: ProgramRun, step: str) -> list[tuple[str, str]]:
    return [(s.name, s.type) for s in plan(before, after) if s.op == step]


def test_the_export_model_is_sound(before: ProgramRun) -> None:
    assert verify_integrity(export(before)) == []


def test_a_rebuild_keeps_every_old_team_until_the_new_teams_pass_their_gates(
    before: ProgramRun, after: ProgramRun
) -> None:
    steps = [(s.op, s.name, s.type) for s in plan(before, after)]
    teams = [t["name"] for t in dev_settings()["tenants"]]
    for team in teams:
        old_release = steps.index(("delete", f"{team}-vcluster", RELEASE))
        new_gate = max(i for i, (action, name, _) in enumerate(steps) if action == "replace" and name.startswith(team))
        assert old_release > new_gate, f"{team}'s old vCluster is deleted before its new one is ready"


def test_forgetting_the_dead_cluster_leaves_nothing_that_needs_it(before: ProgramRun, after: ProgramRun) -> None:
    document, gone = forget(export(before))
    assert verify_integrity(document) == [], "pulumi stack import accepts it"
    kept = {r["urn"] for r in document["deployment"]["resources"]}
    assert not [
        r for r in before.registrations if r.urn in kept and r.type.startswith(("kubernetes:", "command:remote"))
    ]
    assert any(r.type == RELEASE and r.urn in gone for r in before.registrations)
    forgotten_run = ProgramRun([r for r in before.registrations if r.urn in kept])
    # The restore `up` deletes only what needs no cluster: the old Brev instance (by its id), nothing in a cluster.
    deletes = _steps(forgotten_run, after, "delete")
    assert all(not t.startswith(("kubernetes:", "command:remote")) for _, t in deletes), deletes
    assert ("host-brev-instance", "command:local:Command") in deletes
    # And `destroy` (everything deleted) touches only the same kinds.
    destroyed = _steps(forgotten_run, ProgramRun([]), "delete")
    assert all(not t.startswith(("kubernetes:", "command:remote")) for _, t in destroyed)


def test_the_command_reads_an_export_and_writes_the_forgotten_state(
    before: ProgramRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "before.json"
    path.write_text(json.dumps(export(before)))
    assert main([str(path)]) == 0
    out, err = capsys.readouterr()
    written = json.loads(out)
    assert verify_integrity(written) == []
    assert "forgetting urn:pulumi:dev::gpu-tenancy::" in err
    (tmp_path / "other.json").write_text("{}")
    assert main([str(tmp_path / "other.json")]) == 2


def _registration_types(run: ProgramRun) -> set[str]:
    return {r.type for r in run.registrations}


def test_the_forgotten_kinds_are_every_kind_that_lives_in_a_cluster_or_on_its_machines(before: ProgramRun) -> None:
    kept = {t for t in _registration_types(before) if not t.startswith(("kubernetes:", "pulumi:providers:kubernetes"))}
    kept -= {"command:remote:Command"}
    assert kept <= {
        "command:local:Command",
        "pulumi:providers:command",
        "pulumi:providers:random",
        "pulumi:providers:tls",
        "random:index/randomPassword:RandomPassword",
        "tls:index/privateKey:PrivateKey",
        "tls:index/selfSignedCert:SelfSignedCert",
    } | {t for t in kept if t.startswith("gpu-tenancy:")}, "a new kind: does it live in the cluster?"

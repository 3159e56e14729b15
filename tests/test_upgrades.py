"""Each component's version bump, planned as the engine would run it (tests/engine_rules.py): what is replaced,
updated and deleted, in which order, and that no team loses its data or its credential on the way.

docs/operations.md's upgrade table says, for each row, what restarts and what a team notices.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from harness import ProgramRun, dev_settings, run_main
from tests.engine_rules import Step, plan

Json = dict[str, Any]
TEAMS = ("team-nlp", "team-vision", "team-recommender")
GATES_AFTER_HOST = ("host-gpu-gate",)


def _with_observability(config: Json) -> Json:
    config["observability"] = {"mode": "install"}
    return config


def _set(path: str, value: Any) -> Callable[[Json], Json]:
    def change(config: Json) -> Json:
        *parents, last = path.split(".")
        node: Any = config
        for key in parents:
            node = node[int(key)] if key.isdigit() else node.setdefault(key, {})
        node[last] = value
        return config

    return change


@dataclass(frozen=True)
class Upgrade:
    change: Callable[[Json], Json]
    replaced: list[str]
    updated: list[str]
    """Independent resources go in parallel; the order that matters (a gate after what it vouches for) is tested
    below."""


UPGRADES = {
    "microk8s-channel": Upgrade(
        _set("versions.microk8s", "1.37/stable"),
        replaced=[
            "host-preflight",
            "host-kubelet",
            "host-addons",
            "host-kubeconfig",
            "host-gpu-operator-check",
            "host-gpu-gate",
        ],
        updated=["host-microk8s", "host-drift-check"],
    ),
    "kubelet-arguments": Upgrade(
        _set("host.kubelet.podMaxPids", 8192), replaced=[], updated=["host-kubelet", "host-drift-check"]
    ),
    "gpu-operator": Upgrade(
        _set("versions.gpuOperator", "v26.7.0"),
        replaced=["host-gpu-operator-check", "host-gpu-gate"],
        updated=["host-gpu-operator"],
    ),
    "kai": Upgrade(_set("versions.kaiScheduler", "v0.17.0"), replaced=["kai-gate"], updated=["kai-release"]),
    "one-teams-vcluster": Upgrade(
        _set("tenants.0.vclusterVersion", "0.35.3"), replaced=[], updated=["team-nlp-vcluster"]
    ),
    "every-teams-vcluster": Upgrade(
        _set("versions.vcluster", "0.35.3"), replaced=[], updated=[f"{team}-vcluster" for team in TEAMS]
    ),
    "kube-prometheus-stack": Upgrade(
        _set("versions.kubePrometheusStack", "88.6.0"), replaced=[], updated=["observability-stack"]
    ),
}


def _runs(upgrade: Upgrade) -> tuple[ProgramRun, ProgramRun]:
    before = run_main(_with_observability(dev_settings()))
    after = run_main(upgrade.change(_with_observability(dev_settings())), previous=before.world_after())
    return before, after


def _waits_for(run: ProgramRun, later: str, earlier: str) -> bool:
    """Whether `later` depends, directly or through others, on `earlier` (a Job, release or host step)."""
    by_urn = {r.urn: r for r in run.registrations}
    acting = ("kubernetes:batch/v1:Job", "kubernetes:helm.sh/v3:Release", "command:remote:Command")
    (start,) = [r for r in run.registrations if r.name == later and r.type in acting]
    seen, todo = set(), [start.urn]
    while todo:
        urn = todo.pop()
        for dependency in by_urn[urn].dependencies:
            if by_urn.get(dependency) is not None and by_urn[dependency].name == earlier:
                return True
            if dependency not in seen:
                seen.add(dependency)
                todo.append(dependency)
    return False


def _names(steps: list[Step], op: str) -> list[str]:
    return [step.name for step in steps if step.op == op and not step.name.startswith("node-ports-")]


@pytest.mark.parametrize("name", UPGRADES)
def test_an_upgrade_replaces_and_updates_exactly_this(name: str) -> None:
    upgrade = UPGRADES[name]
    steps = plan(*_runs(upgrade))
    replaced = _names(steps, "replace")
    assert sorted(replaced) == sorted(upgrade.replaced)
    assert sorted(_names(steps, "update")) == sorted(upgrade.updated)
    # Nothing is deleted but the old halves of the replacements. A gate's Job has a fixed name, so it goes just
    # before its replacement (deleteBeforeReplace); the rest go at the end, the new ones in place.
    assert sorted(_names(steps, "delete")) == sorted(replaced)
    sequence = [(s.op, s.name) for s in steps]
    for gate in (r for r in replaced if r.endswith("-gate")):
        assert sequence.index(("delete", gate)) + 1 == sequence.index(("replace", gate))


@pytest.mark.parametrize("name", UPGRADES)
def test_no_team_loses_its_data_or_its_credential(name: str) -> None:
    before, after = _runs(UPGRADES[name])
    steps = plan(before, after)
    touched = {s.name for s in steps if s.op in ("replace", "delete")}
    for team in TEAMS:
        # The namespace holds the vCluster's volume; the release holds the control plane that writes it.
        assert not {f"{team}-namespace", f"{team}-vcluster", f"{team}-ready"} & touched, team
    assert after.exports["tenantKubeconfigs"].secret
    assert after.exports["tenantKubeconfigs"].value == before.exports["tenantKubeconfigs"].value
    assert after.exports["nodePorts"].value == before.exports["nodePorts"].value


@pytest.mark.parametrize(
    ("name", "first", "then"),
    [
        ("kai", "kai-release", "kai-gate"),
        ("gpu-operator", "host-gpu-operator", "host-gpu-gate"),
        ("microk8s-channel", "host-microk8s", "host-kubelet"),
        ("microk8s-channel", "host-kubeconfig", "host-gpu-gate"),
    ],
)
def test_a_gate_or_a_step_runs_again_after_what_it_depends_on(name: str, first: str, then: str) -> None:
    """The engine steps in dependency order: a gate vouches for the release as it is after the upgrade."""
    before, after = _runs(UPGRADES[name])
    assert _waits_for(after, then, first)
    steps = [s.name for s in plan(before, after) if s.op in ("update", "replace")]
    assert steps.index(first) < steps.index(then)


def test_one_team_goes_first_on_a_new_vcluster_and_the_others_stay() -> None:
    _, after = _runs(UPGRADES["one-teams-vcluster"])
    versions = {r.name: r.inputs["version"] for r in after.of_type("kubernetes:helm.sh/v3:Release")}
    assert versions["team-nlp-vcluster"] == "0.35.3"
    assert versions["team-vision-vcluster"] == versions["team-recommender-vcluster"] == "0.35.1"
    assert any("team-nlp run vCluster 0.35.3" in w for w in after.warnings), "the fence was read against 0.35.1"

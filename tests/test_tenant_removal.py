"""A team's namespace, volumes and data go only when the operator names the team in vcluster.removeTenants.

The engine deletes what a program no longer registers only once the program has ended without error
(pulumi/pulumi pkg/resource/deploy/deployment_executor.go, Execute); so a run that stops on an undeclared
removal deletes nothing, the team's namespace and volumes included.
"""

from typing import Any

import pytest

from harness import attempt_main, dev_settings, run_main

NAMESPACE = "kubernetes:core/v1:Namespace"


def _without(config: dict[str, Any], *teams: str) -> dict[str, Any]:
    config["tenants"] = [t for t in config["tenants"] if t["name"] not in teams]
    return config


@pytest.fixture(scope="module")
def world() -> dict[str, Any]:
    """The host's memory after an `up` of the reference stack (three teams)."""
    return run_main(dev_settings()).world_after()


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda c: _without(c, "team-nlp"), id="one-dropped"),
        pytest.param(lambda c: _without(c, "team-nlp", "team-vision", "team-speech"), id="the-last-ones"),
        pytest.param(lambda c: c["tenants"][0].update(name="team-nlp2") or c, id="renamed"),
    ],
)
def test_a_team_dropped_from_tenants_alone_stops_the_run_and_keeps_its_data(world: dict[str, Any], change: Any) -> None:
    error, _ = attempt_main(change(dev_settings()), previous=world)
    assert error is not None
    message = str(error)
    assert "gpu-tenancy:tenants" in message
    assert "gpu-tenancy:vcluster.removeTenants" in message
    assert "Traceback" not in message


def test_an_older_memory_without_the_team_list_protects_the_teams_it_holds_ports_for(world: dict[str, Any]) -> None:
    """A host written by a version that kept only ports: those are the teams of its last `up`."""
    error, _ = attempt_main(_without(dev_settings(), "team-nlp"), previous={"nodePorts": world["nodePorts"]})
    assert error is not None
    assert "team-nlp" in str(error)


def test_a_team_named_in_remove_tenants_goes_and_is_forgotten(world: dict[str, Any]) -> None:
    config = _without(dev_settings(), "team-nlp")
    config["vcluster"] = {**config.get("vcluster", {}), "removeTenants": ["team-nlp"]}
    run = run_main(config, previous=world)
    namespaces = {r.inputs["metadata"]["name"] for r in run.of_type(NAMESPACE)}
    assert "vcluster-team-nlp" not in namespaces
    assert "team-nlp" not in run.world_after()["tenants"]
    # Once forgotten, the next `up` needs the entry no more.
    again = run_main(_without(dev_settings(), "team-nlp"), previous=run.world_after())
    assert "team-nlp" not in again.world_after()["tenants"]


def test_a_new_team_and_a_fresh_cluster_need_nothing(world: dict[str, Any]) -> None:
    assert attempt_main(dev_settings(), previous={})[0] is None
    more = dev_settings()
    more["tenants"].append({"name": "team-rl", "queue": more["tenants"][0]["queue"]})
    assert attempt_main(more, previous=world)[0] is None


def test_a_team_both_kept_and_removed_is_refused() -> None:
    config = dev_settings()
    config["vcluster"] = {**config.get("vcluster", {}), "removeTenants": [config["tenants"][0]["name"]]}
    error, run = attempt_main(config)
    assert error is not None
    assert "gpu-tenancy:tenants[0].name" in str(error)
    assert "removeTenants" in str(error)
    assert not run.registrations or all(r.type.startswith("pulumi:") for r in run.registrations)

"""Node ports at scale: every port set, none shared, and none moving when teams come and go."""

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from config.sources import load_settings
from config.types import NODE_PORT_RANGE
from config.vcluster_tenant.node_ports import PortRequest, TenantPorts, assign_node_ports, previous_ports
from harness import ProgramRun, dev_settings, run_main

RELEASE = "kubernetes:helm.sh/v3:Release"


def _requests(count: int, *, kubelet: bool = True) -> list[PortRequest]:
    return [PortRequest(f"team-{i:04d}", i, None, kubelet) for i in range(count)]


def _all_ports(ports: dict[str, TenantPorts]) -> list[int]:
    return [p for t in ports.values() for p in (t.https, t.kubelet) if p is not None]


@pytest.mark.parametrize("teams", [300, 1000])
def test_hundreds_of_teams_get_distinct_ports_with_none_set_by_hand(teams: int) -> None:
    assignment = assign_node_ports(_requests(teams), {})
    ports = _all_ports(assignment.ports)
    assert len(ports) == 2 * teams
    assert len(set(ports)) == len(ports)
    assert all(port in NODE_PORT_RANGE for port in ports)
    assert assignment.issues == []


def test_a_thousand_teams_pass_config_validation() -> None:
    config = dev_settings()
    config["queues"] = [{"name": "ml-org", "resources": {"gpu": {"quota": 1000}}}] + [
        {"name": f"team-{i:04d}", "parentQueue": "ml-org", "resources": {"gpu": {"quota": 1}}} for i in range(1000)
    ]
    config["tenants"] = [{"name": f"team-{i:04d}", "queue": f"team-{i:04d}"} for i in range(1000)]
    assert len(load_settings(config).tenants) == 1000


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    teams=st.integers(1, 400),
    added=st.integers(1, 5),
    removed=st.integers(0, 5),
)
def test_teams_that_come_and_go_move_no_one_else(teams: int, added: int, removed: int) -> None:
    before = assign_node_ports(_requests(teams), {})
    grown = _requests(teams + added)
    after = assign_node_ports(grown, before.ports)
    assert all(after.ports[t] == p for t, p in before.ports.items())
    assert after.moved == {}
    survivors = [r for r in grown if int(r.tenant.split("-")[1]) >= min(removed, teams - 1)]
    shrunk = assign_node_ports(survivors, after.ports)
    assert all(shrunk.ports[r.tenant] == after.ports[r.tenant] for r in survivors)
    assert len(set(_all_ports(after.ports))) == len(_all_ports(after.ports))


def test_a_user_set_port_wins_and_a_port_another_team_holds_is_an_error() -> None:
    before = assign_node_ports(_requests(3), {})
    taken = before.ports["team-0001"].https
    requests = [PortRequest("team-0000", 0, taken, True), *_requests(3)[1:]]
    after = assign_node_ports(requests, before.ports)
    (issue,) = after.issues
    assert issue.path == ("tenants", 0, "nodePort")
    assert "team-0001" in issue.message
    free = next(p for p in NODE_PORT_RANGE if p not in _all_ports(before.ports))
    moved = assign_node_ports([PortRequest("team-0000", 0, free, True), *_requests(3)[1:]], before.ports)
    assert moved.issues == []
    assert moved.ports["team-0000"].https == free
    assert set(moved.moved) == {"team-0000"}


def test_the_memory_survives_pulumis_floats_and_ignores_garbage() -> None:
    remembered = previous_ports(
        {"a": {"https": 31000.0, "kubelet": 31001.0}, "b": {"https": "x"}, "c": {"https": 80}, "d": 5}
    )
    assert remembered == {"a": TenantPorts(31000, 31001)}
    assert previous_ports(None) == {}


# --- through the real program ------------------------------------------------------------------------


def _service(run: ProgramRun, team: str) -> dict[str, Any]:
    service: dict[str, Any] = run.one(RELEASE, f"{team}-vcluster").inputs["values"]["controlPlane"]["service"]
    return service


@pytest.fixture(scope="module")
def dev_run() -> ProgramRun:
    return run_main(dev_settings())


def test_every_node_port_of_a_tenant_service_is_set_and_remembered(dev_run: ProgramRun) -> None:
    remembered = dev_run.exports["nodePorts"].value
    for team, ports in remembered.items():
        service = _service(dev_run, team)
        assert (service["httpsNodePort"], service["kubeletNodePort"]) == (ports["https"], ports["kubelet"])
        assert dev_run.exports["tenantEndpoints"].value[team] == f"https://198.51.100.7:{ports['https']}"
    assert len({p for ports in remembered.values() for p in ports.values()}) == 2 * len(remembered)


def _with_team(config: dict[str, Any], name: str) -> dict[str, Any]:
    for queue in config["queues"][1:]:
        queue["resources"]["gpu"]["quota"] = 0.25
    config["queues"].append({"name": name, "parentQueue": "ml-org", "resources": {"gpu": {"quota": 0.25}}})
    config["tenants"].append({"name": name, "queue": name})
    return config


def test_the_next_up_keeps_every_teams_endpoint_when_one_joins(dev_run: ProgramRun) -> None:
    previous = {"nodePorts": dev_run.exports["nodePorts"].value}
    bigger = run_main(_with_team(dev_settings(), "team-speech"), previous=previous)
    for team, ports in previous["nodePorts"].items():
        assert bigger.exports["nodePorts"].value[team] == ports
    assert not [w for w in bigger.warnings if "moves" in w]


def test_remembered_ports_win_over_where_the_hash_would_put_a_team(dev_run: ProgramRun) -> None:
    """E.g. ports that a stack's earlier version gave: the memory, not the hash, decides."""
    previous = {"nodePorts": {"team-nlp": {"https": 30001, "kubelet": 30002}}}
    run = run_main(dev_settings(), previous=previous)
    assert run.exports["nodePorts"].value["team-nlp"] == {"https": 30001, "kubelet": 30002}
    assert run.exports["tenantEndpoints"].value["team-nlp"] == "https://198.51.100.7:30001"


def test_a_move_is_a_warning_naming_the_team(dev_run: ProgramRun) -> None:
    """In a preview too: the memory's read has a known id once the stack exists, and the engine performs such reads
    in a preview (the harness previews only fresh stacks, whose memory is unknown)."""
    config = dev_settings()
    config["tenants"][1]["nodePort"] = 30007
    run = run_main(config, previous=dev_run.world_after())
    assert any("tenant team-vision's API moves" in w for w in run.warnings), run.warnings


def test_a_user_set_port_that_another_team_holds_ends_the_run() -> None:
    first = run_main(dev_settings())
    held = first.exports["nodePorts"].value["team-nlp"]["https"]
    config = dev_settings()
    config["tenants"][2]["nodePort"] = held
    with pytest.raises(Exception, match=r"gpu-tenancy:tenants\[2\]\.nodePort = \d+: is a node port tenant 'team-nlp'"):
        run_main(config, previous={"nodePorts": first.exports["nodePorts"].value})


def test_without_the_kubelet_proxy_a_tenant_takes_one_port() -> None:
    config = dev_settings()
    config["tenants"][0]["values"] = {"networking": {"advanced": {"proxyKubelets": {"byHostname": False}}}}
    run = run_main(config)
    assert "kubeletNodePort" not in _service(run, "team-nlp")
    assert run.exports["nodePorts"].value["team-nlp"]["kubelet"] is None


VIEWS_PORT = 30080
VIEWS_KEY = ("observability", "teamViewsNodePort")


@settings(max_examples=30, deadline=None)
@given(teams=st.integers(min_value=1, max_value=1200))
def test_no_new_team_takes_the_team_views_port(teams: int) -> None:
    assignment = assign_node_ports(_requests(teams), {}, {VIEWS_PORT: VIEWS_KEY})
    assert VIEWS_PORT not in _all_ports(assignment.ports)
    assert len(set(_all_ports(assignment.ports))) == 2 * teams


def test_a_team_that_held_the_team_views_port_before_is_an_error_naming_the_key() -> None:
    """A stack older than the team views may have given a team that port: neither may lose it silently."""
    assignment = assign_node_ports(_requests(2), {"team-0001": TenantPorts(VIEWS_PORT, 30081)}, {VIEWS_PORT: VIEWS_KEY})
    (issue,) = assignment.issues
    assert (issue.path, issue.value) == (VIEWS_KEY, VIEWS_PORT)
    assert "tenant 'team-0001' has held" in issue.message


def test_the_team_views_port_is_the_one_teams_are_told() -> None:
    run = run_main(dev_settings())
    (service,) = [
        r for r in run.of_type("kubernetes:core/v1:Service") if r.name == "observability-team-views-grafana-service"
    ]
    assert service.inputs["spec"]["ports"][0]["nodePort"] == VIEWS_PORT
    urls = {login["url"] for login in run.exports["teamViews"].value.values()}
    assert urls == {f"https://198.51.100.7:{VIEWS_PORT}"}
    previous = {"nodePorts": {"team-nlp": {"https": VIEWS_PORT, "kubelet": 30081}}}
    with pytest.raises(Exception, match=r"gpu-tenancy:observability\.teamViewsNodePort = 30080: is a node port tenant"):
        run_main(dev_settings(), previous=previous)

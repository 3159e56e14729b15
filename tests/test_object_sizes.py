"""Every object the program writes fits the API server at the largest size the docs advertise: 1,000 teams.

The limits, from the sources the lab builds (k8s.io/kubernetes v1.36.3, etcd v3.6.16):
- ConfigMap and Secret data: the values' total length at most `core.MaxSecretSize`, 1 MiB
  (pkg/apis/core/types.go; ValidateConfigMap and ValidateSecret in pkg/apis/core/validation/validation.go);
- annotations: keys and values together at most 256 KiB, on an object and on a pod template
  (`TotalAnnotationSizeLimitB`, k8s.io/apimachinery pkg/api/validation/objectmeta.go);
- a whole object: etcd refuses a request over 1.5 MiB (`DefaultMaxRequestBytes`, server/embed/config.go), below
  the API server's 3 MiB body limit (k8s.io/apiserver pkg/server/config.go);
- a Helm release: Helm keeps it in one Secret (gzipped, so its values uncompressed under 1 MiB is a bound).

Running the program at 1,000 teams takes a minute, so the suite runs it at two small sizes and extrapolates each
object's growth per team to 1,000; the objects that grow are then built at 1,000 teams and sent to the lab's real
API server, which decides.
"""

import base64
import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from components.observability.dashboards import dashboard_files
from components.observability.grafana_teams.reconcile import fill
from components.observability.team_dashboard import limit_literal, team_dashboard
from components.observability.team_objects import desired_state, grafana_ini, program_files, secret_state
from harness import ProgramRun, run_main, stack_with_teams
from harness.lab.apply import RELEASE, manifest
from harness.lab.kube import ApiError
from tests.lab import shared_lab

MIB = 1024 * 1024
DATA_LIMIT = MIB
ANNOTATIONS_LIMIT = 256 * 1024
OBJECT_LIMIT = MIB * 3 // 2
ADVERTISED_TEAMS = 1000
SMALL, LARGER = 20, 40


def _annotations(obj: Mapping[str, Any]) -> int:
    sizes = []
    for meta in (obj.get("metadata") or {}, ((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}):
        annotations = meta.get("annotations") or {}
        sizes.append(sum(len(key) + len(str(value).encode()) for key, value in annotations.items()))
    return max(sizes)


def _data(obj: Mapping[str, Any]) -> int:
    if obj.get("kind") == "ConfigMap":
        return sum(len(str(v).encode()) for v in (obj.get("data") or {}).values()) + sum(
            len(base64.b64decode(v)) for v in (obj.get("binaryData") or {}).values()
        )
    if obj.get("kind") == "Secret":
        return sum(len(base64.b64decode(v)) for v in (obj.get("data") or {}).values()) + sum(
            len(str(v).encode()) for v in (obj.get("stringData") or {}).values()
        )
    return 0


def measures(run: ProgramRun) -> dict[tuple[str, str], int]:
    """(resource name, what is measured) -> bytes, for every object and release the run registered."""
    found = {}
    for registration in run.registrations:
        if registration.type == RELEASE:
            found[(registration.name, "release values")] = len(json.dumps(registration.inputs.get("values") or {}))
            continue
        obj = manifest(registration)
        if obj is None:
            continue
        found[(registration.name, "object")] = len(json.dumps(obj))
        found[(registration.name, "annotations")] = _annotations(obj)
        found[(registration.name, "data")] = _data(obj)
    return found


LIMITS = {"object": OBJECT_LIMIT, "annotations": ANNOTATIONS_LIMIT, "data": DATA_LIMIT, "release values": MIB}


def at_advertised_size(small: Mapping[tuple[str, str], int], larger: Mapping[tuple[str, str], int]) -> Iterator[Any]:
    """Each measure of an object both runs hold, extrapolated linearly to 1,000 teams: (key, per team, predicted)."""
    for key in sorted(small.keys() & larger.keys()):
        per_team = (larger[key] - small[key]) / (LARGER - SMALL)
        yield key, per_team, larger[key] + per_team * (ADVERTISED_TEAMS - LARGER)


@pytest.fixture(scope="module")
def growth() -> list[Any]:
    small, larger = (measures(run_main(stack_with_teams(teams))) for teams in (SMALL, LARGER))
    return list(at_advertised_size(small, larger))


def test_no_object_grows_past_the_api_servers_limits_at_a_thousand_teams(growth: list[Any]) -> None:
    too_large = [
        f"{name} {what}: {predicted / 1024:.0f} KiB at {ADVERTISED_TEAMS} teams ({per_team:.0f} bytes a team), "
        f"over {LIMITS[what] // 1024} KiB"
        for (name, what), per_team, predicted in growth
        if predicted > LIMITS[what]
    ]
    assert too_large == []


def test_what_grows_with_the_teams_is_known(growth: list[Any]) -> None:
    """The objects whose size follows the team list: the ones the lab test below builds at 1,000 teams. A new one
    is added there, or made not to grow. An entry per team costs at least a byte a team; a team's own release,
    whose quota is sized to the organisation's GPUs when its queue has no limit, only gains a digit now and then."""
    growing = {name for (name, what), per_team, _ in growth if per_team >= 1 and what != "annotations"}
    assert growing == {
        "observability-team-views-config",
        "observability-team-views-secret",
        "observability-dashboards",
        "node-ports-write",
    }


def test_a_team_dashboard_from_the_template_is_the_one_rendered_for_the_team() -> None:
    state = desired_state({"team-a": "t-a", "team-b": "t-b"}, {"team-a": 2.5, "team-b": -1}, 1.2, "http://proxy")
    by_team = {team["name"]: team for team in state["teams"]}
    for team, limit in (("team-a", 2.5), ("team-b", -1)):
        literal = limit_literal(limit)
        template = state["dashboards"]["unlimited" if literal is None else "limited"]
        assert by_team[team]["limit"] == literal
        assert fill(template, team, literal) == team_dashboard(team, limit=literal, price=1.2)


def _teams(count: int) -> tuple[dict[str, str], dict[str, float]]:
    names = [f"team-{index:04d}" for index in range(count)]
    return {name: f"tenant-{name}" for name in names}, {name: float(index % 7) - 1 for index, name in enumerate(names)}


def _advertised_objects() -> list[dict[str, Any]]:
    """The objects that grow with the teams, as the program renders them at 1,000 teams."""
    namespaces, limits = _teams(ADVERTISED_TEAMS)
    state = json.dumps(desired_state(namespaces, limits, 2.5, "http://gpu-tenancy-label-proxy:8080"), indent=1)
    password = "x" * 24
    secrets = secret_state("a" * 32, dict.fromkeys(namespaces, password), namespaces)
    ports = {name: {"https": 30000 + 2 * i, "kubelet": 30001 + 2 * i} for i, name in enumerate(namespaces)}

    def config_map(name: str, data: dict[str, str]) -> dict[str, Any]:
        metadata = {"name": name, "namespace": "default"}
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}

    return [
        config_map("team-views", {"state.json": state, "grafana.ini": grafana_ini(), **program_files()}),
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "team-views", "namespace": "default"},
            "stringData": {"secrets.json": secrets, "admin-password": "a" * 32},
        },
        config_map("dashboards", dashboard_files(sorted(namespaces), limits)),
        config_map("node-ports", {"ports.json": json.dumps(ports, sort_keys=True)}),
    ]


def test_the_growing_objects_at_a_thousand_teams_are_accepted_by_the_real_api_server() -> None:
    lab = shared_lab()
    for obj in _advertised_objects():
        assert _data(obj) < DATA_LIMIT
        lab.admin.create(obj, dry_run=True)


def test_the_real_api_server_refuses_data_one_byte_over_a_mebibyte() -> None:
    """The limit the extrapolation holds objects to is the API server's own."""
    lab = shared_lab()
    at_limit = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "at-limit", "namespace": "default"}}
    lab.admin.create({**at_limit, "data": {"a": "x" * DATA_LIMIT}}, dry_run=True)
    with pytest.raises(ApiError) as refused:
        lab.admin.create({**at_limit, "data": {"a": "x" * (DATA_LIMIT + 1)}}, dry_run=True)
    assert refused.value.code == 422
    assert f"may not be more than {DATA_LIMIT} bytes" in str(refused.value)

"""What a stack change takes from teams, as a pull request's plan says it: each change the program turns into a
lost team's data or access is named with its key, data first, and changes that take nothing say nothing."""

from collections.abc import Callable
from typing import Any

import pytest

from config.changes import Hazard, hazards
from config.sources import load_settings
from harness.stacks import dev_settings

Settings = dict[str, Any]

SSH_HOST = {"mode": "ssh", "address": "203.0.113.10", "clusterId": "gpu-prod"}
OIDC = {"issuerUrl": "https://login.example.com", "clientId": "gpu-tenancy", "addresses": ["203.0.113.0/28"]}


def _ssh(settings: Settings) -> None:
    settings["host"] = dict(SSH_HOST)


def _sni(settings: Settings) -> None:
    settings["vcluster"] = {"expose": "sni", "domain": "gpu.example.com"}
    settings["host"] = dict(SSH_HOST)


def _members(settings: Settings) -> None:
    settings["tenants"][1]["members"] = ["alice", "bob"]


def _groups(settings: Settings) -> None:
    settings["vcluster"] = {"oidc": OIDC}
    settings["tenants"][1]["groups"] = ["vision-admins", "vision-interns"]


def _set(*path: Any, value: Any) -> Callable[[Settings], None]:
    def change(settings: Settings) -> None:
        node = settings
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value

    return change


def _drop_tenant(name: str, *, remove: bool) -> Callable[[Settings], None]:
    def change(settings: Settings) -> None:
        settings["tenants"] = [t for t in settings["tenants"] if t["name"] != name]
        if remove:
            settings.setdefault("vcluster", {})["removeTenants"] = [name]

    return change


def _rename_tenant(settings: Settings) -> None:
    settings["tenants"][2]["name"] = "team-recsys"
    settings.setdefault("vcluster", {})["removeTenants"] = ["team-recommender"]


def _both(*changes: Callable[[Settings], None]) -> Callable[[Settings], None]:
    def change(settings: Settings) -> None:
        for each in changes:
            each(settings)

    return change


def _nothing(settings: Settings) -> None:
    return None


CASES: list[tuple[str, Callable[[Settings], None], Callable[[Settings], None], list[tuple[str, str, bool]]]] = [
    # (case, the base's setup, the change, [(key, words of what it says, whether data goes)])
    (
        "brev-instance-renamed",
        _nothing,
        _set("host", "name", value="gpu-tenancy-dev2"),
        [
            (
                "host.name",
                "identity changes from brev/gpu-tenancy-dev to brev/gpu-tenancy-dev2: the Kubernetes provider's "
                "clusterIdentifier changes",
                True,
            )
        ],
    ),
    ("ssh-cluster-id", _ssh, _set("host", "clusterId", value="gpu-prod-2"), [("host.clusterId", "gpu-prod-2", True)]),
    ("brev-to-ssh", _nothing, _ssh, [("host.mode", "from brev/gpu-tenancy-dev to gpu-prod", True)]),
    (
        "tenant-removed-by-name",
        _nothing,
        _drop_tenant("team-vision", remove=True),
        [("vcluster.removeTenants", "tenant team-vision is deleted: its host namespace", True)],
    ),
    (
        "tenant-dropped-without-its-name",
        _nothing,
        _drop_tenant("team-vision", remove=False),
        [("tenants", "`pulumi up` will stop before deleting anything", False)],
    ),
    (
        "tenant-renamed",
        _nothing,
        _rename_tenant,
        [("vcluster.removeTenants", "team-recsys takes its queue: a renamed team is a new one", True)],
    ),
    (
        "member-removed",
        _members,
        _set("tenants", 1, "members", value=["alice"]),
        [("tenants[1].members", "tenant team-vision loses member bob: their token", False)],
    ),
    (
        "group-removed",
        _groups,
        _set("tenants", 1, "groups", value=["vision-admins"]),
        [("tenants[1].groups", "loses group vision-interns", False)],
    ),
    (
        "node-port-set",
        _nothing,
        _set("tenants", 0, "nodePort", value=30500),
        [("tenants[0].nodePort", "team-nlp's API moves from the host's address, node port (assigned) to", False)],
    ),
    (
        "ssh-address-moves",
        _ssh,
        _set("host", "address", value="203.0.113.11"),
        [("host.address", "moves from 203.0.113.10, node port (assigned) to 203.0.113.11", False)] * 3,
    ),
    (
        "sni-domain",
        _sni,
        _set("vcluster", "domain", value="gpu.example.org"),
        [("vcluster.domain", "to its own hostname under gpu.example.org", False)] * 3,
    ),
    (
        "expose-mode",
        _ssh,
        _sni,
        [("vcluster.expose", "tenant team-nlp's API moves from 203.0.113.10", False)]
        + [("vcluster.expose", "its own hostname", False)] * 2,
    ),
    (
        "team-views-off",
        _nothing,
        _set("observability", "teamViews", value=False),
        [("observability.teamViews", "every member's login to them are deleted", False)],
    ),
    (
        "team-views-port",
        _nothing,
        _set("observability", "teamViewsNodePort", value=30081),
        [("observability.teamViewsNodePort", "from node port 30080 to 30081", False)],
    ),
    (
        "data-before-access",
        _members,
        _both(_set("tenants", 1, "members", value=[]), _drop_tenant("team-nlp", remove=True)),
        [
            ("vcluster.removeTenants", "team-nlp is deleted", True),
            ("tenants[0].members", "loses member alice", False),
            ("tenants[0].members", "loses member bob", False),
        ],
    ),
]


@pytest.mark.parametrize(("setup", "change", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_change_that_takes_a_teams_data_or_access_is_named(
    setup: Callable[[Settings], None], change: Callable[[Settings], None], expected: list[tuple[str, str, bool]]
) -> None:
    base = dev_settings()
    setup(base)
    head = dev_settings()
    setup(head)
    change(head)
    found = hazards(load_settings(base), load_settings(head))
    assert [(h.key, h.data) for h in found] == [(f"gpu-tenancy:{key}", data) for key, _, data in expected]
    for hazard, (_, words, _) in zip(found, expected, strict=True):
        assert words in hazard.what, hazard.what


def _add_member(settings: Settings) -> None:
    settings["tenants"][0]["members"] = ["carol"]


def _add_tenant(settings: Settings) -> None:
    settings["queues"].append({"name": "team-speech", "parentQueue": "ml-org", "resources": {"gpu": {"quota": 0}}})
    settings["tenants"].append({"name": "team-speech", "queue": "team-speech"})


@pytest.mark.parametrize(
    "change",
    [
        _add_member,
        _add_tenant,
        _set("queues", 1, "resources", "gpu", "quota", value=0.2),
        _set("versions", "vcluster", value="0.35.2"),
        _set("vcluster", "persistenceSize", value="10Gi"),
        _set("host", "workers", value=1),
        _set("host", "expect", "minGpuMemoryMiB", value=40000),
    ],
    ids=["member-added", "tenant-added", "quota", "vcluster-upgrade", "persistence-size", "worker-added", "expect"],
)
def test_a_change_that_takes_nothing_from_a_team_says_nothing(change: Callable[[Settings], None]) -> None:
    base, head = dev_settings(), dev_settings()
    head.setdefault("vcluster", {})
    change(head)
    assert hazards(load_settings(base), load_settings(head)) == []


def test_a_changed_cluster_says_so_once_not_once_per_kubeconfig() -> None:
    """Another identity replaces every kubeconfig; each team's moved endpoint would only repeat it."""
    base, head = dev_settings(), dev_settings()
    _ssh(base)
    head["host"] = {**SSH_HOST, "address": "203.0.113.99", "clusterId": "gpu-prod-2"}
    found = hazards(load_settings(base), load_settings(head))
    assert found == [Hazard("gpu-tenancy:host.clusterId", found[0].what, data=True)]

"""Ordinary changes to a long-lived stack, planned as the engine would plan them: what is replaced, updated and
deleted, in which order, and that no tenant's data, port or credential is lost on the way.

Pulumi's mocks record what the program registers, not what `pulumi up` then does to the state; the engine's
rules that decide it (ignoreChanges, replaceOnChanges, create-before-delete, a provider replaced on a new
clusterIdentifier) are reproduced in tests/engine_rules.py from their source. Each row runs the program twice, the
second time finding what the first left behind (the node-port memory on the host, a Brev instance that moved),
and plans the step between them.
"""

import copy
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from harness import FAKE_HOST_KEY, ProgramRun, dev_settings, run_main
from harness.mocks import COMMAND_STDOUT
from tests.conftest import FAKE_KUBECONFIG
from tests.engine_rules import Step, plan
from tests.fake_host import FakeHost, fake_host

Json = dict[str, Any]
SSH_KEY = {"sshPrivateKey": FAKE_HOST_KEY}
KUBECONFIG = {"kubeconfig": FAKE_KUBECONFIG}
TEAMS = ("team-nlp", "team-vision", "team-recommender")
NAMESPACE = "kubernetes:core/v1:Namespace"
RELEASE = "kubernetes:helm.sh/v3:Release"


def _brev(config: Json) -> Json:
    return config


def _ssh(config: Json, address: str = "203.0.113.20", **extra: Any) -> Json:
    config["host"] = {"mode": "ssh", "address": address, **extra}
    return config


def _kubeconfig(config: Json, address: str = "203.0.113.30") -> Json:
    config["host"] = {"mode": "kubeconfig", "address": address}
    return config


def _sni(config: Json) -> Json:
    config["vcluster"] = {"expose": "sni", "domain": "gpu.example.com"}
    return config


@dataclass(frozen=True)
class Change:
    """Two `up`s of one stack: `first`, then `then`, which finds what `first` left (and `moved`, if anything)."""

    first: Callable[[Json], Json]
    then: Callable[[Json], Json]
    secrets: Json = field(default_factory=dict)
    moved: Json = field(default_factory=dict)
    """What changed in the world between the two (e.g. the Brev instance's new address)."""
    remembered: Json = field(default_factory=dict)
    """The node-port memory the first `up` finds (e.g. ports an earlier version gave)."""

    def runs(self) -> tuple[ProgramRun, ProgramRun]:
        before = run_main(self.first(dev_settings()), self.secrets, previous=self.remembered)
        after = run_main(self.then(dev_settings()), self.secrets, previous={**before.world_after(), **self.moved})
        return before, after


def _gpu(config: Json) -> Json:
    config["host"]["gpuName"] = "H100"
    return config


def _renamed(config: Json) -> Json:
    config["host"]["name"] = "gpu-tenancy-dev-2"
    return config


CHANGES = {
    "brev-spec": Change(_brev, _gpu),
    "brev-address-moved": Change(_brev, _brev, moved={"brevAddress": "198.51.100.99"}),
    "ssh-address-with-cluster-id": Change(
        lambda c: _ssh(c, clusterId="ssh/203.0.113.20"),
        lambda c: _ssh(c, "gpu-1.example.com", clusterId="ssh/203.0.113.20"),
        SSH_KEY,
    ),
    "ssh-cluster-id-set-to-the-default": Change(_ssh, lambda c: _ssh(c, clusterId="ssh/203.0.113.20"), SSH_KEY),
    "kubeconfig-address": Change(_kubeconfig, lambda c: _kubeconfig(c, "203.0.113.31"), KUBECONFIG),
    "to-sni": Change(_brev, _sni, remembered={"nodePorts": {"team-nlp": {"https": 30001, "kubelet": 30002}}}),
    "failed-first-up-then-good": Change(_brev, _brev),
}
"""Each must keep every tenant's namespace, vCluster (its data) and port, and replace nothing."""


def _ops(steps: list[Step], op: str) -> list[str]:
    return [step.name for step in steps if step.op == op]


@dataclass(frozen=True)
class Expected:
    updated: set[str]
    """Exactly what is updated in place; nothing is deleted."""
    replaced: set[str] = field(default_factory=set)
    """Exactly what is replaced (created anew, the old one deleted once the update is done)."""


TEAM_VIEWS_CERTIFICATE = "observability-team-views-tls"
ADDRESS_MOVED = {
    "host-preflight",
    "host-microk8s",
    "host-kubelet",
    "host-addons",
    "host-kubeconfig",
    "host-gpu-operator-check",
    "host-drift-check",
    "host-cluster",
    *(f"{team}-vcluster" for team in TEAMS),
    *(f"{team}-workloads" for team in TEAMS),
}
"""What a move of the host's address updates in place."""
NEW_CERTIFICATE = {"observability-team-views-secret", "observability-team-views-grafana"}
"""What a new team views certificate updates: the Secret that holds it, and Grafana's pod, which serves it."""


EXPECTED = {
    # The instance's update runs first and refuses the change (test below), so the preflight, which would check
    # for the new GPU, never runs.
    "brev-spec": Expected({"host-brev-instance", "host-preflight"}),
    # Every step on the machine reconnects; every endpoint, SAN and kubeconfig follows the address, and the team
    # views' certificate, which names it, is replaced: its Secret takes the new one and the team Grafana rolls.
    "brev-address-moved": Expected({*ADDRESS_MOVED, *NEW_CERTIFICATE}, replaced={TEAM_VIEWS_CERTIFICATE}),
    "ssh-address-with-cluster-id": Expected({*ADDRESS_MOVED, *NEW_CERTIFICATE}, replaced={TEAM_VIEWS_CERTIFICATE}),
    "ssh-cluster-id-set-to-the-default": Expected(set()),
    "kubeconfig-address": Expected(
        {*(f"{team}-vcluster" for team in TEAMS), *(f"{team}-workloads" for team in TEAMS), *NEW_CERTIFICATE},
        replaced={TEAM_VIEWS_CERTIFICATE},
    ),
    "to-sni": Expected({"host-addons", *(f"{team}-vcluster" for team in TEAMS)}),
    # The next `up` after one that failed once the memory was written: the same ports, nothing to do.
    "failed-first-up-then-good": Expected(set()),
}


@pytest.mark.parametrize("name", CHANGES)
def test_an_ordinary_change_deletes_nothing_and_changes_only_what_it_must(name: str) -> None:
    before, after = CHANGES[name].runs()
    steps = plan(before, after)
    expected = EXPECTED[name]
    assert set(_ops(steps, "replace")) == expected.replaced
    # A replacement's old half is deleted after the update; nothing else is.
    assert [s for s in _ops(steps, "delete") if not s.endswith("-route") and s not in expected.replaced] == []
    updated = {s for s in _ops(steps, "update") if not s.startswith("node-ports-")}
    assert updated == expected.updated


@pytest.mark.parametrize("name", CHANGES)
def test_no_tenant_loses_its_port_or_its_credential(name: str) -> None:
    before, after = CHANGES[name].runs()
    assert after.exports["tenantKubeconfigs"].secret
    assert set(after.exports["tenantKubeconfigs"].value) == set(TEAMS)
    if before.exports["nodePorts"].value and after.exports["nodePorts"].value:
        assert after.exports["nodePorts"].value == before.exports["nodePorts"].value
    remembered = after.world_after()["nodePorts"]
    assert set(remembered) == set(TEAMS), "the memory keeps every team's ports, exposed by them or not"


def test_a_switch_to_sni_and_back_gives_every_team_its_port_again() -> None:
    """Ports an earlier version gave (not where the hash would put them) come back after a while on sni."""
    earlier = {"nodePorts": {"team-nlp": {"https": 30001, "kubelet": 30002}}}
    node_port = run_main(dev_settings(), previous=earlier)
    sni = run_main(_sni(dev_settings()), previous=node_port.world_after())
    back = run_main(dev_settings(), previous=sni.world_after())
    assert back.exports["nodePorts"].value == node_port.exports["nodePorts"].value
    assert back.exports["nodePorts"].value["team-nlp"] == {"https": 30001, "kubelet": 30002}
    assert not [w for w in back.warnings if "moves" in w]
    steps = plan(sni, back)
    assert _ops(steps, "replace") == []
    assert sorted(_ops(steps, "delete")) == [f"{team}-route" for team in sorted(TEAMS)]


def test_after_a_failed_first_up_a_port_that_is_taken_stays_taken() -> None:
    """The first `up` wrote the memory, then failed: its outputs were never saved. A port set for another team in
    the meantime is still refused, naming the team that holds it on the cluster."""
    first = run_main(dev_settings())
    held = first.world_after()["nodePorts"]["team-nlp"]["https"]
    config = dev_settings()
    config["tenants"][1]["nodePort"] = held
    with pytest.raises(Exception, match=r"tenants\[1\]\.nodePort = \d+: is a node port tenant 'team-nlp'"):
        run_main(config, previous=first.world_after())


def test_the_memory_reads_back_no_credential() -> None:
    """Only the ports are read back: no StackReference, whose state would hold every output, kubeconfigs included."""
    run = run_main(dev_settings())
    assert not [r for r in run.registrations if r.type == "pulumi:pulumi:StackReference"]
    (read,) = [r for r in run.registrations if r.read and r.type == "kubernetes:core/v1:ConfigMap"]
    assert read.import_id == "kube-system/gpu-tenancy-node-ports"


# --- the changes that replace, and what they take with them ---------------------------------------------------


def test_a_new_brev_name_builds_the_cluster_anew_and_deletes_the_old_instance_last() -> None:
    """Create-before-delete: the new instance and everything on it first; the old cluster's objects, then its
    steps, then the instance, at the end."""
    before = run_main(dev_settings())
    after = run_main(_renamed(dev_settings()), previous=before.world_after())
    steps = plan(before, after)
    replaced = set(_ops(steps, "replace"))
    assert {"host-brev-instance", "host-cluster", *(f"{team}-namespace" for team in TEAMS)} <= replaced
    deletes = _ops(steps, "delete")
    assert deletes[-1] == "host-brev-instance"
    assert {"host-cluster", "team-nlp-vcluster", "team-nlp-namespace"} <= set(deletes[:-1])


def test_a_new_ssh_address_without_a_cluster_id_replaces_every_tenant() -> None:
    """Why host.clusterId exists: the default identity is the address."""
    before = run_main(_ssh(dev_settings()), SSH_KEY)
    after = run_main(_ssh(dev_settings(), "gpu-1.example.com"), SSH_KEY, previous=before.world_after())
    replaced = set(_ops(plan(before, after), "replace"))
    assert {"host-cluster", *(f"{team}-namespace" for team in TEAMS), *(f"{team}-vcluster" for team in TEAMS)} <= (
        replaced
    )


# --- a Brev spec change, on the stand-in machine --------------------------------------------------------------


def _instance(run: ProgramRun) -> Any:
    (instance,) = [r for r in run.registrations if r.name == "host-brev-instance"]
    return instance


def _stand_in(tmp_path: Any) -> FakeHost:
    host = fake_host(tmp_path)
    host.brev_instances(gpu_tenancy_dev="RUNNING")
    host.state["PULUMI_COMMAND_STDOUT"] = COMMAND_STDOUT["brev-instance"].replace(
        "inst-0123456789", "id-gpu-tenancy-dev"
    )
    return host


def _run_local(host: FakeHost, script_text: str) -> Any:
    """A local command's script text as the program registered it, run by /bin/sh (dash) on the stand-in."""
    env = {"PATH": f"{host.root / 'bin'}:/usr/bin:/bin", "HOME": str(host.root), "FAKE_LOG": str(host.log)}
    env.update(FAKE_BREV=str(host.root / "fake-brev.py"), FAKE_BREV_STATE=str(host.root / "brev.json"), **host.state)
    return subprocess.run(["dash", "-c", script_text], env=env, capture_output=True, text=True, check=False)


def test_a_brev_spec_change_is_an_update_that_refuses_and_keeps_the_cluster(tmp_path: Any) -> None:
    before, after = CHANGES["brev-spec"].runs()
    steps = plan(before, after)
    assert [s for s in steps if s.name == "host-brev-instance"] == [
        Step("update", "host-brev-instance", "command:local:Command")
    ]
    host = _stand_in(tmp_path)
    result = _run_local(host, _instance(after).inputs["update"])
    assert result.returncode != 0
    assert "gpu-tenancy:host.gpuName" in result.stderr
    assert host.brev_state() == {"gpu-tenancy-dev": "RUNNING"}


def test_without_the_ignored_triggers_the_same_change_would_delete_the_live_instance(tmp_path: Any) -> None:
    """The fault this guards against: triggers replace create-before-delete; the new resource finds the instance by
    name, and the old one's delete removes it."""
    before, after = CHANGES["brev-spec"].runs()
    unguarded = copy.deepcopy(after)
    for registration in unguarded.registrations:
        if registration.name == "host-brev-instance":
            registration.ignore_changes.clear()
    steps = plan(before, unguarded)
    assert Step("replace", "host-brev-instance", "command:local:Command") in steps
    old = _instance(before)
    host = _stand_in(tmp_path)
    delete = old.inputs["delete"].replace("DELETE_ON_DESTROY=false", "DELETE_ON_DESTROY=true")
    assert _run_local(host, delete).returncode == 0
    assert host.brev_state() == {}, "the live cluster's machine is gone"


def test_an_upgrade_from_a_version_that_stored_the_spec_as_triggers_replaces_nothing() -> None:
    before = run_main(dev_settings())
    assert _instance(before).inputs["triggers"] == ["gpu-tenancy-dev", "L40S", "nebius", ""]
    assert not _ops(plan(before, run_main(dev_settings(), previous=before.world_after())), "replace")

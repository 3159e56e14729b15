"""The stack's whole life under mocks: a fresh preview, a second `up`, each setting changed, teams added and
removed, and what `destroy` deletes in which order."""

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from harness import FAKE_HOST_KEY, ProgramRun, Registration, dev_settings, is_unknown, run_main
from tests.charts import render
from tests.conftest import FAKE_KUBECONFIG
from tests.engine_rules import create_over_existing, plan
from tests.stacks import releases

RELEASE = "kubernetes:helm.sh/v3:Release"
NAMESPACE = "kubernetes:core/v1:Namespace"
PROVIDER = "pulumi:providers:kubernetes"
TEAMS = ("team-nlp", "team-vision", "team-recommender")

Config = dict[str, Any]


def _with_addon(config: Config) -> Config:
    config["tenants"][0]["addons"] = [
        {"name": "kuberay", "chart": {"repo": "https://example.com/charts", "chart": "kuberay", "version": "1.4.2"}}
    ]
    return config


MODES: dict[str, tuple[Callable[[Config], Config], dict[str, str]]] = {
    "brev": (lambda c: c, {}),
    "ssh": (lambda c: {**c, "host": {"mode": "ssh", "address": "203.0.113.20"}}, {"sshPrivateKey": FAKE_HOST_KEY}),
    "kubeconfig": (
        lambda c: {**c, "host": {"mode": "kubeconfig", "address": "203.0.113.30"}},
        {"kubeconfig": FAKE_KUBECONFIG},
    ),
}


def _run(
    mode: str = "brev", change: Callable[[Config], Any] | None = None, *, preview: bool = False, shared: bool = True
) -> ProgramRun:
    """The stack in `mode`: its first `up` (or a fresh preview), or, with a change or unshared, the next `up` after
    that first one, finding what it left on the host."""
    shape, secrets = MODES[mode]
    config = shape(_with_addon(dev_settings()))
    if change:
        change(config)
    first = preview or (change is None and shared)
    previous = {} if first else _run(mode).world_after()
    return run_main(config, secrets, preview=preview, shared=shared, previous=previous)


@pytest.fixture(scope="module")
def base() -> ProgramRun:
    return _run()


# --- a preview of a fresh stack ------------------------------------------------------------------


@pytest.fixture(scope="module", params=list(MODES))
def fresh_preview(request: pytest.FixtureRequest) -> tuple[str, ProgramRun]:
    return request.param, _run(request.param, preview=True)


def test_a_fresh_preview_registers_the_whole_stack(fresh_preview: tuple[str, ProgramRun]) -> None:
    mode, preview = fresh_preview
    up = _run(mode)
    assert {(r.type, r.name) for r in preview.registrations} == {(r.type, r.name) for r in up.registrations}


def test_a_fresh_preview_reads_nothing_that_does_not_exist_yet(fresh_preview: tuple[str, ProgramRun]) -> None:
    """A read with a known id is performed during preview, and fails against an object no one created yet."""
    _, preview = fresh_preview
    # The stack's reference to itself is the exception: `pulumi stack init` made the stack.
    reads = [r for r in preview.registrations if r.read and r.type != "pulumi:pulumi:StackReference"]
    assert reads, "the stack reads the tenants' kubeconfigs"
    for read in reads:
        assert read.import_id == "04da6b54-80e4-46f7-96ec-b56ff0331ba9", f"{read.name} reads {read.import_id}"


def test_every_provider_keeps_its_identity_when_its_kubeconfig_is_unknown(
    fresh_preview: tuple[str, ProgramRun],
) -> None:
    """Without a known cluster_identifier, an unknown kubeconfig replaces the provider and all it manages."""
    _, preview = fresh_preview
    for provider in preview.of_type(PROVIDER):
        assert isinstance(provider.inputs.get("clusterIdentifier"), str), provider.name


def test_a_fresh_preview_knows_what_a_replacement_would_hinge_on(fresh_preview: tuple[str, ProgramRun]) -> None:
    """Helm releases replace on name and namespace; fixed-name objects replace on their name."""
    _, preview = fresh_preview
    for release in preview.of_type(RELEASE):
        assert not is_unknown(release.inputs["name"]), release.name
        assert not is_unknown(release.inputs["namespace"]), release.name


def test_credentials_are_secret_even_before_they_exist(fresh_preview: tuple[str, ProgramRun]) -> None:
    _, preview = fresh_preview
    for key in ("hostKubeconfig", "tenantKubeconfigs"):
        exported = preview.exports[key]
        assert exported.secret, key


# --- a second `up` and changes ---------------------------------------------------------------------


def _state(run: ProgramRun, *, dependencies: bool = True) -> dict[tuple[str, str], Any]:
    by_urn = {r.urn: r.name for r in run.registrations}
    return {
        (r.type, r.name): (
            r.inputs,
            sorted(by_urn.get(d, d) for d in r.dependencies) if dependencies else (),
            r.provider.split("::")[-1],
            r.delete_before_replace,
            r.ignore_changes,
            r.additional_secret_outputs,
        )
        for r in run.registrations
        # A read follows what it reads; it is not a resource anyone diffs or deletes.
        if not r.read
    }


def _changed(
    before: ProgramRun, after: ProgramRun, *, dependencies: bool = True
) -> tuple[set[str], set[str], set[str]]:
    """Names of resources added, removed and changed between two runs. Without `dependencies`, as the engine steps:
    with the same inputs it takes a same step and only records new dependencies (step_generator.go)."""
    old, new = _state(before, dependencies=dependencies), _state(after, dependencies=dependencies)
    added = {name for (_, name) in new.keys() - old.keys()}
    removed = {name for (_, name) in old.keys() - new.keys()}
    changed = {name for (kind, name) in old if (kind, name) in new and old[kind, name] != new[kind, name]}
    return added, removed, changed


def test_a_second_up_with_no_change_changes_nothing(base: ProgramRun) -> None:
    second = _run(shared=False)
    assert second is not base
    assert _changed(base, second) == (set(), set(), set())


def _set(path: str, value: Any) -> Callable[[Config], None]:
    def change(config: Config) -> None:
        *parents, last = path.split(".")
        node: Any = config
        for key in parents:
            node = node[int(key)] if key.isdigit() else node.setdefault(key, {})
        node[last] = value

    return change


DASHBOARDS = "observability-dashboards"
TEAM_VIEWS_STATE = {"observability-team-views-config", "observability-team-views-grafana"}
GATES = {"host-gpu-gate", "kai-gate", *(f"{team}-ready" for team in TEAMS)}
BOOTSTRAP_AFTER_CHANNEL = {"host-preflight", "host-microk8s", "host-kubelet", "host-addons", "host-kubeconfig"}

CHANGES = [
    ("versions.kaiScheduler", "v0.17.0", {"kai-release", "kai-gate"}),
    ("versions.vcluster", "0.35.2", {f"{team}-vcluster" for team in TEAMS}),
    ("versions.gpuOperator", "v26.3.4", {"host-gpu-operator-check", "host-gpu-operator", "host-gpu-gate"}),
    (
        "versions.microk8s",
        "1.37/stable",
        {*BOOTSTRAP_AFTER_CHANNEL, "host-gpu-operator-check", "host-gpu-gate", "host-drift-check"},
    ),
    # The gates' image, and kube-prometheus-stack's CRD upgrade job's.
    ("versions.kubectl", "v1.36.1", {*GATES, "observability-stack"}),
    # The team dashboards draw each queue's limit, which no metric carries; the team views' Grafana rebuilds.
    ("queues.1.resources.gpu.limit", 0.5, {"queues-team-nlp", DASHBOARDS, *TEAM_VIEWS_STATE}),
    ("observability.pricePerGpuHour", 2.5, TEAM_VIEWS_STATE),
    # KAI's scheduler config comes from the shard: its gate runs again once the operator has rolled the scheduler.
    ("fairness.timeBased", True, {"kai-shard", "kai-gate"}),
    # With time-based fairness off, its settings reach nothing.
    ("fairness.kValue", 3, set()),
    ("versions.grafana", "13.2.1", {"observability-team-views-grafana"}),
    ("versions.promLabelProxy", "v0.14.1", {"observability-team-views-proxy"}),
    ("queues.2.priority", 50, {"queues-team-vision"}),
    ("kaiScheduler.readyTimeoutSeconds", 1200, {"kai-gate"}),
    ("kaiScheduler.values", {"scheduler": {"replicas": 2}}, {"kai-release", "kai-gate"}),
    ("gpuOperator.values", {"dcgmExporter": {"enabled": False}}, {"host-gpu-operator", "host-gpu-gate"}),
    ("gpuGate.timeoutSeconds", 1200, {"host-gpu-gate"}),
    ("vcluster.readyTimeoutSeconds", 1200, {f"{team}-ready" for team in TEAMS}),
    ("vcluster.persistenceSize", "10Gi", {f"{team}-vcluster" for team in TEAMS}),
    ("host.deleteOnDestroy", True, {"host-brev-instance"}),
    ("observability.retentionDays", 60, {"observability-stack"}),
    ("versions.kubePrometheusStack", "88.6.0", {"observability-stack"}),
    ("host.expect.minGpuMemoryMiB", 40000, {"host-preflight"}),
    (
        "tenants.1.values",
        {"controlPlane": {"statefulSet": {"resources": {"limits": {"memory": "4Gi"}}}}},
        {"team-vision-vcluster"},
    ),
    ("tenants.2.nodePort", 30123, {"team-recommender-vcluster", "node-ports-write"}),
    # What the shared admission policy reads of a team lives on its namespace: a change touches only that.
    (
        "vcluster.minGpuFraction",
        0.1,
        {f"{team}-namespace" for team in TEAMS},
    ),
    ("vcluster.priorityClasses", ["train", "inference"], {f"{team}-namespace" for team in TEAMS}),
    ("tenants.0.maxFractionDevices", 2, {"team-nlp-namespace"}),
    # The configured minimum; the policy raises it to 0.05 of the largest GPU where that is more.
    ("tenants.1.minGpuMemoryMiB", 4096, {"team-vision-namespace"}),
    # The fence is the platform's NetworkPolicies, not the releases' values: no vCluster restarts for it.
    ("vcluster.blockedEgress", ["192.0.2.0/24"], {f"{team}-workloads" for team in TEAMS}),
    # Each machine's kubelet arguments, and nothing else: kubelite restarts there.
    ("host.kubelet.podMaxPids", 8192, {"host-kubelet", "host-drift-check"}),
    ("host.kubelet.evictionHard", {"nodefs.available": "15%"}, {"host-kubelet", "host-drift-check"}),
]


@pytest.mark.parametrize(("path", "value", "expected"), CHANGES, ids=[c[0] for c in CHANGES])
def test_each_setting_changes_only_what_it_governs(base: ProgramRun, path: str, value: Any, expected: set[str]) -> None:
    added, removed, changed = _changed(base, _run(change=_set(path, value)))
    assert (added, removed) == (set(), set())
    assert changed == expected


def test_validate_only_admission_removes_just_the_mutating_policies(base: ProgramRun) -> None:
    added, removed, changed = _changed(base, _run(change=_set("vcluster.admission", "validate")))
    assert added == set()
    assert removed == {
        "tenant-admission-pin-queue",
        "tenant-admission-gang-names",
        "tenant-admission-non-preemptible",
    }
    assert changed == {f"{team}-vcluster" for team in TEAMS}, "each release no longer waits for them"


WORKER_STEPS = {
    *("brev-instance", "brev-running", "preflight", "microk8s", "node", "join"),
    *("release", "channel", "kubelet", "drift-check", "ready"),
}


def test_adding_a_worker_touches_no_tenant_and_removing_it_restores_the_stack(base: ProgramRun) -> None:
    grown = _run(change=_set("host.workers", 1))
    # Each team's memory floor now waits for the new node too (its GPU could be larger); its value is the same.
    added, removed, changed = _changed(base, grown, dependencies=False)
    assert added == {f"host-w1-{step}" for step in WORKER_STEPS} | {"host-join-tokens"}
    assert removed == set()
    # The gate runs again and must see the new node's GPUs; each team's workloads are fenced off the new machine.
    assert changed == {"host-gpu-gate", *(f"{team}-workloads" for team in TEAMS)}
    assert _changed(grown, base, dependencies=False) == (set(), added, changed)


def test_switching_to_sni_changes_every_endpoint_and_nothing_of_the_gpu_stack(base: ProgramRun) -> None:
    added, removed, changed = _changed(base, _run(change=_set("vcluster", {"expose": "sni", "domain": "gpu.example"})))
    assert added == {f"{team}-route" for team in TEAMS}
    assert removed == set()
    assert changed == {"host-addons", *(f"{team}-vcluster" for team in TEAMS)}


# --- teams come and go -----------------------------------------------------------------------------


def _add_team(config: Config) -> None:
    for queue in config["queues"][1:]:
        queue["resources"]["gpu"]["quota"] = 0.25
    config["queues"].append(
        {"name": "team-speech", "parentQueue": "ml-org", "resources": {"gpu": {"quota": 0.25, "limit": 1}}}
    )
    config["tenants"].append({"name": "team-speech", "queue": "team-speech"})


TEAM_VIEWS_PASSWORD = "observability-team-views-team-speech-password"
TEAM_VIEWS_CHANGE = {*TEAM_VIEWS_STATE, "observability-team-views-secret"}


def _team_resources(run: ProgramRun, team: str) -> set[str]:
    return {
        r.name
        for r in run.registrations
        if not r.read and (r.name.startswith(f"{team}-") or r.name in {f"queues-{team}", f"gangs-{team}"})
    }


def test_adding_a_team_only_adds_its_own_resources(base: ProgramRun) -> None:
    bigger = _run(change=_add_team)
    added, removed, changed = _changed(base, bigger)
    assert added == _team_resources(bigger, "team-speech") | {"team-speech", TEAM_VIEWS_PASSWORD}
    assert removed == set()
    # The quotas that made room, the fleet view, the node-port memory, which now holds the new team's ports, and the
    # team views' state, whose Grafana rebuilds with the new team's organisation.
    assert changed == {*(f"queues-{team}" for team in TEAMS), DASHBOARDS, "node-ports-write", *TEAM_VIEWS_CHANGE}


def test_removing_a_team_only_removes_its_own_resources(base: ProgramRun) -> None:
    bigger = _run(change=_add_team)
    added, removed, changed = _changed(bigger, base)
    assert removed == _team_resources(bigger, "team-speech") | {"team-speech", TEAM_VIEWS_PASSWORD}
    assert added == set()
    assert changed == {*(f"queues-{team}" for team in TEAMS), DASHBOARDS, "node-ports-write", *TEAM_VIEWS_CHANGE}


# --- destroy ---------------------------------------------------------------------------------------


def _key(registration: Registration) -> str:
    """`Kind/name`, e.g. `Release/kai-release`: names alone repeat across kinds."""
    return f"{registration.type.rsplit(':', 1)[-1]}/{registration.name}"


def _needs(run: ProgramRun) -> dict[str, set[str]]:
    """What each resource needs, transitively; Pulumi deletes a resource before anything it needs.

    Needs are its dependencies (explicit and through inputs) and its provider.
    """
    by_urn = {r.urn: r for r in run.registrations}
    direct: dict[str, set[str]] = {}
    for registration in run.registrations:
        needs = {_key(by_urn[d]) for d in registration.dependencies if d in by_urn}
        provider_urn = registration.provider.rsplit("::", 1)[0]
        if provider_urn in by_urn:
            needs.add(_key(by_urn[provider_urn]))
        direct[_key(registration)] = needs
    closure: dict[str, set[str]] = {}

    def visit(key: str) -> set[str]:
        if key not in closure:
            closure[key] = set()
            for need in direct.get(key, set()):
                closure[key] |= {need, *visit(need)}
        return closure[key]

    for key in direct:
        visit(key)
    return closure


TENANT_RELEASES = [f"Release/{team}-vcluster" for team in TEAMS]

DESTROY_ORDER = [
    # A team's add-ons go through its own API server: they go before the vCluster that serves it.
    (["Release/team-nlp-addon-kuberay"], "Release/team-nlp-vcluster"),
    # Teams' pods stay pinned to their queue by the policies until their vCluster is gone.
    (TENANT_RELEASES, "ValidatingAdmissionPolicyBinding/tenant-admission-pods"),
    (TENANT_RELEASES, "MutatingAdmissionPolicyBinding/tenant-admission-pin-queue"),
    ([f"Queue/queues-{team}" for team in TEAMS], "Queue/queues-ml-org"),
    # Queues go while KAI's webhooks still serve them; KAI goes while the GPU stack is still there.
    (["Queue/queues-ml-org"], "Job/kai-gate"),
    (["Job/kai-gate"], "Release/kai-release"),
    (["Namespace/kai-namespace"], "Job/host-gpu-gate"),
    (["Job/host-gpu-gate"], "Release/host-gpu-operator"),
    # Everything in the cluster goes before MicroK8s itself, and the machine goes last.
    (["Release/kai-release", "Release/host-gpu-operator", *TENANT_RELEASES], "Command/host-microk8s"),
    (["Command/host-microk8s", "Command/host-kubeconfig"], "Command/host-brev-instance"),
]


@pytest.mark.parametrize(("first", "then"), DESTROY_ORDER, ids=[f"{f[0]}-before-{t}" for f, t in DESTROY_ORDER])
def test_destroy_deletes_in_order(base: ProgramRun, first: list[str], then: str) -> None:
    needs = _needs(base)
    assert then in needs, f"no resource {then}"
    assert [key for key in first if then not in needs[key]] == [], f"must be deleted before {then}"


GPU_STACK = ("Release/host-gpu-operator", "Job/host-gpu-gate", "Release/kai-release", "Job/kai-gate")


@pytest.mark.parametrize("team", TEAMS)
def test_a_tenant_waits_for_nothing_of_the_gpu_stack(base: ProgramRun, team: str) -> None:
    """Its control plane starts while the operator and KAI install; its pods wait for KAI on their own."""
    needs = _needs(base)
    for key in (f"Release/{team}-vcluster", f"Namespace/{team}-namespace"):
        assert not [part for part in GPU_STACK if part in needs[key]], key


def test_every_release_in_a_namespace_of_ours_is_uninstalled_before_that_namespace_goes(base: ProgramRun) -> None:
    """Otherwise the namespace's deletion races the uninstall (e.g. KAI's post-delete cleanup Job)."""
    needs = _needs(base)
    ours = {r.inputs["metadata"]["name"]: _key(r) for r in base.of_type(NAMESPACE)}
    releases = [r for r in base.of_type(RELEASE) if r.inputs["namespace"] in ours]
    assert len(releases) == 3 + len(TEAMS), [r.name for r in releases]
    for release in releases:
        assert ours[release.inputs["namespace"]] in needs[_key(release)], release.name


@pytest.mark.parametrize(
    ("path", "value", "release"),
    [
        ("kaiScheduler.namespace", "kai", "kai-release"),
        ("gpuOperator.namespace", "gpu-operator", "host-gpu-operator"),
        ("gpuOperator.releaseName", "nvidia-gpu-operator", "host-gpu-operator"),
    ],
)
def test_a_moved_release_is_uninstalled_before_it_is_installed_again(
    base: ProgramRun, path: str, value: str, release: str
) -> None:
    """A new name or namespace replaces a release; the old one still owns the chart's cluster-scoped objects."""
    moved = _run(change=_set(path, value)).one(RELEASE, release)
    before = base.one(RELEASE, release)
    assert (moved.inputs["name"], moved.inputs["namespace"]) != (before.inputs["name"], before.inputs["namespace"])
    assert moved.delete_before_replace


def test_every_helm_release_that_can_move_in_its_cluster_is_deleted_before_it_is_replaced(base: ProgramRun) -> None:
    """A release whose name or namespace a setting changes must free them first; a team's release has neither
    changing (both are the team's), so it is replaced only on a new cluster, and goes last (test_dead_cluster.py)."""
    teams = {f"{t['name']}-vcluster" for t in dev_settings()["tenants"]}
    for release in base.of_type(RELEASE):
        assert release.delete_before_replace == (release.name not in teams), release.name


KAI_SHARD = "kubernetes:kai.scheduler/v1:SchedulingShardPatch"


# --- the upgrade from the chart's kept shard ------------------------------------------------------------------


def test_an_upgrade_takes_over_the_shard_helm_keeps() -> None:
    """The release before this one rendered the chart's `default` shard, marked keep; with defaultShard off Helm's
    upgrade no longer renders it and leaves it in place. The platform's shard, created in the same `up` after the
    release, upserts that object and forces its fields from Helm's field manager: no AlreadyExists, no gap."""
    (release,) = [r for r in releases("brev") if r.resource == "kai-release"]
    earlier = dict(release.values)
    earlier.pop("defaultShard")
    (kept,) = [
        o for o in render(release.name, release.namespace, release.chart, earlier) if o["kind"] == "SchedulingShard"
    ]
    assert kept["metadata"]["name"] == "default"
    assert kept["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert not [o for o in release.render() if o["kind"] == "SchedulingShard"], "this release renders none"

    run = run_main(dev_settings())
    old_release = run.one("kubernetes:helm.sh/v3:Release", "kai-release")
    old_values = {k: v for k, v in old_release.inputs["values"].items() if k != "defaultShard"}
    earlier_release = dataclasses.replace(old_release, inputs={**old_release.inputs, "values": old_values})
    before = ProgramRun(
        [earlier_release if r is old_release else r for r in run.registrations if r.name != "kai-shard"]
    )
    steps = {step.name: step.op for step in plan(before, run)}
    assert steps["kai-shard"] == "create"
    assert steps["kai-release"] == "update"
    assert create_over_existing(run.one(KAI_SHARD)) == "upsert, forcing"
    plain = dataclasses.replace(run.one(KAI_SHARD), type="kubernetes:kai.scheduler/v1:SchedulingShard")
    assert create_over_existing(plain) == "AlreadyExists", "a plain CustomResource would fail the upgrade"

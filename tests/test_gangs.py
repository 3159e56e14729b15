"""Gangs, from what a team writes in its vCluster to what KAI schedules, and the fence around PodGroups.

Every workload is taken all the way: the operator's pods (tests/workload_operators.py),
the syncer's translation (tests/vcluster_syncer.py), the host's mutating policies,
KAI's admission (tests/kai_admission.py), the host's validating policies (with the gang
controller's PodGroups as params), the PodGroup the gang controller makes
(components/gang_controller/gangcontrol), and KAI's scheduler joining pods to it
(tests/kai_podgrouper.py). The workloads are the manifests of docs/teams.md.
"""

import copy
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from components.gang_controller import GANG_CONTROLLER_USER
from components.gang_controller.gangcontrol import gangs
from harness import ProgramRun, dev_settings, run_main
from tests.kai_podgrouper import gang_starts, pod_group
from tests.lab_admission import Request
from tests.teams_page import page_manifests
from tests.tenant_pods import BINDER, POD_GROUPER, VAP, admit, admitted, namespace
from tests.vcluster_syncer import to_host
from tests.workload_operators import pods_of

Json = dict[str, Any]
SCHEDULER = "system:serviceaccount:kai-scheduler:scheduler"


def syncer(team: str) -> str:
    return f"system:serviceaccount:vcluster-{team}:vc-{team}"


MANIFESTS = page_manifests()


def _is_gang(manifest: Json) -> bool:
    text = yaml.safe_dump(manifest)
    return "gpu-tenancy/gang-size" in text or manifest["kind"] == "LeaderWorkerSet"


GANGS = {key: m for key, m in MANIFESTS.items() if _is_gang(m)}
SINGLES = {key: m for key, m in MANIFESTS.items() if not _is_gang(m)}


@pytest.fixture(scope="module")
def dev_run() -> ProgramRun:
    return run_main(dev_settings())


@dataclass
class Journey:
    pods: list[Json] = field(default_factory=list)
    refused: dict[str, list[str]] = field(default_factory=dict)
    pod_groups: list[Json] = field(default_factory=list)


def journey(run: ProgramRun, manifest: Json, team: str = "team-nlp", pod_groups: list[Json] | None = None) -> Journey:
    """The team's object, all the way to the PodGroups the gang controller would create for it."""
    result = Journey()
    ns = namespace(run, team)
    for index, pod in enumerate(pods_of(manifest)):
        host = to_host(pod, vcluster=team)
        host["metadata"]["uid"] = f"00000000-0000-4000-8000-{index:012d}"
        request = Request(object=host, namespace=ns, user=syncer(team))
        stored, denials = admitted(run, request, pod_groups=pod_groups if pod_groups is not None else [])
        if denials:
            result.refused[host["metadata"]["name"]] = denials
        else:
            result.pods.append(stored)
    tenants = gangs.tenants_of([ns])
    members = [m for pod in result.pods if (m := gangs.gang_pod(pod, tenants))]
    todo = gangs.plan(gangs.gangs_of(members, tenants), {}, gangs.Memory(), now=0, grace_seconds=60)
    result.pod_groups = todo.create
    return result


@pytest.mark.parametrize("key", GANGS)
def test_a_gang_starts_whole_in_its_queue_at_its_priority(dev_run: ProgramRun, key: str) -> None:
    manifest = GANGS[key]
    trip = journey(dev_run, manifest)
    assert trip.refused == {}
    (group,) = trip.pod_groups
    labels = [pod["metadata"]["labels"] for pod in trip.pods]
    chosen = {label.get("priorityClassName", "train") for label in labels}
    assert group["spec"]["minMember"] == len(trip.pods)
    assert (group["spec"]["queue"], {group["spec"]["priorityClassName"]}) == ("team-nlp", chosen)
    assert group["metadata"]["name"].startswith("team-nlp.default.")
    # KAI's pod-grouper leaves every member alone; the scheduler waits for the PodGroup, then starts all.
    assert all(pod_group(pod) is None for pod in trip.pods)
    assert gang_starts(trip.pods, []) == {}
    (start,) = gang_starts(trip.pods, trip.pod_groups).values()
    assert start.starts
    assert len(start.members) == len(trip.pods)
    # With one member missing, none starts.
    (partial,) = gang_starts(trip.pods[:-1], trip.pod_groups).values()
    assert not partial.starts


@pytest.mark.parametrize("key", SINGLES)
def test_a_workload_that_is_no_gang_is_grouped_by_kai_as_before(dev_run: ProgramRun, key: str) -> None:
    trip = journey(dev_run, SINGLES[key])
    assert trip.refused == {}
    assert trip.pod_groups == []
    for pod in trip.pods:
        group = pod_group(pod)
        assert group is not None
        assert group.queue == "team-nlp"


def test_two_teams_with_one_job_name_get_two_gangs(dev_run: ProgramRun) -> None:
    bert = GANGS["PyTorchJob/bert"]
    nlp, vision = journey(dev_run, bert, "team-nlp"), journey(dev_run, bert, "team-vision")
    (nlp_group,), (vision_group,) = nlp.pod_groups, vision.pod_groups
    assert nlp_group["metadata"]["name"] != vision_group["metadata"]["name"]
    starts = gang_starts(nlp.pods + vision.pods, [nlp_group, vision_group])
    assert {s.queue for s in starts.values()} == {"team-nlp", "team-vision"}
    assert all(len(s.members) == 4 for s in starts.values()), "KAI joins by name across namespaces: no merge"


def test_a_gang_pod_that_disagrees_with_its_pod_group_is_refused(dev_run: ProgramRun) -> None:
    bert = GANGS["PyTorchJob/bert"]
    first = journey(dev_run, bert)
    created = first.pod_groups
    bigger = copy.deepcopy(bert)
    bigger["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]["annotations"]["gpu-tenancy/gang-size"] = (
        "5"
    )
    later = journey(dev_run, bigger, pod_groups=created)
    assert any("disagrees with PodGroup" in d for denials in later.refused.values() for d in denials), later.refused
    urgent = copy.deepcopy(bert)
    for replica in urgent["spec"]["pytorchReplicaSpecs"].values():
        replica["template"]["metadata"]["labels"] = {"priorityClassName": "inference"}
    assert journey(dev_run, urgent, pod_groups=created).refused
    assert journey(dev_run, bert, pod_groups=created).refused == {}, "the gang's own pods still join it"


def test_a_gang_is_admitted_while_kai_installs_and_waits_for_it(dev_run: ProgramRun) -> None:
    """Before KAI serves PodGroups there is no consistency policy yet (it waits for KAI's gate: a policy whose
    params are not served refuses every pod it matches, tests/test_lab_kai_installing.py); the gang's pods
    keep their group's name and wait, as no scheduler but KAI's takes them."""
    pod = to_host(pods_of(GANGS["Pod/mpi-launcher"])[0], vcluster="team-nlp")
    request = Request(object=pod, namespace=namespace(dev_run, "team-nlp"), user=syncer("team-nlp"))
    stored, denials = admitted(dev_run, request, kai_serves=False)
    assert denials == []
    assert stored["metadata"]["annotations"]["pod-group-name"].startswith("team-nlp.default.")
    assert stored["spec"]["schedulerName"] == "kai-scheduler"
    (consistency,) = [r for r in dev_run.of_type(VAP) if r.inputs["metadata"]["name"] == "gpu-tenancy-gang-consistency"]
    (kai_gate,) = [r for r in dev_run.of_type("kubernetes:batch/v1:Job") if r.name == "kai-gate"]
    assert consistency.depends_on(kai_gate)


# --- naming: no team chooses a gang, or joins another's -------------------------------------------------


def _single_pod(labels: Json, annotations: Json) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "labels": labels, "annotations": annotations},
        "spec": {"containers": [{"name": "m", "image": "busybox"}]},
    }


GANG_CLAIMS: dict[str, tuple[Json, Json, str]] = {
    # name: (the pod's labels, its annotations, what the refusal names)
    "another-teams-gang": ({}, {"pod-group-name": "team-vision.default.bert"}, "pod-group-name is the platform's"),
    "no-grouping-label": ({}, {"gpu-tenancy/gang-size": "4"}, "needs a label all its pods share"),
    "size-not-a-number": (
        {"gpu-tenancy/gang": "x"},
        {"gpu-tenancy/gang-size": "many"},
        "a whole number from 1 to 9999",
    ),
    "uppercase-gang-label": (
        {"gpu-tenancy/gang": "Bert_Run"},
        {"gpu-tenancy/gang-size": "2"},
        "is not a valid object name",
    ),
}


@pytest.mark.parametrize("name", GANG_CLAIMS)
def test_a_team_cannot_name_or_join_a_gang_itself(dev_run: ProgramRun, name: str) -> None:
    labels, annotations, refusal = GANG_CLAIMS[name]
    trip = journey(dev_run, _single_pod(labels, annotations))
    assert any(refusal in d for denials in trip.refused.values() for d in denials), trip.refused


def test_a_gang_that_names_another_teams_gang_gets_its_own_name(dev_run: ProgramRun) -> None:
    pod = _single_pod(
        {"gpu-tenancy/gang": "bert"}, {"gpu-tenancy/gang-size": "1", "pod-group-name": "team-vision.default.bert"}
    )
    trip = journey(dev_run, pod)
    assert trip.refused == {}
    assert trip.pods[0]["metadata"]["annotations"]["pod-group-name"] == "team-nlp.default.bert"


# --- who makes PodGroups in a tenant's namespace -----------------------------------------------------


def _pod_group(name: str, queue: str = "team-nlp") -> Json:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "vcluster-team-nlp"},
        "spec": {"minMember": 1, "queue": queue},
    }


def _podgroup_denials(run: ProgramRun, group: Json, user: str, old: Json | None = None) -> list[str]:
    request = Request(
        object=group,
        old_object=old,
        operation="UPDATE" if old else "CREATE",
        resource="podgroups",
        api_group="scheduling.run.ai",
        api_version="v2alpha2",
        namespace=namespace(run, "team-nlp"),
        user=user,
    )
    return admit(run, request)


@pytest.mark.parametrize(
    ("group", "user", "refusal"),
    [
        (_pod_group("team-nlp.default.bert"), GANG_CONTROLLER_USER, None),
        (_pod_group("pg-p-x-default-x-team-nlp-uid"), POD_GROUPER, None),
        (_pod_group("team-nlp.default.bert"), syncer("team-nlp"), "only KAI's pod-grouper and the platform's"),
        (_pod_group("anything"), BINDER, "only KAI's pod-grouper and the platform's"),
        (_pod_group("team-nlp.default.bert", queue="team-vision"), GANG_CONTROLLER_USER, "in the tenant's queue"),
        (_pod_group("team-vision.default.bert"), GANG_CONTROLLER_USER, "names a tenant's PodGroups after the tenant"),
        (_pod_group("team-vision.default.bert"), POD_GROUPER, "pg-<pod>-<uid>"),
    ],
    ids=[
        "gang-controller",
        "pod-grouper",
        "tenant",
        "another-kai-component",
        "another-queue",
        "another-tenant",
        "chosen-name",
    ],
)
def test_only_kai_and_the_gang_controller_make_pod_groups(
    dev_run: ProgramRun, group: Json, user: str, refusal: str | None
) -> None:
    denials = _podgroup_denials(dev_run, group, user)
    assert denials == [] if refusal is None else any(refusal in d for d in denials), denials


def test_kais_scheduler_may_annotate_a_pod_group_and_a_tenant_may_not(dev_run: ProgramRun) -> None:
    old = _pod_group("team-nlp.default.bert")
    stamped = copy.deepcopy(old)
    stamped["metadata"]["annotations"] = {"kai.scheduler/last-start-timestamp": "2026-12-01T15:00:00Z"}
    assert _podgroup_denials(dev_run, stamped, SCHEDULER, old) == []
    assert _podgroup_denials(dev_run, stamped, syncer("team-nlp"), old)


@pytest.mark.parametrize(("stated", "admitted_as_is"), [("team-nlp.default.mpi", True), ("mpi", False)])
def test_without_the_mutating_policy_a_team_states_its_gangs_name_itself(stated: str, admitted_as_is: bool) -> None:
    config = dev_settings()
    config["vcluster"] = {"admission": "validate"}
    run = run_main(config)
    labels = {"gpu-tenancy/gang": "mpi", "kai.scheduler/queue": "team-nlp"}
    pod = _single_pod(labels, {"gpu-tenancy/gang-size": "1", "pod-group-name": stated})
    pod["spec"]["schedulerName"] = "kai-scheduler"
    trip = journey(run, pod)
    assert (trip.refused == {}) is admitted_as_is, trip.refused

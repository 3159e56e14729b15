"""A team set `nonPreemptible`: every pod of it is non-preemptible for KAI, whatever the team writes.

The program's own policies, decided by the lab's real API server (tests/lab_admission.py); what
KAI then makes of the pod is its pod-grouper's model (tests/kai_podgrouper.py).
"""

import copy

import pytest

from config.stack import parse_stack_config
from harness import ProgramRun, dev_settings, run_main
from tests.kai_podgrouper import pod_group
from tests.lab_admission import Request
from tests.tenant_pods import SYNCER, Json, admit, admitted, as_team, container, gpus, mode, namespace, pod

PREEMPTIBILITY = "kai.scheduler/preemptibility"
REFUSAL = "this team's pods are non-preemptible (tenants[].nonPreemptible)"


@pytest.fixture(scope="module", params=["mutate", "validate"])
def program(request: pytest.FixtureRequest) -> ProgramRun:
    config = dev_settings()
    config["vcluster"] = {"admission": request.param}
    config["tenants"][0]["nonPreemptible"] = True  # team-nlp serves; the others do not
    return run_main(config)


def _gpu_pod(**labels: str) -> Json:
    return pod(labels=labels, containers=[container(resources=gpus())])


def _create(run: ProgramRun, p: Json, team: str = "team-nlp") -> tuple[Json, list[str]]:
    user = SYNCER.replace("team-nlp", team)
    return admitted(run, Request(object=p, namespace=namespace(run, team), user=user))


@pytest.mark.parametrize("written", ["", "preemptible", "non-preemptible"])
@pytest.mark.parametrize("priority", ["train", "inference"])
def test_a_non_preemptible_teams_pod_is_non_preemptible_whatever_it_writes(
    program: ProgramRun, written: str, priority: str
) -> None:
    labels = {"priorityClassName": priority, **({PREEMPTIBILITY: written} if written else {})}
    stored, denials = _create(program, as_team(mode(program), _gpu_pod(**labels)))
    if mode(program) == "validate" and written != "non-preemptible":
        # No mutation on older clusters: the team labels its pods itself, and is told so.
        assert denials
        assert REFUSAL in denials[0]
        return
    assert denials == []
    assert stored["metadata"]["labels"][PREEMPTIBILITY] == "non-preemptible"
    group = pod_group(stored)
    assert group is not None
    assert not group.preemptible, "KAI's pod-grouper reads the label before the class"


def test_a_non_preemptible_teams_pod_cannot_be_made_preemptible_later(program: ProgramRun) -> None:
    old, denials = _create(program, as_team(mode(program), _gpu_pod(**{PREEMPTIBILITY: "non-preemptible"})))
    assert denials == []
    new = copy.deepcopy(old)
    new["metadata"]["labels"][PREEMPTIBILITY] = "preemptible"
    request = Request(object=new, old_object=old, operation="UPDATE", namespace=namespace(program, "team-nlp"))
    (denial,) = admit(program, request)
    assert REFUSAL in denial


def test_another_teams_pods_keep_their_own_preemptibility(program: ProgramRun) -> None:
    p = _gpu_pod(priorityClassName="train")
    p["metadata"]["namespace"] = "vcluster-team-vision"
    p["metadata"]["name"] = "train-x-default-x-team-vision"
    p["metadata"]["labels"]["vcluster.loft.sh/managed-by"] = "team-vision"
    if mode(program) == "validate":
        p["metadata"]["labels"].update({"kai.scheduler/queue": "team-vision"})
        p["spec"]["schedulerName"] = "kai-scheduler"
    stored, denials = _create(program, p, team="team-vision")
    assert denials == []
    assert PREEMPTIBILITY not in stored["metadata"]["labels"]
    group = pod_group(stored)
    assert group is not None
    assert group.preemptible


@pytest.mark.parametrize(("quota", "warned"), [(0.33, True), (0, True), (1, False), (-1, False)])
def test_the_check_warns_when_a_non_preemptible_team_is_guaranteed_less_than_a_gpu(quota: float, warned: bool) -> None:
    config = dev_settings()
    config["tenants"][0]["nonPreemptible"] = True
    config["queues"][0]["resources"]["gpu"]["quota"] = -1
    config["queues"][1]["resources"]["gpu"]["quota"] = quota
    config["queues"][1]["resources"]["gpu"]["limit"] = -1
    warnings = [w for w in parse_stack_config(config).warnings() if w.startswith("tenants[0].nonPreemptible")]
    assert bool(warnings) is warned, warnings
    if warned:
        assert f"queue 'team-nlp' guarantees {quota:g} GPU" in warnings[0]
        assert "raise queues[1].resources.gpu.quota" in warnings[0]

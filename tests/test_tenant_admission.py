"""Tenant admission, as the host's API server runs it: every attack a team could copy from a blog is refused.

The policies and bindings are taken from what the real program registers. A pod
arriving from a tenant's syncer goes through the pinning policy (mutate mode),
then KAI's webhook (tests/kai_admission.py), then the validating policies;
`kubectl debug` arrives as an update of the pods/ephemeralcontainers subresource.
"""

import copy
from collections.abc import Callable

import pytest

from components.gang_controller import GANG_CONTROLLER_USER
from config.names import QUEUE_VIEW_CONFIGMAP
from harness import ProgramRun, dev_settings, run_main
from tests.lab_admission import Request
from tests.tenant_pods import (
    BINDER,
    FRACTION,
    MAP,
    SYNCER,
    VAP,
    Json,
    admit,
    admitted,
    as_team,
    container,
    create,
    env,
    gpus,
    mode,
    namespace,
    pod,
    synced,
    team_pod,
)
from tests.tenant_pods import stored as on_host


@pytest.fixture(scope="module", params=["mutate", "validate"])
def program(request: pytest.FixtureRequest) -> ProgramRun:
    config = dev_settings()
    config["vcluster"] = {"admission": request.param}
    return run_main(config)


@pytest.fixture(scope="module")
def dev_run() -> ProgramRun:
    return run_main(dev_settings())


BENIGN = {
    "cpu-pod": team_pod(),
    "whole-gpu-through-kai": team_pod(containers=[container(resources=gpus())]),
    "fraction-through-kai": team_pod(annotations=FRACTION, containers=[container(), container("sidecar", "busybox")]),
    "fraction-with-init-container": team_pod(
        annotations=FRACTION, containers=[container()], initContainers=[container("fetch", "busybox")]
    ),
    "cpu-pod-with-app-config-from-envfrom": team_pod(
        containers=[container(image="busybox", envFrom=[{"configMapRef": {"name": "app"}}])]
    ),
}
"""Team pods, as the team writes them (tests/syncer_cases.py replays them through a real tenant)."""


@pytest.mark.parametrize("name", BENIGN)
def test_ordinary_pods_are_admitted(program: ProgramRun, name: str) -> None:
    assert create(program, synced(program, BENIGN[name])) == []


def test_pinning_gives_a_team_pod_its_queue_and_kai(dev_run: ProgramRun) -> None:
    pinned, denials = admitted(dev_run, Request(object=pod(), namespace=namespace(dev_run, "team-vision")))
    assert denials == []
    assert pinned["metadata"]["labels"]["kai.scheduler/queue"] == "team-vision"
    assert pinned["spec"]["schedulerName"] == "kai-scheduler"


def test_another_teams_queue_is_refused_or_overwritten(program: ProgramRun) -> None:
    """Pinning overwrites the label with the tenant's own queue; without pinning the pod is refused."""
    request = Request(
        object=as_team(mode(program), pod(labels={"kai.scheduler/queue": "team-vision"})),
        namespace=namespace(program, "team-nlp"),
        user=SYNCER,
    )
    stored, denials = admitted(program, request)
    if mode(program) == "mutate":
        assert (stored["metadata"]["labels"]["kai.scheduler/queue"], denials) == ("team-nlp", [])
    else:
        assert any("its own KAI queue" in denial for denial in denials), denials


ATTACKS: dict[str, tuple[Json, str]] = {
    # name: (the team's pod, what the refusal names)
    "cuda-image-under-the-nvidia-runtime": (
        team_pod(containers=[container()], runtimeClassName="nvidia"),
        "runtimeClassName nvidia",
    ),
    "fraction-under-nvidia-legacy": (
        team_pod(annotations=FRACTION, containers=[container()], runtimeClassName="nvidia-legacy"),
        "runtimeClassName nvidia",
    ),
    "visible-devices-all": (
        team_pod(containers=[container(env=env("NVIDIA_VISIBLE_DEVICES", "all"))]),
        "NVIDIA_VISIBLE_DEVICES may only be",
    ),
    "visible-devices-in-an-init-container": (
        team_pod(initContainers=[container("init", env=env("NVIDIA_VISIBLE_DEVICES", "GPU-0"))]),
        "NVIDIA_VISIBLE_DEVICES may only be",
    ),
    # The team names its own ConfigMap; the syncer points the reference at the host's copy.
    "visible-devices-from-a-teams-configmap": (
        team_pod(
            containers=[
                container(
                    env=[
                        {
                            "name": "NVIDIA_VISIBLE_DEVICES",
                            "valueFrom": {"configMapKeyRef": {"name": "gpus", "key": "all", "optional": True}},
                        }
                    ]
                )
            ]
        ),
        "NVIDIA_VISIBLE_DEVICES may only be",
    ),
    "node-name-past-kai": (
        team_pod(containers=[container(resources=gpus())], nodeName="lab-gpu-1"),
        "may not name their node",
    ),
    "cdi-annotation": (team_pod(annotations={"cdi.k8s.io/gpu": "nvidia.com/gpu=all"}), "CDI device annotations"),
}
"""Team pods, as the team writes them (tests/syncer_cases.py replays them through a real tenant)."""


@pytest.mark.parametrize("name", ATTACKS)
def test_every_path_to_a_gpu_or_another_queue_is_refused(program: ProgramRun, name: str) -> None:
    """Evaluated with KAI's webhook not serving (not installed yet, or down): the host's policies stand alone.

    When KAI serves, its deviceaccess rewrites a stray NVIDIA_VISIBLE_DEVICES to void on its own.
    """
    team_written, reason = ATTACKS[name]
    denials = create(program, synced(program, team_written), kai_serves=False)
    assert any(reason in denial for denial in denials), denials


def test_without_pinning_a_gpu_past_kai_is_refused() -> None:
    config = dev_settings()
    config["vcluster"] = {"admission": "validate"}
    run = run_main(config)
    denials = create(run, pod(containers=[container(resources=gpus())]))
    assert any("only through KAI" in denial for denial in denials), denials


def test_a_fraction_sidecar_that_leaves_its_devices_to_its_image_is_refused(dev_run: ProgramRun) -> None:
    """As KAI's deviceaccess is bypassed (it is only a webhook): a container without its own
    NVIDIA_VISIBLE_DEVICES under the nvidia runtime gets what its image's ENV or an envFrom says."""
    kai_left = on_host(dev_run, pod(annotations=FRACTION, containers=[container()]))
    kai_left["spec"]["containers"].append(container("sidecar", envFrom=[{"configMapRef": {"name": "x"}}]))
    request = Request(object=kai_left, namespace=namespace(dev_run, "team-nlp"), user=SYNCER)
    # Sent as KAI left it: its webhook does not run again.
    denials = admit(dev_run, request, kai_serves=False)
    assert any("must set NVIDIA_VISIBLE_DEVICES itself" in denial for denial in denials), denials


def _existing_fraction_pod(run: ProgramRun) -> Json:
    """A fraction pod as it stands on the host after admission."""
    return on_host(run, pod(annotations=FRACTION, containers=[container()]))


DEBUG_CONTAINERS: dict[str, tuple[list[Json] | None, str | None]] = {
    # name: (the debug container's env, what the refusal names; None: admitted)
    "cuda-debug-image": (None, "NVIDIA_VISIBLE_DEVICES"),
    "debug-image-with-void": (env("NVIDIA_VISIBLE_DEVICES", "void"), None),
}
"""`kubectl debug` with a CUDA image on a fraction's pod (tests/syncer_cases.py replays it inside a tenant)."""


@pytest.mark.parametrize("name", DEBUG_CONTAINERS)
def test_kubectl_debug_on_a_fraction_pod_cannot_see_every_gpu(dev_run: ProgramRun, name: str) -> None:
    debug_env, refusal = DEBUG_CONTAINERS[name]
    existing = _existing_fraction_pod(dev_run)
    debugged = copy.deepcopy(existing)
    debug = container("debugger-abc12")
    if debug_env:
        debug["env"] = debug_env
    debugged["spec"]["ephemeralContainers"] = [debug]
    request = Request(
        object=debugged,
        old_object=existing,
        operation="UPDATE",
        sub_resource="ephemeralcontainers",
        namespace=namespace(dev_run, "team-nlp"),
        user=SYNCER,
    )
    denials = admit(dev_run, request)
    assert denials == [] if refusal is None else any(refusal in denial for denial in denials), denials


UPDATES: dict[str, tuple[Callable[[Json], None], tuple[str, ...] | None]] = {
    "syncer-adds-its-annotation": (
        lambda p: p["metadata"].setdefault("annotations", {}).update({"vcluster.loft.sh/labels": "x"}),
        None,
    ),
    "queue-label-changed": (
        lambda p: p["metadata"]["labels"].update({"kai.scheduler/queue": "team-vision"}),
        ("may only use its own KAI queue", "cannot be changed or removed"),
    ),
    "queue-label-removed": (
        lambda p: p["metadata"]["labels"].pop("kai.scheduler/queue"),
        ("cannot be changed or removed",),
    ),
    "shared-configmap-repointed": (
        lambda p: p["metadata"]["annotations"].update({"runai/shared-gpu-configmap": "other-x-shared-gpu"}),
        ("GPU sharing annotations", "NVIDIA_VISIBLE_DEVICES may only be"),
    ),
}
"""Each edit and the rules that refuse it: the API server names the first that fails (several may)."""


@pytest.mark.parametrize("name", UPDATES)
def test_the_syncers_updates_pass_and_a_teams_edits_to_pinning_do_not(dev_run: ProgramRun, name: str) -> None:
    change, reasons = UPDATES[name]
    existing = _existing_fraction_pod(dev_run)
    updated = copy.deepcopy(existing)
    change(updated)
    request = Request(
        object=updated, old_object=existing, operation="UPDATE", namespace=namespace(dev_run, "team-nlp"), user=SYNCER
    )
    denials = admit(dev_run, request)
    if reasons is None:
        assert denials == []
    else:
        assert denials, "refused"
        assert any(reason in denials[0] for reason in reasons), denials


def test_the_control_plane_and_other_namespaces_are_not_tenant_pods(dev_run: ProgramRun) -> None:
    control_plane = pod(labels={}, containers=[container(env=env("NVIDIA_VISIBLE_DEVICES", "all"))], nodeName="n")
    control_plane["metadata"]["labels"] = {"app": "vcluster", "release": "team-nlp"}
    assert create(dev_run, control_plane) == []
    system = {"metadata": {"name": "kube-system", "labels": {"kubernetes.io/metadata.name": "kube-system"}}}
    assert create(dev_run, pod(containers=[container()], runtimeClassName="nvidia"), system) == []


def _configmap(name: str) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"NVIDIA_VISIBLE_DEVICES": "all"},
    }


@pytest.mark.parametrize(
    ("name", "user", "refused"),
    [
        ("train-x-default-x-team-nlp-k2j4x9q-shared-gpu-0", SYNCER, True),
        ("train-x-default-x-team-nlp-k2j4x9q-shared-gpu-0-evar", SYNCER, True),
        ("train-x-default-x-team-nlp-k2j4x9q-shared-gpu-0", BINDER, False),
        ("settings-x-default-x-team-nlp", SYNCER, False),
        (QUEUE_VIEW_CONFIGMAP, GANG_CONTROLLER_USER, False),
        (QUEUE_VIEW_CONFIGMAP, SYNCER, True),
        (QUEUE_VIEW_CONFIGMAP, BINDER, True),
        ("train-x-default-x-team-nlp-k2j4x9q-shared-gpu-0", GANG_CONTROLLER_USER, True),
    ],
    ids=[
        "syncer-writes-gpu-list",
        "syncer-writes-evar",
        "binder-writes-gpu-list",
        "ordinary-configmap",
        "controller-writes-queue-view",
        "syncer-forges-queue-view",
        "binder-writes-queue-view",
        "controller-writes-gpu-list",
    ],
)
def test_only_their_writers_write_kais_gpu_list_and_the_queue_view(
    dev_run: ProgramRun, name: str, user: str, refused: bool
) -> None:
    request = Request(
        object=_configmap(name), resource="configmaps", namespace=namespace(dev_run, "team-nlp"), user=user
    )
    denials = admit(dev_run, request)
    assert bool(denials) == refused, denials


def test_one_policy_serves_every_tenant(dev_run: ProgramRun) -> None:
    """No per-tenant copies: each tenant namespace is selected by its labels, and reads its queue from them."""
    tenants = [p for p in dev_run.of_type(VAP) if "TenantAdmission" in p.urn]
    assert len(tenants) == 6, "the gang controller's own bound is not a tenant policy"
    assert len(dev_run.of_type(MAP)) == 3, "pin the queue, name the gang, mark non-preemptible namespaces' pods"
    for team in ("team-nlp", "team-vision", "team-recommender"):
        tenant_namespace = namespace(dev_run, team)
        stored, denials = admitted(dev_run, Request(object=pod(), namespace=tenant_namespace, user=SYNCER))
        assert (stored["metadata"]["labels"]["kai.scheduler/queue"], denials) == (team, [])
        other = "team-nlp" if team != "team-nlp" else "team-vision"
        stolen_pod = pod(labels={"kai.scheduler/queue": other}, schedulerName="kai-scheduler")
        # Pinning gives the pod its own tenant's queue back, whatever label it came with.
        kept, denials = admitted(dev_run, Request(object=stolen_pod, namespace=tenant_namespace, user=SYNCER))
        assert (kept["metadata"]["labels"]["kai.scheduler/queue"], denials) == (team, []), team

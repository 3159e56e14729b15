"""The gang controller, as it runs in its Pod, against the lab's real API server (a lab of this module's own).

The program's namespaces, admission policies and the controller's own ServiceAccount and
RBAC are applied as registered; the controller runs with that account's token. Pods reach
the API server as team-nlp's syncer writes them, through the real admission chain, so a
gang's pod-group-name is the one the gang-names policy gives it. Each test starts the real
program (components/gang_controller/gangcontrol) in a thread and waits for the PodGroups
and Events the API server holds. Pure planning is tested directly at the end.
"""

import http.server
import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from components.gang_controller import GANG_CONTROLLER_USER
from components.gang_controller.component import MEMORY
from components.gang_controller.gangcontrol import gangs, queue_view
from components.gang_controller.gangcontrol.kube import Api
from components.gang_controller.gangcontrol.run import Controller, Settings
from components.shared.queue_manifest import queue_manifest
from components.vcluster_tenant import gang_rules
from config import names, upstream
from config.stack import parse_stack_config
from config.vcluster_tenant.tenants import VClusterConfig
from harness import ProgramRun, dev_settings, run_main
from harness.lab.kube import ApiError
from tests.lab import Lab, apply_registrations, install_kai_crds, private_lab
from tests.tenant_pods import POD_GROUPER, SYNCER
from tests.vcluster_syncer import to_host, virtual_gang_pod

Json = dict[str, Any]
GRACE = 1.0
TEAM_NAMESPACE = "vcluster-team-nlp"
POD_GROUP = ("scheduling.run.ai/v2alpha2", "PodGroup")
SET_UP = {
    "kubernetes:core/v1:Namespace",
    "kubernetes:core/v1:ServiceAccount",
    "kubernetes:core/v1:ConfigMap",
    "kubernetes:core/v1:ConfigMapPatch",
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
    "kubernetes:rbac.authorization.k8s.io/v1:Role",
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
    "kubernetes:admissionregistration.k8s.io/v1:MutatingAdmissionPolicy",
    "kubernetes:admissionregistration.k8s.io/v1:MutatingAdmissionPolicyBinding",
}
"""What the controller needs around it, as the program registers it: namespaces, its account and RBAC, the fence
(with the pod policy's params)."""


@pytest.fixture(scope="module")
def program() -> ProgramRun:
    return run_main(dev_settings())


@pytest.fixture(scope="module")
def world(program: ProgramRun, tmp_path_factory: pytest.TempPathFactory) -> Iterator["World"]:
    with private_lab("gangs") as lab:
        wanted = [r for r in program.registrations if r.type in SET_UP and _around_the_controller(program, r)]
        apply_registrations(lab, sorted(wanted, key=lambda r: r.type != "kubernetes:core/v1:Namespace"))
        for team in ("team-nlp", "team-vision"):
            account = {"name": f"vc-workload-{team}", "namespace": f"vcluster-{team}"}
            lab.admin.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": account})
        world = World(lab, tmp_path_factory.mktemp("gangs"))
        # The API server reads policies from an informer: the first pods wait until the gang-names policy acts.
        eventually(world.policies_act)
        yield world


def _around_the_controller(run: ProgramRun, registration: Any) -> bool:
    """The controller's own objects, the namespaces and the tenant admission policies (not the vClusters')."""
    chain = registration.urn
    return (
        registration.type == "kubernetes:core/v1:Namespace" or "GangController" in chain or "TenantAdmission" in chain
    )


class World:
    def __init__(self, lab: Lab, folder: Path) -> None:
        self.lab = lab
        self.folder = folder
        self.syncer = lab.as_user(SYNCER)

    def token(self) -> Path:
        """A token of the controller's own ServiceAccount, as its pod is given one."""
        namespace, account = GANG_CONTROLLER_USER.removeprefix("system:serviceaccount:").split(":")
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
        path = self.lab.admin.path("v1", "ServiceAccount", namespace, account) + "/token"
        token = self.folder / "token"
        token.write_text(self.lab.admin.request("POST", path, body)["status"]["token"])
        return token

    def api(self) -> Api:
        return Api(self.lab.admin.credentials.server, str(self.token()), str(self.lab.admin.credentials.ca))

    def pod(self, name: str, *, gang: str | None = None, size: str = "4", labels: Json | None = None) -> Json:
        """Created as team-nlp's syncer creates it from the team's pod."""
        metadata: Json = {"name": name, "namespace": "default", "labels": dict(labels or {})}
        if gang is not None:
            metadata["labels"]["gpu-tenancy/gang"] = gang
            metadata["annotations"] = {"gpu-tenancy/gang-size": size}
        virtual = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": {"containers": [{"name": "main", "image": "busybox"}]},
        }
        return self.syncer.create(to_host(virtual, vcluster="team-nlp"))

    def policies_act(self) -> bool:
        try:
            stored = self.syncer.create(
                to_host(virtual_gang_pod("probe", "probe", 1), vcluster="team-nlp"), dry_run=True
            )
        except ApiError:
            return False
        return "pod-group-name" in (stored["metadata"].get("annotations") or {})

    def delete_pod(self, pod: Json) -> None:
        self.lab.admin.delete("v1", "Pod", pod["metadata"]["name"], pod["metadata"]["namespace"], grace_seconds=0)

    def groups(self) -> dict[str, Json]:
        return {g["metadata"]["name"]: g for g in self.lab.admin.list(*POD_GROUP, TEAM_NAMESPACE)}

    def own_groups(self) -> dict[str, Json]:
        return {name: g for name, g in self.groups().items() if gangs.made_here(g)}

    def events(self, reason: str) -> list[Json]:
        return [e for e in self.lab.admin.list("v1", "Event", TEAM_NAMESPACE) if e.get("reason") == reason]

    def clear(self) -> None:
        """Nothing of an earlier test's left: no pods, PodGroups or Events in team-nlp's namespace. PodGroups go as
        the garbage collector deletes them: the fence refuses anyone else (a cluster-admin too)."""
        collector = self.lab.as_user(GARBAGE_COLLECTOR)
        for kind in (("v1", "Pod"), POD_GROUP, ("v1", "Event")):
            for obj in self.lab.admin.list(*kind, TEAM_NAMESPACE):
                deleter = collector if kind == POD_GROUP else self.lab.admin
                deleter.delete(*kind, obj["metadata"]["name"], TEAM_NAMESPACE, grace_seconds=0)
        eventually(lambda: not self.groups() and not self.lab.admin.list("v1", "Pod", TEAM_NAMESPACE), within=30)


@pytest.fixture
def here(world: World) -> World:
    world.clear()
    return world


@contextmanager
def controller(
    world: World, grace: float = GRACE, heartbeat: Path | None = None, fair_share_url: str = ""
) -> Iterator[threading.Event]:
    stop = threading.Event()
    settings = Settings(
        grace_seconds=grace,
        resync_seconds=1,
        backoff_seconds=0.1,
        heartbeat_file=str(heartbeat or ""),
        fair_share_url=fair_share_url,
    )
    running = Controller(world.api(), settings)
    thread = threading.Thread(target=running.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield stop
    finally:
        stop.set()
        thread.join(timeout=10)
        assert not thread.is_alive(), "the controller did not stop"


def eventually(check: Callable[[], bool], within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError("the API server never reached the expected state")


GROUP = "team-nlp.default.bert"
GARBAGE_COLLECTOR = "system:serviceaccount:kube-system:generic-garbage-collector"


def test_a_gang_gets_one_pod_group_with_its_size_queue_and_priority(here: World) -> None:
    with controller(here):
        for index in range(4):
            here.pod(f"bert-worker-{index}", gang="bert", labels={"priorityClassName": "build"})
        eventually(lambda: len(here.own_groups()) == 1)
        (group,) = here.own_groups().values()
        assert group["metadata"]["name"] == GROUP
        assert {k: group["spec"][k] for k in ("minMember", "queue", "priorityClassName")} == {
            "minMember": 4,
            "queue": "team-nlp",
            "priorityClassName": "build",
        }
        eventually(lambda: len(here.events("GangFormed")) == 4)


def test_pods_outside_tenant_namespaces_and_ungrouped_pods_get_nothing(here: World) -> None:
    stray: Json = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"stray-{uuid.uuid4().hex[:6]}",
            "namespace": "default",
            "labels": {"vcluster.loft.sh/managed-by": "team-nlp"},
            "annotations": {"pod-group-name": "default.x.y", "gpu-tenancy/gang-size": "1"},
        },
        "spec": {"containers": [{"name": "main", "image": "busybox"}], "schedulerName": "kai-scheduler"},
    }
    here.lab.admin.create(stray)
    with controller(here):
        here.pod("ungrouped")
        here.pod("canary", gang="bert", size="1")
        eventually(lambda: set(here.own_groups()) == {GROUP})
        time.sleep(1.5)
        assert set(here.own_groups()) == {GROUP}
        assert not here.lab.admin.list(*POD_GROUP, "default")
    here.lab.admin.delete("v1", "Pod", stray["metadata"]["name"], "default", grace_seconds=0)


def test_a_pod_group_outlives_its_last_pod_by_the_grace_period_and_no_longer(here: World) -> None:
    with controller(here):
        first = here.pod("a", gang="bert", size="2")
        second = here.pod("b", gang="bert", size="2")
        eventually(lambda: len(here.own_groups()) == 1)
        here.delete_pod(first)
        time.sleep(GRACE + 1)
        assert len(here.own_groups()) == 1, "one pod still uses it"
        here.delete_pod(second)
        deleted_at = time.monotonic()
        eventually(lambda: not here.own_groups())
        assert time.monotonic() - deleted_at >= GRACE - 0.1


def test_a_job_resubmitted_with_another_size_gets_a_matching_pod_group_at_once(here: World) -> None:
    """Its old PodGroup, unused, is marked empty: the real admission policy lets the new pods join it, and the
    controller fits it to them, long before the grace period would have let the old one go."""
    grace = 120.0
    with controller(here, grace=grace):
        old = [here.pod(name, gang="bert", size="2") for name in ("a", "b")]
        eventually(lambda: len(here.own_groups()) == 1)
        for pod in old:
            here.delete_pod(pod)
        eventually(lambda: gangs.is_empty(here.own_groups()[GROUP]))
        resubmitted = time.monotonic()
        for index in range(3):
            here.pod(f"c-{index}", gang="bert", size="3", labels={"priorityClassName": "build"})
        eventually(lambda: not gangs.is_empty(here.own_groups()[GROUP]))
        spec = here.own_groups()[GROUP]["spec"]
        assert (spec["minMember"], spec["priorityClassName"], spec["queue"]) == (3, "build", "team-nlp")
        assert time.monotonic() - resubmitted < grace / 4
        # In use again, the group refuses a pod of another size, as before.
        with pytest.raises(ApiError, match="disagrees with PodGroup"):
            here.pod("d", gang="bert", size="2", labels={"priorityClassName": "build"})


def test_the_loop_beats_at_every_list_and_event(here: World, tmp_path: Path) -> None:
    """What the liveness probe reads (tests/test_health_probes.py): fresh while the loop comes round."""
    beat = tmp_path / "alive"
    with controller(here, heartbeat=beat):
        eventually(beat.exists, within=30)
        first = beat.stat().st_mtime_ns
        here.pod("beat", gang="bert", size="1")
        eventually(lambda: beat.stat().st_mtime_ns > first, within=30)


def _kais_pod_group(here: World, pod: Json, more_labels: Json | None = None) -> Json:
    """The PodGroup KAI's pod-grouper makes for an ownerless pod: pg-<pod>-<uid>, owned by the pod, with the pod's
    labels and annotations copied (defaultgrouper/default_grouper.go GetPodGroupMetadata @v0.16.8)."""
    meta = pod["metadata"]
    group = {
        "apiVersion": POD_GROUP[0],
        "kind": POD_GROUP[1],
        "metadata": {
            "name": f"pg-{meta['name']}-{meta['uid']}",
            "namespace": meta["namespace"],
            "labels": {**(meta.get("labels") or {}), **(more_labels or {})},
            "annotations": {k: v for k, v in (meta.get("annotations") or {}).items() if k != "pod-group-name"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]}],
        },
        "spec": {"minMember": 1, "queue": "team-nlp"},
    }
    return here.lab.as_user(POD_GROUPER).create(group)


@pytest.mark.parametrize(
    "labels",
    [{}, {gangs.OWNED[0]: gangs.OWNED[1]}, {gangs.OWNED[0]: gangs.OWNED[1], gangs.GROUP_LABEL: "team-nlp"}],
    ids=["kais-own", "labelled-as-the-controllers", "labelled-as-a-tenants-gang"],
)
def test_kais_own_pod_groups_are_never_deleted_whatever_labels_the_team_gave_its_pod(here: World, labels: Json) -> None:
    """A team that labels its pods as the controller labels its PodGroups would get those labels on KAI's PodGroup;
    if the controller deleted it, the pods would keep their GPUs and count against no queue. The pod policy now
    refuses such a pod (test_kai_bookkeeping.py, round three); a group labelled so (from a pod admitted before that
    policy) is still never the controller's to delete."""
    if labels:
        with pytest.raises(ApiError, match="platform's own"):
            here.pod("escape", labels=labels)
    pod = here.pod("escape")
    kais = _kais_pod_group(here, pod, labels)
    with controller(here):
        here.pod("a", gang="bert", size="1")
        eventually(lambda: GROUP in here.own_groups())
        time.sleep(GRACE + 2.5)
    assert kais["metadata"]["name"] in here.groups(), "KAI's PodGroup was deleted"


def test_a_restart_mid_way_leaks_nothing_and_misses_nothing(here: World) -> None:
    with controller(here):
        first = here.pod("a", gang="bert", size="1")
        eventually(lambda: len(here.own_groups()) == 1)
    # While it is down: the gang goes away, and another comes.
    here.delete_pod(first)
    here.pod("c", gang="next", size="1")
    with controller(here):
        eventually(lambda: set(here.own_groups()) == {"team-nlp.default.next"})


def test_a_gang_whose_pods_disagree_waits_and_says_why(here: World) -> None:
    # Both exist before any PodGroup (once one does, the gang-consistency policy refuses a pod that disagrees).
    here.pod("a", gang="bert", size="4")
    here.pod("b", gang="bert", size="3")
    with controller(here):
        eventually(lambda: len(here.events("GangRefused")) >= 2)
        assert not here.own_groups()
        refusal = here.events("GangRefused")[0]
        assert "disagree on their gang size (3, 4)" in refusal["message"]
        assert refusal["involvedObject"]["apiVersion"] == "v1", "vCluster syncs only events that name v1"


def test_kais_scheduling_conditions_reach_the_pods_once(here: World) -> None:
    with controller(here):
        here.pod("a", gang="bert", size="2")
        here.pod("b", gang="bert", size="2")
        eventually(lambda: len(here.own_groups()) == 1)
        condition = {
            "type": "UnschedulableOnNodePool",
            "nodePool": "default",
            "transitionID": "0",
            "reasons": [{"reason": "OverLimit", "message": "queue team-nlp would exceed its GPU limit"}],
        }
        group = here.own_groups()[GROUP]
        scheduler = here.lab.as_user("system:serviceaccount:kai-scheduler:kai-scheduler")
        try:
            scheduler.patch(group, {"status": {"schedulingConditions": [condition]}}, subresource="status")
        except ApiError:
            scheduler.patch(group, {"status": {"schedulingConditions": [condition]}})
        eventually(lambda: len(here.events("GangUnschedulable")) == 2)
        time.sleep(2)  # further resyncs read the same condition
        told = here.events("GangUnschedulable")
        assert len(told) == 2
        assert {e["involvedObject"]["name"] for e in told} == {
            "a-x-default-x-team-nlp",
            "b-x-default-x-team-nlp",
        }
        assert "would exceed its GPU limit" in told[0]["message"]


def test_gangs_wait_while_kais_pod_group_api_is_not_served(here: World) -> None:
    crd = "podgroups.scheduling.run.ai"
    here.lab.admin.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd)
    eventually(lambda: here.lab.admin.find("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd) is None, 60)
    here.lab.admin.forget_discovery()
    try:
        with controller(here):
            here.pod("a", gang="bert", size="1")
            time.sleep(1.5)
            install_kai_crds(here.lab.admin)
            eventually(lambda: len(here.own_groups()) == 1, within=30)
    finally:
        install_kai_crds(here.lab.admin)


# --- the queue view ------------------------------------------------------------------------------

QUEUE = ("scheduling.run.ai/v2", "Queue")
FAIR_SHARES = """\
# TYPE kai_queue_fair_share_gpu gauge
kai_queue_fair_share_gpu{queue_display_name="",queue_metadata_name="ml-org",queue_name="ml-org"} 3
kai_queue_fair_share_gpu{queue_display_name="",queue_metadata_name="team-nlp",queue_name="team-nlp"} 1.5
"""
"""What KAI's scheduler serves on /metrics (pkg/scheduler/metrics/metrics.go @v0.16.8): a stand-in, since the
lab cannot build KAI's module (docs/lab.md); tests/test_queue_view.py reads this format in full."""


@contextmanager
def metrics_server(text: str) -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = text.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()


def _kai_writes_status(lab: Lab, obj: Json, status: Json) -> None:
    """As KAI's controllers write it: through the status subresource."""
    lab.admin.patch(obj, {"status": status}, subresource="status")


def _view(here: World, namespace: str) -> Json | None:
    return here.lab.admin.find("v1", "ConfigMap", names.QUEUE_VIEW_CONFIGMAP, namespace)


def test_each_team_gets_its_queue_kept_current_and_no_one_else_may_write_it(here: World) -> None:
    """KAI's numbers for the team's queue and its parent, the gang KAI has not started with KAI's reason, then the
    same gang gone from the list once KAI allocates it; the team's syncer cannot forge the view."""
    settings = parse_stack_config(dev_settings())
    for queue in settings.queues:
        here.lab.admin.apply(queue_manifest(queue))
    nlp = here.lab.admin.get(*QUEUE, "team-nlp")
    _kai_writes_status(
        here.lab, nlp, {"allocated": {"nvidia.com/gpu": "250m"}, "requested": {"nvidia.com/gpu": "2250m"}}
    )
    gpu = next(q for q in settings.queues if q.name == "team-nlp").resources.gpu
    with metrics_server(FAIR_SHARES) as url, controller(here, fair_share_url=url):
        here.pod("a", gang="bert", size="2")
        here.pod("b", gang="bert", size="2")
        eventually(lambda: len(here.own_groups()) == 1)
        group = here.own_groups()[GROUP]
        reason = {"reason": "OverLimit", "message": "queue team-nlp would exceed its limit"}
        condition = {"type": "UnschedulableOnNodePool", "nodePool": "default", "reasons": [reason]}
        resources = {"requested": {"nvidia.com/gpu": "2"}}
        _kai_writes_status(here.lab, group, {"schedulingConditions": [condition], "resourcesStatus": resources})
        waiting = "  gang default/bert (2 pods, 2 GPUs): queue team-nlp would exceed its limit"

        def shown(line: str) -> bool:
            view = _view(here, TEAM_NAMESPACE)
            return view is not None and line in view["data"]["summary"].splitlines()

        eventually(lambda: shown(waiting), within=30)
        text = (_view(here, TEAM_NAMESPACE) or {})["data"]["summary"].splitlines()
        assert text[:7] == [
            "Your queue team-nlp, in GPUs:",
            f"  guaranteed (quota)   {gpu.quota:g}",
            f"  cap (limit)          {'none' if gpu.limit == -1 else f'{gpu.limit:g}'}",
            f"  over-quota weight    {gpu.over_quota_weight:g}",
            "  fair share now       1.5",
            "  in use               0.25 (non-preemptible 0)",
            "  asked for            2.25 (running and pending)",
        ]
        assert "Its parent ml-org, in GPUs:" in text
        vision = _view(here, "vcluster-team-vision")
        assert vision is not None
        assert vision["data"]["summary"].startswith("Your queue team-vision")

        resources["allocated"] = {"nvidia.com/gpu": "2"}
        _kai_writes_status(here.lab, here.own_groups()[GROUP], {"resourcesStatus": resources})
        eventually(lambda: shown("Waiting: nothing"), within=30)

        forged = {"data": {"summary": "Your queue team-nlp: unlimited"}}
        with pytest.raises(ApiError, match="only the gang controller writes"):
            here.syncer.patch(_view(here, TEAM_NAMESPACE) or {}, forged)


# --- planning, directly ---------------------------------------------------------------------------


def test_the_program_and_the_platform_name_things_alike() -> None:
    assert gangs.TENANT_LABEL == names.TENANT_LABEL
    assert gangs.QUEUE_LABEL == names.QUEUE_NAMESPACE_LABEL
    assert gangs.POD_GROUP_ANNOTATION == upstream.POD_GROUP_ANNOTATION
    assert gangs.LWS_SIZE_ANNOTATION == upstream.LWS_SIZE_ANNOTATION
    assert gangs.PRIORITY_LABEL == upstream.PRIORITY_LABEL
    assert gangs.PREEMPTIBILITY_LABEL == upstream.PREEMPTIBILITY_LABEL
    assert gangs.DEFAULT_PRIORITY_CLASS == upstream.DEFAULT_PRIORITY_CLASS
    assert gangs.SYNCED_POD_LABEL == upstream.SYNCED_POD_LABEL
    assert upstream.POD_GROUP_API[0] == gangs.POD_GROUP_API_VERSION
    assert gang_rules.GANG_EMPTY_LABEL == gangs.EMPTY_LABEL
    assert dict([gangs.OWNED]) == gang_rules.CONTROLLER_PODGROUP_LABELS
    assert queue_view.VIEW_CONFIGMAP == names.QUEUE_VIEW_CONFIGMAP
    assert queue_view.FAIR_SHARE_METRIC == upstream.KAI_QUEUE_FAIR_SHARE_GPU
    assert queue_view.QUEUE_METRIC_LABEL == upstream.KAI_QUEUE_LABEL


def test_a_lws_group_takes_its_size_from_lws() -> None:
    tenants = {"vcluster-team-nlp": gangs.Tenant("team-nlp", "team-nlp")}
    pod: Json = {
        "metadata": {
            "name": "leader",
            "namespace": TEAM_NAMESPACE,
            "labels": {"vcluster.loft.sh/managed-by": "team-nlp"},
        },
        "spec": {"schedulerName": "kai-scheduler"},
    }
    pod["metadata"]["annotations"] = {
        "pod-group-name": "team-nlp.default.3f2a",
        "leaderworkerset.sigs.k8s.io/size": "3",
    }
    found = gangs.gang_pod(pod, tenants)
    assert found is not None
    assert found.size == 3


# --- a tenant's flood ------------------------------------------------------------------------------

_MEASURE = """
import sys
from gangcontrol.kube import Api
from gangcontrol.run import Controller, Settings
api = Api(sys.argv[1], sys.argv[2], sys.argv[3])
running = Controller(api, Settings())
running.relist()
# VmHWM: this program's own peak (ru_maxrss starts from the forking parent's).
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(len(running.members), len(running.pod_groups), status["VmHWM"].split()[0])
"""


def _flood_pod(index: int, settings: VClusterConfig) -> Json:
    """Team-nlp's pod at both size bounds: annotations (with the syncer's own keys) and its containers' free text."""
    name = f"finished-{index:04d}"
    text = "DATA"
    virtual: Json = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "sweep"}, "annotations": {"notes": ""}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "env": [{"name": text, "value": ""}],
                }
            ],
        },
    }
    # What the syncer adds counts too: its annotations, and the KUBERNETES_* variables it gives every container.
    host = to_host(virtual, vcluster="team-nlp")
    used = sum(len(k) + len(v.encode()) for k, v in host["metadata"]["annotations"].items())
    virtual["metadata"]["annotations"]["notes"] = "n" * (settings.max_pod_annotation_bytes - used)
    written = sum(len(e["name"]) + len(e.get("value", "").encode()) for e in host["spec"]["containers"][0]["env"])
    virtual["spec"]["containers"][0]["env"][0]["value"] = "d" * (settings.max_container_text_bytes - written)
    return to_host(virtual, vcluster="team-nlp")


def test_a_tenants_finished_pods_at_every_bound_fit_the_controllers_memory(here: World) -> None:
    """What one team can keep on the host, all at once: its pods quota running and maxFinishedPods finished, each at
    the annotation and free-text bounds, admitted by the real fence. The controller lists them (metadata alone, a
    page at a time) within a fraction of its memory limit, and the team's gang still gets its PodGroup."""
    reference = parse_stack_config(dev_settings())
    settings = reference.vcluster
    tenant = reference.tenants[0]
    count = int(settings.quota_for(tenant, reference.sized_gpus(tenant))["count/pods"]) + settings.max_finished_pods
    for index in range(count):
        created = here.syncer.create(_flood_pod(index, settings))
        created["status"] = {"phase": "Succeeded"}
        path = here.lab.admin.path("v1", "Pod", TEAM_NAMESPACE, created["metadata"]["name"]) + "/status"
        here.lab.admin.request("PUT", path, created)
    here.pod("a", gang="bert", size="1")
    stored = sum(len(json.dumps(p)) for p in here.lab.admin.list("v1", "Pod", TEAM_NAMESPACE))
    package = Path(__file__).parents[1] / "components" / "gang_controller"
    api = (here.lab.admin.credentials.server, str(here.token()), str(here.lab.admin.credentials.ca))
    measured = subprocess.run(
        [sys.executable, "-S", "-c", _MEASURE, *api],
        env={"PYTHONPATH": str(package)},
        capture_output=True,
        text=True,
        check=True,
    )
    members, _, peak_kib = (int(n) for n in measured.stdout.split())
    limit_mib = int(MEMORY["limits"]["memory"].removesuffix("Mi"))
    print(
        f"flood: {count + 1} pods, {stored / 2**20:.1f} MiB as the API server stores them; "
        f"the controller's peak {peak_kib / 1024:.0f} MiB"
    )
    assert members == 1, "the gang's one pod, and none of the flood"
    assert peak_kib / 1024 < limit_mib / 4, f"the controller peaked at {peak_kib / 1024:.0f} MiB of {limit_mib}"
    with controller(here):
        eventually(lambda: GROUP in here.own_groups(), within=20)


# --- as the Deployment runs it --------------------------------------------------------------------


def test_the_program_runs_from_its_configmap_with_the_standard_library_alone(here: World, tmp_path: Path) -> None:
    """The ConfigMap's files, mounted as the Deployment mounts them, run by a Python without site-packages (-S),
    with the account's token and the cluster's CA."""
    run = run_main(dev_settings())
    program = run.one("kubernetes:core/v1:ConfigMap", "gangs-program").inputs["data"]
    deployment = run.one("kubernetes:apps/v1:Deployment", "gangs-deployment").inputs["spec"]["template"]["spec"]
    (container,) = deployment["containers"]
    mount = container["volumeMounts"][0]["mountPath"]
    assert {item["key"] for item in deployment["volumes"][0]["configMap"]["items"]} == set(program)
    package = tmp_path / mount.strip("/")
    package.mkdir(parents=True)
    for name, text in program.items():
        (package / name).write_text(text)
    here.pod("a", gang="bert", size="1")
    env = {e["name"]: e["value"] for e in container["env"]}
    env.update(
        PYTHONPATH=str(package.parent),
        GANGS_API_URL=here.lab.admin.credentials.server,
        GANGS_TOKEN_FILE=str(here.token()),
        GANGS_CA_FILE=str(here.lab.admin.credentials.ca),
        GANGS_RESYNC_SECONDS="1",
        GANGS_HEARTBEAT_FILE=str(tmp_path / "alive"),
    )
    command = [sys.executable, "-S", *container["command"][1:]]
    process = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        eventually(lambda: len(here.own_groups()) == 1, within=20)
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=20)
    assert process.returncode == 0, output.decode()
    assert b"created PodGroup vcluster-team-nlp/team-nlp.default.bert" in output
    assert (tmp_path / "alive").is_file(), "the heartbeat its liveness probe reads"


WRITES_ELSEWHERE = [
    pytest.param("gpu-tenancy-gangs", POD_GROUP, id="podgroup-in-its-own-namespace"),
    pytest.param("default", POD_GROUP, id="podgroup-in-default"),
    pytest.param("kube-system", ("v1", "ConfigMap"), id="configmap-in-kube-system"),
    pytest.param("default", ("v1", "Event"), id="event-in-default"),
]


def _written(api_version: str, kind: str, namespace: str) -> Json:
    name = f"written-{uuid.uuid4().hex[:8]}"
    metadata = {"name": name, "namespace": namespace}
    if kind == "ConfigMap":
        return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "data": {"k": "v"}}
    if kind == "Event":
        involved = {"kind": "Pod", "name": "p", "namespace": namespace}
        return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "involvedObject": involved}
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": {"minMember": 1, "queue": "q"}}


@pytest.mark.parametrize(("namespace", "kind"), WRITES_ELSEWHERE)
def test_the_controller_writes_in_tenant_namespaces_alone(here: World, namespace: str, kind: tuple[str, str]) -> None:
    """Its write grant is one cluster-wide binding (one per team would cost a registration each); the program's
    policy bounds it, on the real API server, as the controller's own account: RBAC lets the write through
    (authorization comes before admission, so the policy's message proves it), and the policy refuses it.
    Its writes in a team's namespace are what the tests above watch it make."""
    controller = here.lab.admin.impersonating(GANG_CONTROLLER_USER)
    with pytest.raises(ApiError, match="the gang controller writes in tenant namespaces only, not in " + namespace):
        controller.create(_written(*kind, namespace))


def test_the_controller_is_granted_reads_everywhere_and_writes_bounded_by_a_policy() -> None:
    run = run_main(dev_settings())
    bindings = run.of_type("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")
    assert not [b for b in bindings if "GangController" in b.urn], "no grant per team"
    cluster_wide = {b.name: b for b in run.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding")}
    (role,) = [r for r in run.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole") if r.name == "gangs-read"]
    assert cluster_wide["gangs-read"].inputs["roleRef"]["name"] == role.inputs["metadata"]["name"]
    assert {verb for rule in role.inputs["rules"] for verb in rule["verbs"]} == {"get", "list", "watch"}
    guard = run.one("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding", "gangs-tenants-only")
    assert cluster_wide["gangs-write"].depends_on(guard), "the grant waits for its bound"


def test_one_locked_down_replica_of_a_pinned_image() -> None:
    run = run_main(dev_settings())
    spec = run.one("kubernetes:apps/v1:Deployment", "gangs-deployment").inputs["spec"]
    assert (spec["replicas"], spec["strategy"]) == (1, {"type": "Recreate"})
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == upstream.PYTHON_IMAGE_REF
    assert "@sha256:" in container["image"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    namespace = run.one("kubernetes:core/v1:Namespace", "gangs-namespace").inputs["metadata"]["labels"]
    assert namespace["pod-security.kubernetes.io/enforce"] == "restricted"


def test_no_tenants_no_controller() -> None:
    config = dev_settings()
    config["tenants"] = []
    assert not [r for r in run_main(config).registrations if r.name.startswith("gangs")]

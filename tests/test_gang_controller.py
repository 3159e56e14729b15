"""The gang controller, as it runs in its Pod, against a stand-in API server on 127.0.0.1.

Each test starts the real program (components/gang_controller/gangcontrol) in a thread,
changes what the API server holds, and waits for the PodGroups and Events to match.
Pure planning is tested directly at the end.
"""

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from components.gang_controller.gangcontrol import gangs
from components.gang_controller.gangcontrol.kube import Api
from components.gang_controller.gangcontrol.run import Controller, Settings
from config import names, upstream
from harness import dev_settings, run_main
from tests.fake_apiserver import TOKEN, Store, serving

Json = dict[str, Any]
GRACE = 0.6
GROUP = "team-nlp.default.bert"


@pytest.fixture
def store() -> Store:
    store = Store()
    store.add_namespace("vcluster-team-nlp", {names.TENANT_LABEL: "team-nlp", names.QUEUE_NAMESPACE_LABEL: "team-nlp"})
    store.add_namespace(
        "vcluster-team-vision", {names.TENANT_LABEL: "team-vision", names.QUEUE_NAMESPACE_LABEL: "team-vision"}
    )
    store.add_namespace("default")
    return store


@contextmanager
def controller(store: Store, tmp_path: Path) -> Iterator[threading.Event]:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    with serving(store) as url:
        stop = threading.Event()
        running = Controller(Api(url, str(token)), Settings(grace_seconds=GRACE, resync_seconds=1, backoff_seconds=0.1))
        thread = threading.Thread(target=running.run, args=(stop,), daemon=True)
        thread.start()
        try:
            yield stop
        finally:
            stop.set()
            store.end_watches()
            thread.join(timeout=5)
            store.watches_open = True
            assert not thread.is_alive(), "the controller did not stop"


def eventually(check: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("the API server never reached the expected state")


def member(
    name: str,
    *,
    namespace: str = "vcluster-team-nlp",
    group: str = GROUP,
    size: str = "4",
    labels: Json | None = None,
) -> Json:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"vcluster.loft.sh/managed-by": namespace.removeprefix("vcluster-"), **(labels or {})},
            "annotations": {"pod-group-name": group, "gpu-tenancy/gang-size": size},
        },
        "spec": {"schedulerName": "kai-scheduler"},
    }


def own_groups(store: Store) -> dict[tuple[str, str], Json]:
    with store.lock:
        return {key: group for key, group in store.pod_groups.items() if group["metadata"].get("labels")}


def test_a_gang_gets_one_pod_group_with_its_size_queue_and_priority(store: Store, tmp_path: Path) -> None:
    with controller(store, tmp_path):
        for index in range(4):
            store.put_pod(member(f"bert-worker-{index}", labels={"priorityClassName": "build"}))
        eventually(lambda: len(own_groups(store)) == 1)
        (group,) = own_groups(store).values()
        assert group["metadata"]["name"] == GROUP
        assert group["metadata"]["namespace"] == "vcluster-team-nlp"
        assert group["spec"] == {"minMember": 4, "queue": "team-nlp", "priorityClassName": "build"}
        eventually(lambda: len([e for e in store.events if e["reason"] == "GangFormed"]) == 4)


def test_pods_outside_tenant_namespaces_and_foreign_names_get_nothing(store: Store, tmp_path: Path) -> None:
    with controller(store, tmp_path):
        store.put_pod(member("stray", namespace="default", group="default.x.y"))
        store.put_pod(member("thief", group="team-vision.default.gang"))
        store.put_pod(member("ungrouped", group="pg-ungrouped-uid"))
        store.put_pod(member("canary"))
        eventually(lambda: set(own_groups(store)) == {("vcluster-team-nlp", GROUP)})
        time.sleep(0.3)
        assert set(own_groups(store)) == {("vcluster-team-nlp", GROUP)}


def test_a_pod_group_outlives_its_last_pod_by_the_grace_period_and_no_longer(store: Store, tmp_path: Path) -> None:
    with controller(store, tmp_path):
        store.put_pod(member("a", size="2"))
        store.put_pod(member("b", size="2"))
        eventually(lambda: len(own_groups(store)) == 1)
        store.delete_pod("vcluster-team-nlp", "a")
        time.sleep(GRACE + 0.3)
        assert len(own_groups(store)) == 1, "one pod still uses it"
        store.delete_pod("vcluster-team-nlp", "b")
        deleted_at = time.monotonic()
        assert len(own_groups(store)) == 1
        eventually(lambda: not own_groups(store))
        assert time.monotonic() - deleted_at >= GRACE - 0.1


def test_kais_own_pod_groups_are_never_touched(store: Store, tmp_path: Path) -> None:
    kais = {"metadata": {"name": "pg-job-uid", "namespace": "vcluster-team-nlp"}, "spec": {"minMember": 1}}
    store.pod_groups[("vcluster-team-nlp", "pg-job-uid")] = kais
    with controller(store, tmp_path):
        store.put_pod(member("a", size="1"))
        eventually(lambda: len(own_groups(store)) == 1)
        store.delete_pod("vcluster-team-nlp", "a")
        eventually(lambda: not own_groups(store))
    assert ("vcluster-team-nlp", "pg-job-uid") in store.pod_groups
    assert not [r for r in store.requests if r[0] == "DELETE" and "pg-job-uid" in r[1]]


def test_a_restart_mid_way_leaks_nothing_and_misses_nothing(store: Store, tmp_path: Path) -> None:
    with controller(store, tmp_path):
        store.put_pod(member("a", size="1"))
        eventually(lambda: len(own_groups(store)) == 1)
    # While it is down: the gang goes away, and another comes.
    store.delete_pod("vcluster-team-nlp", "a")
    store.put_pod(member("c", group="team-nlp.default.next", size="1"))
    with controller(store, tmp_path):
        eventually(lambda: set(own_groups(store)) == {("vcluster-team-nlp", "team-nlp.default.next")})


def test_an_expired_watch_is_followed_by_a_new_list(store: Store, tmp_path: Path) -> None:
    with controller(store, tmp_path):
        store.put_pod(member("a", size="1"))
        eventually(lambda: len(own_groups(store)) == 1)
        lists_before = store.requests.count(("GET", "/api/v1/pods"))
        store.expire()
        store.put_pod(member("b", group="team-nlp.default.after-expiry", size="1"))
        eventually(lambda: len(own_groups(store)) == 2)
        assert store.requests.count(("GET", "/api/v1/pods")) > lists_before


def test_a_gang_whose_pods_disagree_waits_and_says_why(store: Store, tmp_path: Path) -> None:
    with controller(store, tmp_path):
        store.put_pod(member("a", size="4"))
        store.put_pod(member("b", size="3"))
        eventually(lambda: len([e for e in store.events if e["reason"] == "GangRefused"]) >= 2)
        assert not own_groups(store)
        refusal = next(e for e in store.events if e["reason"] == "GangRefused")
        assert "disagree on their gang size (3, 4)" in refusal["message"]
        assert refusal["involvedObject"]["apiVersion"] == "v1", "vCluster syncs only events that name v1"


def test_kais_scheduling_conditions_reach_the_pods_once(store: Store, tmp_path: Path) -> None:
    with controller(store, tmp_path):
        store.put_pod(member("a", size="2"))
        store.put_pod(member("b", size="2"))
        eventually(lambda: len(own_groups(store)) == 1)
        condition = {
            "type": "UnschedulableOnNodePool",
            "nodePool": "default",
            "transitionID": "0",
            "reasons": [{"reason": "OverLimit", "message": "queue team-nlp would exceed its GPU limit"}],
        }
        store.set_pod_group_status("vcluster-team-nlp", GROUP, {"schedulingConditions": [condition]})
        eventually(lambda: len([e for e in store.events if e["reason"] == "GangUnschedulable"]) == 2)
        time.sleep(1.5)  # another resync reads the same condition
        told = [e for e in store.events if e["reason"] == "GangUnschedulable"]
        assert len(told) == 2
        assert {e["involvedObject"]["name"] for e in told} == {"a", "b"}
        assert "would exceed its GPU limit" in told[0]["message"]


def test_gangs_wait_while_kais_pod_group_api_is_not_served(store: Store, tmp_path: Path) -> None:
    store.serves_pod_groups = False
    with controller(store, tmp_path):
        store.put_pod(member("a", size="1"))
        time.sleep(0.5)
        assert not store.pod_groups
        store.serves_pod_groups = True
        eventually(lambda: len(own_groups(store)) == 1)


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


def test_a_lws_group_takes_its_size_from_lws() -> None:
    tenants = {"vcluster-team-nlp": gangs.Tenant("team-nlp", "team-nlp")}
    pod = member("leader", group="team-nlp.default.3f2a")
    pod["metadata"]["annotations"] = {
        "pod-group-name": "team-nlp.default.3f2a",
        "leaderworkerset.sigs.k8s.io/size": "3",
    }
    found = gangs.gang_pod(pod, tenants)
    assert found is not None
    assert found.size == 3


# --- as the Deployment runs it --------------------------------------------------------------------


def test_the_program_runs_from_its_configmap_with_the_standard_library_alone(store: Store, tmp_path: Path) -> None:
    """The ConfigMap's files, mounted as the Deployment mounts them, run by a Python without site-packages (-S)."""
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
    (tmp_path / "token").write_text(TOKEN)
    store.put_pod(member("a", size="1"))
    with serving(store) as url:
        env = {e["name"]: e["value"] for e in container["env"]}
        env.update(
            PYTHONPATH=str(package.parent),
            GANGS_API_URL=url,
            GANGS_TOKEN_FILE=str(tmp_path / "token"),
            GANGS_RESYNC_SECONDS="1",
        )
        command = [sys.executable, "-S", *container["command"][1:]]
        process = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            eventually(lambda: len(own_groups(store)) == 1, within=10)
        finally:
            process.send_signal(signal.SIGTERM)
            store.end_watches()
            output, _ = process.communicate(timeout=10)
    assert process.returncode == 0, output.decode()
    assert b"created PodGroup vcluster-team-nlp/team-nlp.default.bert" in output


def test_the_controller_may_write_only_in_tenant_namespaces() -> None:
    run = run_main(dev_settings())
    bindings = run.of_type("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")
    writers = [b for b in bindings if b.inputs["roleRef"]["name"] == "gpu-tenancy-gang-controller-write"]
    assert sorted(b.inputs["metadata"]["namespace"] for b in writers) == [
        "vcluster-team-nlp",
        "vcluster-team-recommender",
        "vcluster-team-vision",
    ]
    cluster_wide = run.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding")
    (reader,) = [b for b in cluster_wide if b.name == "gangs-read"]
    (role,) = [r for r in run.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole") if r.name == "gangs-read"]
    assert reader.inputs["roleRef"]["name"] == role.inputs["metadata"]["name"]
    assert {verb for rule in role.inputs["rules"] for verb in rule["verbs"]} == {"get", "list", "watch"}


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

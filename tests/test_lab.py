"""`python -m harness.lab`: its contract, and what runs for real and what is faked.

One lab of this module's own, driven through the command line as a user drives it, beside
the session's shared lab (two labs side by side). The reference stack is applied to a lab
with its real tenants in tests/test_lab_tenants.py, which starts one anyway: three vClusters
are the costliest thing the lab runs.
"""

import ipaddress
import time
from collections.abc import Iterator
from typing import Any

import pytest

from harness.lab import cluster
from harness.lab.cluster import wait_for
from harness.lab.images import runs_as_processes
from harness.lab.processes import Process
from harness.lab.stages import COMPLETE_AFTER, EXIT_CODE
from tests.lab import Lab, lab_command, private_lab

Json = dict[str, Any]


@pytest.fixture(scope="module")
def own() -> Iterator[Lab]:
    with private_lab("cli") as lab:
        yield lab


def _lab_json(lab: Lab) -> Json:
    found = cluster.read_lab(lab.state)
    assert found is not None
    return found


def test_lab_json_says_what_runs_and_the_api_server_is_1_36(own: Lab) -> None:
    lab = _lab_json(own)
    assert lab["schema"] == 1
    assert lab["kubernetes"].startswith("v1.36.")
    assert lab["apiServer"]["url"].endswith(f":{lab['apiServer']['port']}")
    version = own.admin.request("GET", "/version")
    assert version["gitVersion"] == lab["kubernetes"]
    assert [n["gpus"] for n in lab["nodes"]] == [0, 2, 2]
    assert {n["product"] for n in lab["nodes"] if n["gpus"]} == {"NVIDIA-L40S"}
    real = {name for name, p in lab["processes"].items() if p["real"]}
    assert {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"} <= real
    assert lab["processes"]["lab-kubelet"]["real"] is False
    assert all(Process.of(p).alive() for p in lab["processes"].values())


def test_the_gpu_nodes_are_labelled_as_the_gpu_operator_labels_them(own: Lab) -> None:
    for node in own.admin.list("v1", "Node", selector="nvidia.com/gpu.present=true"):
        labels, allocatable = node["metadata"]["labels"], node["status"]["allocatable"]
        assert (labels["nvidia.com/gpu.product"], labels["nvidia.com/gpu.count"]) == ("NVIDIA-L40S", "2")
        assert labels["nvidia.com/gpu.memory"] == "46068"
        assert allocatable["nvidia.com/gpu"] == "2"
        ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert ready["Ready"] == "True"


def test_a_second_up_starts_nothing(own: Lab) -> None:
    before = _lab_json(own)["processes"]
    result = lab_command("up", "--state", str(own.state), timeout=120)
    assert result.returncode == 0, result.stderr
    assert "already running" in result.stderr
    assert {k: v["pid"] for k, v in _lab_json(own)["processes"].items()} == {k: v["pid"] for k, v in before.items()}


def test_two_labs_run_side_by_side(own: Lab, lab: Lab) -> None:
    ours, shared = _lab_json(own), _lab_json(lab)
    assert ours["apiServer"]["port"] != shared["apiServer"]["port"]
    assert ours["network"]["octet"] != shared["network"]["octet"]
    for state in (own.state, lab.state):
        assert lab_command("status", "--state", str(state), timeout=60).returncode == 0


def _job(name: str, image: str, args: list[str], **pod: Any) -> Json:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": image, "command": ["/bin/kubectl"], "args": args}],
                    **pod,
                }
            },
        },
    }


def _job_condition(lab: Lab, name: str) -> str | None:
    job = lab.admin.get("batch/v1", "Job", name, "default")
    found = [c["type"] for c in job.get("status", {}).get("conditions") or [] if c["status"] == "True"]
    return next((c for c in found if c in ("Complete", "Failed")), None)


def test_a_pod_whose_images_the_lab_has_runs_as_a_process_with_its_token(own: Lab) -> None:
    """kubectl, in its own network namespace, reaches the API server at the `kubernetes` Service's ClusterIP
    with the token of its ServiceAccount, and is told who it is."""
    job = _job(
        "whoami", "registry.k8s.io/kubectl:v1.36.0", ["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"]
    )
    own.admin.create(job)
    assert wait_for(lambda: _job_condition(own, "whoami") is not None, 60)
    assert _job_condition(own, "whoami") == "Complete"
    (pod,) = own.admin.list("v1", "Pod", "default", selector="job-name=whoami")
    assert runs_as_processes(pod)
    assert pod["status"]["podIP"].startswith(f"10.{_lab_json(own)['network']['octet']}.1.")
    log = next((own.state / "logs" / "pods").glob(f"default_{pod['metadata']['name']}_main.log")).read_text()
    assert log.strip() == "system:serviceaccount:default:default"


def test_a_program_its_image_does_not_ship_fails_as_it_would_in_the_image(own: Lab) -> None:
    """The kubectl image is distroless: no shell."""
    job = _job("no-shell", "registry.k8s.io/kubectl:v1.36.0", [])
    job["spec"]["template"]["spec"]["containers"][0]["command"] = ["sh", "-c", "echo hi"]
    own.admin.create(job)
    assert wait_for(lambda: _job_condition(own, "no-shell") is not None, 60)
    assert _job_condition(own, "no-shell") == "Failed"


def _pod(name: str, annotations: Json | None = None) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": {"containers": [{"name": "main", "image": "nvcr.io/nvidia/cuda:13.0.1-base-ubuntu24.04"}]},
    }


def _phase(lab: Lab, name: str) -> str | None:
    found = lab.admin.find("v1", "Pod", name, "default")
    return None if found is None else found.get("status", {}).get("phase")


def test_kwok_fakes_every_other_pod_and_says_when_a_tests_pod_ends(own: Lab) -> None:
    own.admin.create(_pod("runs"))
    own.admin.create(_pod("ends", {COMPLETE_AFTER: "2s"}))
    own.admin.create(_pod("fails", {COMPLETE_AFTER: "1s", EXIT_CODE: "3"}))
    assert wait_for(lambda: _phase(own, "runs") == "Running", 30)
    started = time.monotonic()
    assert wait_for(lambda: _phase(own, "ends") == "Succeeded", 30)
    assert time.monotonic() - started >= 0.5
    assert wait_for(lambda: _phase(own, "fails") == "Failed", 30)
    failed = own.admin.get("v1", "Pod", "fails", "default")
    assert failed["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3
    octet = _lab_json(own)["network"]["octet"]
    # KWOK's range: each fake node has a /24 of it (harness/lab/network.py), whichever the scheduler picked.
    fakes = ipaddress.ip_network(f"10.{octet}.128.0/17")
    assert ipaddress.ip_address(own.admin.get("v1", "Pod", "runs", "default")["status"]["podIP"]) in fakes
    # One image the lab has and one it has not: the whole pod is KWOK's (stages.py and images.py agree).
    mixed = _pod("mixed")
    mixed["spec"]["containers"].append({"name": "kubectl", "image": "registry.k8s.io/kubectl:v1.36.0"})
    own.admin.create(mixed)
    assert wait_for(lambda: _phase(own, "mixed") == "Running", 30)
    assert ipaddress.ip_address(own.admin.get("v1", "Pod", "mixed", "default")["status"]["podIP"]) in fakes
    time.sleep(3)
    assert _phase(own, "runs") == "Running", "a pod no test ends runs on"


def test_a_deleted_faked_pod_goes_when_its_grace_period_is_over(own: Lab) -> None:
    own.admin.create(_pod("graceful"))
    assert wait_for(lambda: _phase(own, "graceful") == "Running", 30)
    asked = time.monotonic()
    own.admin.delete("v1", "Pod", "graceful", "default", grace_seconds=3)
    assert wait_for(lambda: own.admin.find("v1", "Pod", "graceful", "default") is None, 30, 0.1)
    # deletionTimestamp is whole seconds: the grace period ends up to a second before asked + 3 s.
    assert time.monotonic() - asked >= 2


def test_status_names_a_part_that_is_down_and_down_is_idempotent(own: Lab) -> None:
    Process.of(_lab_json(own)["processes"]["kwok"]).stop()
    result = lab_command("status", "--state", str(own.state), timeout=60)
    assert result.returncode == 1
    assert "kwok is down" in result.stderr
    assert lab_command("status", "--state", str(own.state), "--json", timeout=60).returncode == 1
    for _ in range(2):
        assert lab_command("down", "--state", str(own.state), timeout=120).returncode == 0
    assert lab_command("status", "--state", str(own.state), timeout=60).returncode == 2
    assert (own.state / "logs" / "kube-apiserver.log").is_file(), "the logs stay"

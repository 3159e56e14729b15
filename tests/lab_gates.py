"""A gate's Job, as the program registers it, run in the lab: the real Job controller, the real kubectl.

The gate's ServiceAccount, RBAC, files and Job are applied as registered; the lab's kubelet
runs the pod's steps (init containers, then the last) with the lab's kubectl build, each
with the account's own token, so a step the gate's RBAC does not allow fails here too.
Two things are shortened so a test takes seconds, not the gate's real quarter of an hour:
each step's `--timeout` (what it waits for is not touched) and, where a test says so, the
Job's backoffLimit and activeDeadlineSeconds.
"""

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import ProgramRun, Registration
from harness.lab.apply import manifest
from harness.lab.cluster import wait_for
from harness.lab.kube import ApiError
from tests.lab import Lab, apply_registrations, ensure_namespace

Json = dict[str, Any]
JOB = "kubernetes:batch/v1:Job"
GATE = "gpu-tenancy:index:Gate"
SHORT_WAIT = "--timeout=3s"


@dataclass
class Step:
    name: str
    ran: bool
    exit_code: int | None
    log: str


@dataclass
class GatePod:
    name: str
    phase: str
    steps: list[Step] = field(default_factory=list)


@dataclass
class Outcome:
    passed: bool
    pods: list[GatePod]

    @property
    def failed_pods(self) -> list[GatePod]:
        return [p for p in self.pods if p.phase == "Failed"]

    def ran(self, step: str) -> bool:
        return any(s.ran for p in self.pods for s in p.steps if s.name == step)


def _gate_parts(run: ProgramRun, job_name: str) -> tuple[Registration, list[Registration]]:
    """The Job and what its Gate made for it; a Job without a Gate of its own (a tenant's kubeconfig gate, which
    runs as an existing account) has no parts."""
    job = run.one(JOB, job_name)
    component = job.parent
    if f"{GATE}::" not in component:
        assert job.inputs["spec"]["template"]["metadata"]["annotations"].get("gpu-tenancy/vouches-for") is not None, (
            f"{job.name} is not a gate's Job"
        )
        return job, []
    parts = [r for r in run.registrations if r.parent == component and r.type != JOB]
    return job, parts


def run_gate(
    lab: Lab,
    run: ProgramRun,
    job_name: str,
    *,
    backoff_limit: int | None = 0,
    restart_policy: str | None = None,
    within: float = 120,
) -> Outcome:
    """The gate's Job run to its end in the lab: passed, and each pod's steps with what each said."""
    job, parts = _gate_parts(run, job_name)
    manifest = job_manifest(job, backoff_limit=backoff_limit, restart_policy=restart_policy)
    namespace = manifest["metadata"]["namespace"]
    for where in {namespace, *(r.inputs.get("metadata", {}).get("namespace") for r in parts)} - {None}:
        ensure_namespace(lab, where)
    apply_registrations(lab, sorted(parts, key=lambda r: "Binding" in r.type))
    name = manifest["metadata"]["name"]
    _delete_job(lab, namespace, name)
    lab.admin.create(manifest)
    assert wait_for(lambda: _ended(lab, namespace, name) is not None, within, 0.25), f"{name} never ended"
    passed = _ended(lab, namespace, name) == "Complete"
    return Outcome(passed, _pods(lab, namespace, name))


def job_manifest(job: Registration, *, backoff_limit: int | None, restart_policy: str | None) -> Json:
    found = manifest(job)
    assert found is not None
    spec = found["spec"]
    if backoff_limit is not None:
        spec["backoffLimit"] = backoff_limit
    spec["activeDeadlineSeconds"] = 300
    pod = spec["template"]["spec"]
    if restart_policy is not None:
        pod["restartPolicy"] = restart_policy
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        container["args"] = [re.sub(r"^--timeout=\d+s$", SHORT_WAIT, a) for a in container.get("args", [])]
    return found


def _delete_job(lab: Lab, namespace: str, name: str) -> None:
    try:
        lab.admin.request(
            "DELETE",
            lab.admin.path("batch/v1", "Job", namespace, name),
            {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"},
        )
    except ApiError as error:
        if error.code != 404:
            raise
    assert wait_for(lambda: lab.admin.find("batch/v1", "Job", name, namespace) is None, 60, 0.2)
    assert wait_for(lambda: not lab.admin.list("v1", "Pod", namespace, selector=f"job-name={name}"), 60, 0.2)


def _ended(lab: Lab, namespace: str, name: str) -> str | None:
    job = lab.admin.get("batch/v1", "Job", name, namespace)
    true = [c["type"] for c in (job.get("status") or {}).get("conditions") or [] if c["status"] == "True"]
    return next((c for c in true if c in ("Complete", "Failed")), None)


def _pods(lab: Lab, namespace: str, name: str) -> list[GatePod]:
    time.sleep(0.5)  # the last pod's final status
    pods = []
    for pod in sorted(
        lab.admin.list("v1", "Pod", namespace, selector=f"job-name={name}"),
        key=lambda p: p["metadata"]["creationTimestamp"],
    ):
        status = pod.get("status") or {}
        found = GatePod(pod["metadata"]["name"], status.get("phase", ""))
        for entry in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            terminated = entry.get("state", {}).get("terminated")
            log = Path(lab.state / "logs" / "pods" / f"{namespace}_{pod['metadata']['name']}_{entry['name']}.log")
            found.steps.append(
                Step(
                    entry["name"],
                    ran=terminated is not None or "running" in entry.get("state", {}),
                    exit_code=None if terminated is None else terminated["exitCode"],
                    log=log.read_text() if log.is_file() else "",
                )
            )
        pods.append(found)
    return pods

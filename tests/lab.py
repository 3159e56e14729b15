"""The lab for the tests: one per test session, shared by every worker, stopped when the session ends.

The first test that asks for it starts it (`harness.lab up` on .cache/lab/pytest, under a
lock, so two workers start one), installs KAI's CRDs from the pinned chart and registers
KAI's webhook stand-in (tests/kai_webhook.py). The session's controller stops it at the
end, unless it was already running before (a developer's own, left as it was).

Outside CI a machine that cannot run the lab (not Linux, not root, no Go) skips these
tests, saying why; in CI (`CI=true`) that is a failure naming the fix.
"""

import base64
import contextlib
import fcntl
import functools
import os
import platform
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import ROOT, Registration
from harness.lab import cluster
from harness.lab import pki as lab_pki
from harness.lab.apply import manifest
from harness.lab.build import built
from harness.lab.kube import ApiError, Kube
from harness.lab.processes import free_port, start
from harness.tools import chart_path
from tests.kai_webhook import KAI_SERVING_LABEL, NAME, NAMESPACE

STATE = ROOT / ".cache" / "lab" / "pytest"
RUN_VARIABLE = "GPU_TENANCY_LAB_RUN"
"""Set by the session's controller; the worker that starts the lab writes it to STARTED_BY."""
STARTED_BY = STATE / "started-by"
KAI_CHART = "kai-scheduler-v0.16.8.tgz"
ADMIN_GROUPS = ("system:authenticated", "system:masters")
"""Added to every impersonated identity: what the tests check is admission, not RBAC (the whole stack's apply
checks the program's RBAC), and the policies decide by username alone."""


def unavailable() -> str | None:
    """Why this machine cannot run the lab, or None."""
    if platform.system() != "Linux":
        return "the lab runs on Linux only"
    if os.geteuid() != 0:
        return "the lab needs root (network namespaces and mounts): run the tests as root"
    if built() is None and shutil.which("go") is None:
        return "the lab builds with Go 1.26: install Go, then `python -m harness.tools build-lab`"
    if chart_path(KAI_CHART) is None:
        return "the KAI chart is missing: `python -m harness.tools pull-charts`"
    return None


@dataclass(frozen=True)
class Lab:
    state: Path
    admin: Kube
    gateway: str

    def as_user(self, user: str) -> Kube:
        return self.admin.impersonating(user, ADMIN_GROUPS)

    def kubectl(self) -> Path:
        return Path(cluster.read_lab(self.state)["binaries"]) / "kubectl"  # type: ignore[index]


@functools.cache
def shared_lab() -> Lab:
    reason = unavailable()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"the lab cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE.parent / "pytest.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lab = cluster.read_lab(STATE)
        if lab is None or cluster.down_parts(lab):
            cluster.up(STATE)
            STARTED_BY.write_text(os.environ.get(RUN_VARIABLE, ""))
            lab = cluster.read_lab(STATE)
            assert lab is not None
        admin = cluster.admin_client(STATE)
        install_kai_crds(admin)
        if "kai-webhook-stand-in" not in lab["processes"]:
            serve_kai_webhook(STATE, admin)
    lab = cluster.read_lab(STATE)
    assert lab is not None
    return Lab(STATE, admin, lab["network"]["gateway"])


def install_kai_crds(admin: Kube) -> None:
    """KAI's CRDs as its chart installs them (crds/ of the pinned chart), so PodGroups and Queues are served."""
    chart = chart_path(KAI_CHART)
    assert chart is not None
    with tarfile.open(chart) as archive:
        for member in archive.getmembers():
            if member.isfile() and member.name.startswith("kai-scheduler/crds/"):
                extracted = archive.extractfile(member)
                assert extracted is not None
                for document in yaml.safe_load_all(extracted.read()):
                    if document:
                        admin.apply(document, manager="helm")
    for name in ("podgroups.scheduling.run.ai", "queues.scheduling.run.ai"):
        assert cluster.wait_for(functools.partial(_established, admin, name), 60), f"CRD {name} not established"
        assert cluster.wait_for(functools.partial(_discovered, admin, name), 60), f"CRD {name} not discovered"
    admin.forget_discovery()


def _established(admin: Kube, name: str) -> bool:
    crd = admin.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def _discovered(admin: Kube, name: str) -> bool:
    """Every served version of the CRD lists it in discovery. That comes a moment after Established: a CRD deleted
    and made again has answered 404 for its group version in between (the API server's discovery handlers are
    updated on their own)."""
    crd = admin.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
    spec = crd["spec"]
    for version in (v["name"] for v in spec["versions"] if v.get("served")):
        try:
            listed = admin.request("GET", f"/apis/{spec['group']}/{version}").get("resources", [])
        except ApiError as error:
            if error.code == 404:
                return False
            raise
        if spec["names"]["plural"] not in {r["name"] for r in listed}:
            return False
    return True


def serve_kai_webhook(state: Path, admin: Kube) -> None:
    """Start the stand-in, add it to lab.json (so `down` stops it) and register it as KAI registers its own: it
    mutates pods in namespaces labelled KAI_SERVING_LABEL=serving."""
    lab = cluster.read_lab(state)
    assert lab is not None
    gateway = lab["network"]["gateway"]
    folder = state / "kai-webhook"
    folder.mkdir(exist_ok=True)
    authority = lab_pki.Authority.create()
    name = lab_pki.subject(f"{NAME}.{NAMESPACE}.svc")
    certificate, key = authority.issue(name, server_names=(f"{NAME}.{NAMESPACE}.svc", gateway))
    (folder / "tls.crt").write_bytes(certificate)
    (folder / "tls.key").write_bytes(key)
    port = free_port()
    process = start(
        [
            sys.executable,
            "-m",
            "tests.kai_webhook",
            "--address",
            gateway,
            "--port",
            str(port),
            "--certificate",
            str(folder / "tls.crt"),
            "--key",
            str(folder / "tls.key"),
        ],
        state / "logs" / "kai-webhook-stand-in.log",
        version="v0.16.8 (modelled)",
        real=False,
        ports={"https": port},
        cwd=ROOT,
    )
    process.program = Path(sys.executable).name
    lab["processes"]["kai-webhook-stand-in"] = process.to_data()
    cluster.write_lab(state, lab)
    admin.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    admin.apply(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]},
        }
    )
    admin.apply(
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {"kubernetes.io/service-name": NAME}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [gateway], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        }
    )
    webhook: dict[str, Any] = {
        "name": "pods.kai-webhook.lab.gpu-tenancy.dev",
        "clientConfig": {
            "service": {"name": NAME, "namespace": NAMESPACE, "path": "/mutate", "port": 443},
            "caBundle": base64.b64encode(authority.certificate_pem).decode(),
        },
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
        "namespaceSelector": {"matchLabels": {KAI_SERVING_LABEL: "serving"}},
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 10,
    }
    admin.apply(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": NAME},
            "webhooks": [webhook],
        }
    )


@contextlib.contextmanager
def private_lab(name: str, *, kai_crds: bool = True) -> Iterator[Lab]:
    """A lab of this module's own (its own API server, so nothing else in the session meets what it does),
    stopped at the end; with `kai_crds=False` it is bare, as a cluster is while KAI installs."""
    reason = unavailable()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"the lab cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    state = STATE.parent / f"{name}-{worker}"
    cluster.down(state, progress=lambda line: None)
    cluster.up(state, progress=lambda line: None)
    try:
        admin = cluster.admin_client(state)
        if kai_crds:
            install_kai_crds(admin)
        lab = cluster.read_lab(state)
        assert lab is not None
        yield Lab(state, admin, lab["network"]["gateway"])
    finally:
        cluster.down(state, progress=lambda line: None)


def apply_registrations(lab: Lab, registrations: Iterable[Registration]) -> None:
    """Registered Kubernetes objects, by server-side apply as pulumi-kubernetes applies them (harness/lab/apply.py),
    in the order given."""
    for registration in registrations:
        obj = manifest(registration)
        if obj is not None:
            lab.admin.apply(obj, manager="pulumi-kubernetes")


def stop_if_ours(run: str) -> None:
    """At the session's end: `down`, if this session started the lab."""
    if run and STARTED_BY.is_file() and STARTED_BY.read_text() == run:
        cluster.down(STATE, progress=lambda line: None)
        STARTED_BY.unlink(missing_ok=True)


def kubectl(lab: Lab, *args: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The lab's real kubectl, as cluster-admin unless another kubeconfig is given."""
    config = kubeconfig or cluster.LabPaths(lab.state).kubeconfig
    return subprocess.run(
        [str(lab.kubectl()), "--kubeconfig", str(config), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def ensure_namespace(lab: Lab, name: str, labels: dict[str, str] | None = None, annotations: Any = None) -> None:
    """A namespace with these labels, and its default ServiceAccount (the ServiceAccount admission plugin refuses
    a pod before the controller manager made it)."""
    metadata: dict[str, Any] = {"name": name, "labels": dict(labels or {})}
    if annotations:
        metadata["annotations"] = dict(annotations)
    lab.admin.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": metadata})
    assert cluster.wait_for(lambda: lab.admin.find("v1", "ServiceAccount", "default", name) is not None, 60, 0.05), (
        f"no default ServiceAccount in {name}"
    )


def delete_namespace(lab: Lab, name: str) -> None:
    with contextlib.suppress(ApiError):
        lab.admin.delete("v1", "Namespace", name)


def lab_command(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """`python -m harness.lab ARGS`, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "harness.lab", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )

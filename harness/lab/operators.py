"""The workload operators a team installs in its vCluster, run by the lab as processes against the tenant's API.

In a real tenant an operator is a Deployment inside the vCluster, whose pod the syncer carries to
the host, where KAI schedules it. KAI cannot be built here (docs/lab.md), so nothing would bind
that pod. The lab runs the operator's own build instead (from the Go module proxy, at the version
its lock file pins) as a local process, after applying inside the tenant what the operator's
release manifests install (its CRDs, namespace, ServiceAccount, RBAC and Secrets), and gives it
that ServiceAccount's token: it sees and may do what its own RBAC lets it, and what it writes
goes through the tenant's API server and the real syncer, as its pod's would.

Not applied: the Deployment (the process stands in for it), and the Service and admission
webhooks, which the tenant's API server would call through a Service whose pod never runs here.
A team's object is therefore not validated by the operator's webhook in the lab.
"""

import base64
import json
import os
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.lab import processes
from harness.lab.build import COMPONENTS, Component, version_of
from harness.lab.cluster import read_lab

NOT_APPLIED = frozenset({"Deployment", "Service", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"})
TOKEN_LIFETIME = "48h"


@dataclass(frozen=True)
class Certificates:
    """A webhook server's certificates, which its Deployment mounts from a Secret the operator fills itself."""

    secret: str
    folder: str
    """Where the operator reads them (hard-coded in the operator: it is not a flag)."""


@dataclass(frozen=True)
class Operator:
    name: str
    binary: str
    """The lab's build (build.COMPONENTS)."""
    manifests: str
    """The release's kustomization, a folder of the operator's Go module, rendered with `kubectl kustomize`."""
    namespace: str
    service_account: str
    arguments: tuple[str, ...]
    """Its Deployment's arguments, with each listening port turned off or moved off the ports the lab uses."""
    kinds: frozenset[str]
    """The kinds a team writes that it turns into pods."""
    certificates: Certificates | None = None

    @property
    def component(self) -> Component:
        return next(c for c in COMPONENTS if c.binary == self.binary)

    @property
    def version(self) -> str:
        return version_of(self.component)


OPERATORS = (
    # kubeflow/training-operator manifests/overlays/standalone (namespace kubeflow, the webhook Secret),
    # cmd/training-operator.v1/main.go (flags; MY_POD_NAMESPACE) and pkg/cert/cert.go (certificates read from
    # /tmp/k8s-webhook-server/serving-certs, the Secret training-operator-webhook-cert) @v1.8.1.
    Operator(
        "training-operator",
        "training-operator",
        "manifests/overlays/standalone",
        "kubeflow",
        "training-operator",
        ("--metrics-bind-address=0", "--health-probe-bind-address=0", "--webhook-server-port={free}"),
        frozenset({"PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "MXJob"}),
        Certificates("training-operator-webhook-cert", "/tmp/k8s-webhook-server/serving-certs"),
    ),
    # ray-project/kuberay ray-operator/config/default (namespace default) and main.go (flags; webhooks only with
    # ENABLE_WEBHOOKS=true; leader election on by default, which needs an in-cluster namespace) @v1.5.0.
    Operator(
        "kuberay-operator",
        "kuberay-operator",
        "config/default",
        "default",
        "kuberay-operator",
        ("--metrics-addr=0", "--health-probe-bind-address=0", "--enable-leader-election=false"),
        frozenset({"RayCluster", "RayJob", "RayService"}),
    ),
)
BY_NAME = {operator.name: operator for operator in OPERATORS}


def module_folder(component: Component) -> Path:
    """The operator's Go module as the module cache holds it (the build downloaded it)."""
    found = subprocess.run(
        ["go", "mod", "download", "-json", f"{component.module}@{version_of(component)}"],
        cwd=component.main_module,
        env={**os.environ, "GOFLAGS": "-mod=readonly", "GOTOOLCHAIN": "local"},
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(json.loads(found.stdout)["Dir"])


def release_objects(operator: Operator, kubectl: Path) -> list[dict[str, Any]]:
    """What the operator's release manifests install, less NOT_APPLIED."""
    folder = module_folder(operator.component) / operator.manifests
    rendered = subprocess.run([str(kubectl), "kustomize", str(folder)], capture_output=True, text=True, check=True)
    objects = [o for o in yaml.safe_load_all(rendered.stdout) if o]
    return [o for o in objects if o["kind"] not in NOT_APPLIED]


class RunningOperator:
    """An operator process for one tenant; it dies with the process that started it."""

    def __init__(self, operator: Operator, process: processes.Process, kubectl: list[str], scratch: Path) -> None:
        self.operator = operator
        self.process = process
        self._kubectl = kubectl
        self._scratch = scratch
        self._stopping = threading.Event()
        self._mounter: threading.Thread | None = None
        if operator.certificates is not None:
            self._mounter = threading.Thread(target=self._mount_certificates, daemon=True)
            self._mounter.start()

    def _mount_certificates(self) -> None:
        """The kubelet's Secret volume: the Secret's keys as files in the folder the operator reads, kept current."""
        certificates = self.operator.certificates
        assert certificates is not None
        folder = self._scratch / "tmp" / certificates.folder.removeprefix("/tmp/")
        folder.mkdir(parents=True, exist_ok=True)
        while not self._stopping.wait(1.0):
            read = subprocess.run(
                [*self._kubectl, "get", "secret", certificates.secret, "-n", self.operator.namespace, "-o", "json"],
                capture_output=True,
                text=True,
                check=False,
            )
            if read.returncode != 0:
                continue
            for key, value in (json.loads(read.stdout).get("data") or {}).items():
                content = base64.b64decode(value)
                target = folder / key
                if not target.exists() or target.read_bytes() != content:
                    target.write_bytes(content)

    def stop(self) -> None:
        self._stopping.set()
        self.process.stop()
        if self._mounter is not None:
            self._mounter.join(timeout=5)


def _operator_kubeconfig(tenant_kubeconfig: Path, token: str, path: Path) -> None:
    """The tenant's kubeconfig with the ServiceAccount's token as its user: what the operator's pod would hold."""
    config = yaml.safe_load(tenant_kubeconfig.read_text())
    config["users"] = [{"name": "operator", "user": {"token": token}}]
    for context in config["contexts"]:
        context["context"]["user"] = "operator"
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        yaml.safe_dump(config, file)


def _command(operator: Operator, binary: Path, scratch: Path) -> Sequence[str]:
    """Its binary with its arguments, dying with the lab process that runs it. An operator that reads its
    certificates from a fixed folder gets that folder of its own: the scratch copy mounted over it in a private
    mount namespace, and nothing else (the rest of /tmp stays the machine's, where a checkout, and so the lab's
    state and the operator's kubeconfig, may be; the folder itself is left on the machine, empty)."""
    arguments = [a.replace("{free}", str(processes.free_port())) for a in operator.arguments]
    command = ["setpriv", "--pdeathsig", "TERM"]
    if operator.certificates is None:
        return [*command, str(binary), *arguments]
    folder = operator.certificates.folder
    copy = scratch / "tmp" / folder.removeprefix("/tmp/")
    copy.mkdir(parents=True, exist_ok=True)
    inner = 'mkdir -p "$1" && mount --bind "$0" "$1" && shift && exec "$@"'
    return [
        *command,
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        inner,
        str(copy),
        folder,
        str(binary),
        *arguments,
    ]


def start_operator(operator: Operator, tenant: str, state: Path) -> RunningOperator:
    """Install `operator` in the tenant's vCluster (its release's objects, as its team's kubectl applies them)
    and run it there with its own ServiceAccount."""
    lab = read_lab(state)
    if lab is None:
        raise SystemExit(f"lab: no lab in {state}: `python -m harness.lab up --state {state}` first")
    binaries = Path(lab["binaries"])
    kubectl = binaries / "kubectl"
    tenant_kubeconfig = state / "tenants" / tenant / "kubeconfig"
    if not tenant_kubeconfig.is_file():
        raise SystemExit(f"lab: no tenant {tenant} in {state}: `python -m harness.lab status --state {state}`")
    as_team = [str(kubectl), f"--kubeconfig={tenant_kubeconfig}", "--request-timeout=30s"]
    objects = release_objects(operator, kubectl)
    listing = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    subprocess.run(
        [*as_team, "apply", "--server-side", "--force-conflicts", "--field-manager=lab-operators", "-f", "-"],
        input=listing,
        capture_output=True,
        text=True,
        check=True,
    )
    crds = [f"crd/{o['metadata']['name']}" for o in objects if o["kind"] == "CustomResourceDefinition"]
    subprocess.run(
        [*as_team, "wait", "--for=condition=established", "--timeout=60s", *crds],
        capture_output=True,
        check=True,
    )
    token = subprocess.run(
        [*as_team, "create", "token", operator.service_account, "-n", operator.namespace, "--duration", TOKEN_LIFETIME],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    folder = state / "operators" / tenant / operator.name
    kubeconfig = folder / "kubeconfig"
    _operator_kubeconfig(tenant_kubeconfig, token, kubeconfig)
    environment = {"KUBECONFIG": str(kubeconfig), "MY_POD_NAMESPACE": operator.namespace}
    process = processes.start(
        _command(operator, binaries / operator.binary, folder),
        state / "logs" / f"operator-{tenant}-{operator.name}.log",
        version=operator.version,
        environment=environment,
    )
    return RunningOperator(operator, process, as_team, folder)

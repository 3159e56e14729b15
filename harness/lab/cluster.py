"""`up`, `status` and `down`: the lab's control plane and fake nodes, started and stopped as local processes.

The control plane is configured as MicroK8s 1.36 runs it once this project's `rbac` add-on
is on (canonical/microk8s microk8s-resources/default-args/* @v1.36; microk8s-core-addons
addons/rbac/enable sets --authorization-mode=RBAC,Node), with three lab-only changes, each
for something a machine without a kubelet or kube-proxy lacks, and one record for the tests:
- etcd 3.6 instead of MicroK8s' dqlite behind kine, as the issue asks;
- --enable-aggregator-routing, so the API server reaches a webhook's Service at its
  endpoint (the pod's address on the lab's bridge) instead of a ClusterIP no one routes
  (cmd/kube-apiserver/app/server.go buildServiceResolver @v1.36.3);
- KWOK in place of kubelets, and the lab's kubelet (kubelet.py) for pods it runs itself;
- an audit log of what service accounts write (WRITES_POLICY), so a test can read what a
  tenant's real syncer sent the host, refused or not.
"""

import base64
import json
import os
import shutil
import ssl
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.lab import pki as lab_pki
from harness.lab.build import build, pinned_versions
from harness.lab.kube import ApiError, Credentials, Kube
from harness.lab.network import KUBERNETES_SERVICE_IP, SERVICE_CIDR, LabNetwork, claim_network
from harness.lab.processes import Process, free_port, start, wait_until
from harness.lab.stages import FAKE_NODE_ANNOTATION, stages_yaml, storage_class
from harness.lab.tenants import tenants

SCHEMA = 1
GPU_PRODUCT = "NVIDIA-L40S"
GPU_MEMORY_MIB = 46068
"""An L40S as the GPU Operator's feature discovery labels it (gpu.product, gpu.memory in MiB)."""
CPU_NODE = "lab-control-plane"
NVIDIA_RUNTIME_CLASSES = ("nvidia", "nvidia-cdi", "nvidia-legacy")
ROOT = Path(__file__).resolve().parents[2]
Progress = Callable[[str], None]
WRITES_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Request
  userGroups: [system:serviceaccounts]
  verbs: [create, update, patch]
  resources:
  - group: ""
    resources: [pods, pods/ephemeralcontainers, pods/resize, pods/status, services, endpoints, configmaps, secrets]
  - group: discovery.k8s.io
    resources: [endpointslices]
- level: None
"""
"""The lab's one audit rule: every write of these kinds by a service account, with the object as sent, refused or
not (the API server logs a request's event when it completes, whatever its answer). A tenant's syncer is one
(`system:serviceaccount:vcluster-<team>:vc-<team>`), so the log shows what the real syncer sent the host."""


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class LabPaths:
    state: Path

    @property
    def lab_json(self) -> Path:
        return self.state / "lab.json"

    @property
    def kubeconfig(self) -> Path:
        return self.state / "kubeconfig"

    @property
    def pki(self) -> Path:
        return self.state / "pki"

    @property
    def config(self) -> Path:
        return self.state / "config"

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    @property
    def writes(self) -> Path:
        """The audit log of what service accounts write (WRITES_POLICY): what a tenant's syncer sent the host."""
        return self.logs / "writes.log"


def read_lab(state: Path) -> dict[str, Any] | None:
    path = LabPaths(state).lab_json
    return json.loads(path.read_text()) if path.is_file() else None


def write_lab(state: Path, lab: dict[str, Any]) -> None:
    path = LabPaths(state).lab_json
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(lab, indent=1, sort_keys=True) + "\n")
    temporary.replace(path)


def admin_client(state: Path) -> Kube:
    lab = read_lab(state)
    if lab is None:
        raise SystemExit(f"lab: no lab in {state} (python -m harness.lab up --state {state})")
    pki = lab_pki.Pki(LabPaths(state).pki)
    certificate, key = pki.client(lab_pki.ADMIN)
    return Kube(Credentials(lab["apiServer"]["url"], pki.ca, certificate, key))


def _kubeconfig(server: str, pki: lab_pki.Pki, identity: lab_pki.Identity, *, embed: bool) -> str:
    certificate, key = pki.client(identity)
    if embed:

        def data(path: Path) -> str:
            return base64.b64encode(path.read_bytes()).decode()

        cluster = f"certificate-authority-data: {data(pki.ca)}"
        user = f"client-certificate-data: {data(certificate)}\n    client-key-data: {data(key)}"
    else:
        cluster = f"certificate-authority: {pki.ca}"
        user = f"client-certificate: {certificate}\n    client-key: {key}"
    return f"""apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster:
    server: {server}
    {cluster}
users:
- name: {identity.user}
  user:
    {user}
contexts:
- name: lab
  context: {{cluster: lab, user: {identity.user}}}
current-context: lab
"""


def _https_ok(url: str, pki: lab_pki.Pki, *, verify: bool = True) -> bool:
    context = ssl.create_default_context(cafile=str(pki.ca)) if verify else ssl._create_unverified_context()
    certificate, key = pki.client(lab_pki.ADMIN)
    context.load_cert_chain(str(certificate), str(key))
    with urllib.request.urlopen(url, context=context, timeout=5) as response:
        return bool(response.status == 200)


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=5) as response:
        return bool(response.status == 200)


def _node(name: str, index: int, network: LabNetwork, *, gpus: int, kubernetes: str) -> dict[str, Any]:
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
    }
    capacity = {"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "1Ti"}
    if gpus:
        # What the GPU Operator's feature discovery and device plugin give a GPU node (config/upstream.py).
        labels |= {
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": GPU_PRODUCT,
            "nvidia.com/gpu.count": str(gpus),
            "nvidia.com/gpu.memory": str(GPU_MEMORY_MIB),
            "nvidia.com/cuda.driver-version.full": "580.95.05",
        }
        capacity["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {FAKE_NODE_ANNOTATION: "fake"}},
        "spec": {"podCIDR": network.node_cidr(index), "podCIDRs": [network.node_cidr(index)]},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "addresses": [
                {"type": "InternalIP", "address": network.node_address(index)},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {"kubeletVersion": kubernetes, "operatingSystem": "linux", "architecture": "amd64"},
        },
    }


def _lab_is_running(state: Path) -> bool:
    lab = read_lab(state)
    return lab is not None and not down_parts(lab)


def up(state: Path, *, gpu_nodes: int = 2, gpus_per_node: int = 2, progress: Progress = _say) -> dict[str, Any]:
    """Start a bare lab in `state` and return once it is ready; a lab already running there is left as it is."""
    if os.geteuid() != 0:
        raise SystemExit("lab: run as root: the lab creates a bridge and a network namespace per process pod")
    state = state.resolve()
    if _lab_is_running(state):
        progress(f"lab: already running in {state}")
        lab = read_lab(state)
        assert lab is not None
        return lab
    if read_lab(state) is not None:
        progress(f"lab: {state} holds a lab that is partly down; stopping what is left first")
        down(state, progress=progress)
    bringup = _Bringup(state, build(progress), progress)
    bringup.store_and_api()
    bringup.controllers()
    names = bringup.nodes(gpu_nodes, gpus_per_node)
    kwok = bringup.kwok()
    bringup.kubelet()
    wait_until(lambda: _cluster_ready(bringup.admin, names), "the nodes and default accounts", kwok)
    progress(f"lab: up in {state}; KUBECONFIG={bringup.paths.kubeconfig}")
    return bringup.lab


class _Bringup:
    """One lab's start, part by part, each recorded in lab.json as it starts."""

    def __init__(self, state: Path, binaries: Path, progress: Progress) -> None:
        self.state, self.binaries, self.progress = state, binaries, progress
        self.paths = LabPaths(state)
        for folder in (self.paths.config, self.paths.logs):
            folder.mkdir(parents=True, exist_ok=True)
        # A new cluster: what an earlier one held (its data, what apply recorded it installed) goes with it.
        for stale in ("etcd", "apply", "run", "pods"):
            shutil.rmtree(state / stale, ignore_errors=True)
        (state / "kubelet.ready").unlink(missing_ok=True)
        self.versions = pinned_versions()
        self.kubernetes = self.versions["k8s.io/kubernetes"]
        self.network = claim_network()
        names = ("etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler", "kwok")
        self.ports = {name: free_port() for name in names}
        self.server = f"https://{self.network.gateway}:{self.ports['apiserver']}"
        self.pki = lab_pki.create_pki(self.paths.pki, (self.network.gateway, KUBERNETES_SERVICE_IP, "127.0.0.1"))
        self.lab: dict[str, Any] = {
            "schema": SCHEMA,
            "kubernetes": self.kubernetes,
            "apiServer": {"url": self.server, "port": self.ports["apiserver"]},
            "network": {"bridge": self.network.bridge, "octet": self.network.octet, "gateway": self.network.gateway},
            "binaries": str(binaries),
            "nodes": [],
            "processes": {},
            "faked": [],
        }
        write_lab(state, self.lab)

    def launch(self, name: str, command: list[str], version: str, *, real: bool = True, **extra: Any) -> Process:
        self.progress(f"lab: starting {name} {version}")
        process = start(command, self.paths.logs / f"{name}.log", version=version, real=real, **extra)
        self.lab["processes"][name] = process.to_data()
        write_lab(self.state, self.lab)
        return process

    def binary(self, name: str) -> str:
        return str(self.binaries / name)

    @property
    def admin(self) -> Kube:
        return admin_client(self.state)

    def store_and_api(self) -> None:
        ports, paths, pki = self.ports, self.paths, self.pki
        peer = f"http://127.0.0.1:{ports['etcd-peer']}"
        etcd = self.launch(
            "etcd",
            [
                self.binary("etcd"),
                "--name=lab",
                f"--data-dir={self.state / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{ports['etcd']}",
                f"--advertise-client-urls=http://127.0.0.1:{ports['etcd']}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=lab={peer}",
                "--listen-metrics-urls=",
                "--log-level=warn",
            ],
            self.versions["go.etcd.io/etcd/server/v3"],
            ports={"client": ports["etcd"], "peer": ports["etcd-peer"]},
        )
        wait_until(lambda: _http_ok(f"http://127.0.0.1:{ports['etcd']}/health"), "etcd", etcd)
        admission = paths.config / "admission.yaml"
        admission.write_text(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n"
            f"- name: EventRateLimit\n  path: {paths.config / 'eventconfig.yaml'}\n"
        )
        (paths.config / "eventconfig.yaml").write_text(
            "apiVersion: eventratelimit.admission.k8s.io/v1alpha1\nkind: Configuration\n"
            "limits:\n- type: Server\n  qps: 5000\n  burst: 20000\n"
        )
        audit_policy = paths.config / "writes-policy.yaml"
        audit_policy.write_text(WRITES_POLICY)
        gateway = self.network.gateway
        apiserver = self.launch(
            "kube-apiserver",
            [
                self.binary("kube-apiserver"),
                # MicroK8s 1.36's own arguments, with RBAC,Node from the rbac add-on.
                f"--cert-dir={paths.pki}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=RBAC,Node",
                f"--service-account-key-file={pki.service_account_key}",
                f"--client-ca-file={pki.ca}",
                f"--tls-cert-file={pki.server_certificate}",
                f"--tls-private-key-file={pki.server_key}",
                f"--secure-port={ports['apiserver']}",
                f"--etcd-servers=http://127.0.0.1:{ports['etcd']}",
                "--allow-privileged=true",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-signing-key-file={pki.service_account_key}",
                "--event-ttl=5m",
                "--profiling=false",
                "--feature-gates=ListFromCacheSnapshot=false,SizeBasedListCostEstimate=false,"
                "DetectCacheInconsistency=false",
                "--enable-admission-plugins=EventRateLimit",
                f"--admission-control-config-file={admission}",
                # The lab's own: its address on the bridge, and webhooks reached at their endpoints.
                f"--bind-address={gateway}",
                f"--advertise-address={gateway}",
                "--enable-aggregator-routing=true",
                # What service accounts write, with the object as sent (WRITES_POLICY).
                f"--audit-policy-file={audit_policy}",
                f"--audit-log-path={paths.writes}",
                "--audit-log-format=json",
                "--audit-log-maxsize=200",
                "--audit-log-maxbackup=1",
            ],
            self.kubernetes,
            ports={"https": ports["apiserver"]},
        )
        wait_until(lambda: _https_ok(f"{self.server}/readyz", pki), "kube-apiserver", apiserver, timeout=180)
        for component, identity in (
            ("controller-manager", lab_pki.CONTROLLER_MANAGER),
            ("scheduler", lab_pki.SCHEDULER),
            ("kwok", lab_pki.KWOK),
            ("kubelet", lab_pki.KUBELET),
        ):
            (paths.config / f"{component}.kubeconfig").write_text(_kubeconfig(self.server, pki, identity, embed=False))
        paths.kubeconfig.write_text(_kubeconfig(self.server, pki, lab_pki.ADMIN, embed=True))
        paths.kubeconfig.chmod(0o600)

    def controllers(self) -> None:
        ports, paths, pki = self.ports, self.paths, self.pki
        leader = ["--leader-elect-lease-duration=60s", "--leader-elect-renew-deadline=30s", "--profiling=false"]
        controller_manager = self.launch(
            "kube-controller-manager",
            [
                self.binary("kube-controller-manager"),
                f"--kubeconfig={paths.config / 'controller-manager.kubeconfig'}",
                f"--service-account-private-key-file={pki.service_account_key}",
                f"--root-ca-file={pki.ca}",
                f"--cluster-signing-cert-file={pki.ca}",
                f"--cluster-signing-key-file={pki.ca_key}",
                "--use-service-account-credentials",
                *leader,
                f"--secure-port={ports['controller-manager']}",
                "--bind-address=127.0.0.1",
            ],
            self.kubernetes,
            ports={"https": ports["controller-manager"]},
        )
        scheduler = self.launch(
            "kube-scheduler",
            [
                self.binary("kube-scheduler"),
                f"--kubeconfig={paths.config / 'scheduler.kubeconfig'}",
                *leader,
                f"--secure-port={ports['scheduler']}",
                "--bind-address=127.0.0.1",
            ],
            self.kubernetes,
            ports={"https": ports["scheduler"]},
        )
        for process, port in ((controller_manager, ports["controller-manager"]), (scheduler, ports["scheduler"])):
            wait_until(
                lambda port=port: _https_ok(f"https://127.0.0.1:{port}/healthz", pki, verify=False),
                process.program,
                process,
            )

    def nodes(self, gpu_nodes: int, gpus_per_node: int) -> list[str]:
        """The CPU node and the GPU nodes, and what the program's add-ons and the GPU Operator give a cluster:
        MicroK8s' hostpath StorageClass (provisioned by KWOK's volume stages) and the RuntimeClasses of the
        runtimes the GPU Operator's toolkit configures (operator.runtimeClass nvidia: NVIDIA/gpu-operator
        deployments/gpu-operator/values.yaml @v26.3.3; with CDI also nvidia-cdi and nvidia-legacy:
        NVIDIA/nvidia-container-toolkit cmd/nvidia-ctk-installer)."""
        admin = self.admin
        nodes = [(CPU_NODE, 0)] + [(f"lab-gpu-{i}", gpus_per_node) for i in range(1, gpu_nodes + 1)]
        for index, (name, gpus) in enumerate(nodes):
            node = _node(name, index, self.network, gpus=gpus, kubernetes=self.kubernetes)
            admin.create(node)
            admin.patch(node, {"status": node["status"]}, subresource="status")
            product, memory = (GPU_PRODUCT, GPU_MEMORY_MIB) if gpus else (None, None)
            self.lab["nodes"].append({"name": name, "gpus": gpus, "product": product, "memoryMiB": memory})
        admin.create(storage_class())
        for runtime in NVIDIA_RUNTIME_CLASSES:
            runtime_class = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": runtime}}
            admin.create({**runtime_class, "handler": runtime})
        write_lab(self.state, self.lab)
        return [name for name, _ in nodes]

    def kwok(self) -> Process:
        stages = self.paths.config / "kwok-stages.yaml"
        stages.write_text(stages_yaml())
        port = self.ports["kwok"]
        kwok = self.launch(
            "kwok",
            [
                self.binary("kwok"),
                f"--kubeconfig={self.paths.config / 'kwok.kubeconfig'}",
                f"--config={stages}",
                f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}=fake",
                f"--server-address=127.0.0.1:{port}",
                f"--cidr={self.network.fake_pod_cidr}",
                f"--node-ip={self.network.gateway}",
            ],
            self.versions["sigs.k8s.io/kwok"],
            ports={"http": port},
        )
        wait_until(lambda: _http_ok(f"http://127.0.0.1:{port}/healthz"), "kwok", kwok)
        return kwok

    def kubelet(self) -> None:
        kubelet = self.launch(
            "lab-kubelet",
            [sys.executable, "-m", "harness.lab.kubelet", "--state", str(self.state)],
            "gpu-tenancy",
            real=False,
            cwd=ROOT,
        )
        kubelet.program = Path(sys.executable).name
        self.lab["processes"]["lab-kubelet"] = kubelet.to_data()
        write_lab(self.state, self.lab)
        wait_until((self.state / "kubelet.ready").is_file, "lab-kubelet", kubelet)


def _cluster_ready(admin: Kube, nodes: list[str]) -> bool:
    for name in nodes:
        node = admin.get("v1", "Node", name)
        ready = [c for c in node.get("status", {}).get("conditions", []) if c["type"] == "Ready"]
        if not ready or ready[0]["status"] != "True":
            return False
    try:
        admin.get("v1", "ServiceAccount", "default", "default")
        admin.get("v1", "ConfigMap", "kube-root-ca.crt", "default")
    except ApiError:
        return False
    return True


def down_parts(lab: dict[str, Any]) -> list[str]:
    return [name for name, data in lab.get("processes", {}).items() if not Process.of(data).alive()]


def status(state: Path, *, as_json: bool = False) -> int:
    """0 when everything runs, 1 when a part is down (named, with its log's tail), 2 when there is no lab."""
    lab = read_lab(state.resolve())
    if lab is None:
        print(f"lab: no lab in {state}", file=sys.stderr)
        return 2
    down_now = down_parts(lab)
    if not down_now:
        try:
            admin_client(state).request("GET", "/readyz")
        except (ApiError, OSError) as error:
            down_now = ["kube-apiserver (not ready: " + str(error) + ")"]
    if as_json:
        print(json.dumps({**lab, "down": down_now}, indent=1, sort_keys=True))
    else:
        for name, data in sorted(lab["processes"].items()):
            process = Process.of(data)
            flag = "up" if name not in down_now else "DOWN"
            ports = ", ".join(f"{k} {v}" for k, v in process.ports.items())
            print(f"{name:24} {flag:5} pid {process.pid:<8} {process.version:10} {ports}")
        print(f"API server {lab['apiServer']['url']}; KUBECONFIG={LabPaths(state.resolve()).kubeconfig}")
        if lab.get("faked"):
            print(f"faked by KWOK: {len(lab['faked'])} pods (lab.json `faked`)")
        if not down_now:
            for tenant in tenants(admin_client(state), state.resolve()):
                where = f"KUBECONFIG={tenant.kubeconfig}" if tenant.kubeconfig else "no kubeconfig yet"
                print(
                    f"tenant {tenant.name:17} {'ready' if tenant.ready else 'starting':8} vCluster {tenant.version:7} "
                    f"{tenant.namespace}; {where}"
                )
    for name in down_now:
        data = lab["processes"].get(name)
        if data:
            print(f"lab: {name} is down; the end of {data['log']}:\n{Process.of(data).log_tail()}", file=sys.stderr)
    return 1 if down_now else 0


def down(state: Path, *, progress: Progress = _say) -> None:
    """Stop everything `up` and `apply` started, in reverse, and remove the network; the logs stay."""
    state = state.resolve()
    lab = read_lab(state)
    if lab is None:
        progress(f"lab: nothing runs in {state}")
        return
    for name in reversed(list(lab.get("processes", {}))):
        process = Process.of(lab["processes"][name])
        if process.alive():
            progress(f"lab: stopping {name}")
        process.stop()
    octet = lab.get("network", {}).get("octet")
    if octet is not None:
        LabNetwork(int(octet)).remove()
    for leftover in ("lab.json", "kubelet.ready"):
        (state / leftover).unlink(missing_ok=True)
    progress(f"lab: down; logs kept in {LabPaths(state).logs}")


def wait_for(check: Callable[[], bool], timeout: float, interval: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval)
    return False

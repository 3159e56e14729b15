"""The lab's kubelet: it runs, as local processes, the pods whose every image the lab has (images.py).

What a kubelet does for such a pod, this does too, from the pod as the API server holds it:
a network namespace with an address on the lab's bridge (network.py), the Services'
ClusterIPs forwarded inside it (forwarder.py), /etc/hosts naming every Service, the
ServiceAccount token by TokenRequest bound to the pod, ConfigMap, Secret, projected,
downward-API, emptyDir and bound PersistentVolumeClaim volumes, the env with its references, init containers in
order then the containers, each in its image's root as its user (podexec.py); restarts
by restartPolicy, readiness by the pod's httpGet and tcpSocket probes, status written
back, and deletion after SIGTERM and the grace period. It is the lab's own program, not
the kubelet: no cgroups, resource limits, image pulls, exec, logs API or port-forward.
KWOK fakes every other pod (stages.py). Needs root: namespaces, mounts, users.
"""

import argparse
import base64
import contextlib
import datetime
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tarfile
import threading
import time
import traceback
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.lab import pki as lab_pki
from harness.lab.images import KAI_CHART_CRDS, Image, image_for, runs_as_processes
from harness.lab.images import tag as image_tag
from harness.lab.kube import ApiError, Credentials, Kube
from harness.lab.network import KUBERNETES_SERVICE_IP, LabNetwork
from harness.tools import chart_path

Json = dict[str, Any]
ROOT = Path(__file__).resolve().parents[2]
MAX_PODS = 15_750
"""Addresses on the bridge (network.py pod_address)."""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _log(message: str) -> None:
    print(f"{_now()} {message}", flush=True)


def kai_chart_crds(tag: str) -> Path:
    """The crds/ folder of the KAI chart of the image's tag, unpacked once: what that crd-upgrader image holds
    (its Dockerfile copies deployments/kai-scheduler/crds, which the chart packages as crds/)."""
    chart = chart_path(f"kai-scheduler-{tag}.tgz")
    if chart is None:
        raise RuntimeError(f"the KAI chart {tag} is missing: python -m harness.tools pull-charts")
    target = ROOT / ".cache" / "lab" / f"kai-chart-crds-{tag}"
    if not target.is_dir():
        staging = target.with_name(target.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        with tarfile.open(chart) as archive:
            for member in archive.getmembers():
                if member.isfile() and member.name.startswith("kai-scheduler/crds/"):
                    extracted = archive.extractfile(member)
                    assert extracted is not None
                    (staging / Path(member.name).name).write_bytes(extracted.read())
        staging.rename(target)
    return target


@dataclass
class Services:
    """Every Service with its ready endpoints, refreshed from the API server, written where pods read it."""

    admin: Kube
    folder: Path
    gateway: str
    entries: list[Json] = field(default_factory=list)
    by_namespace: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def refresh(self) -> None:
        services = self.admin.list("v1", "Service")
        slices = self.admin.list("discovery.k8s.io/v1", "EndpointSlice")
        endpoints: dict[tuple[str, str], list[Json]] = {}
        for entry in slices:
            owner = (entry.get("metadata", {}).get("labels") or {}).get("kubernetes.io/service-name")
            if owner:
                endpoints.setdefault((entry["metadata"]["namespace"], owner), []).append(entry)
        entries: list[Json] = []
        # Every node port at the lab's gateway, which stands for every node's address (the stack's host.address
        # in the lab), as kube-proxy serves it on a node: a tenant's kubeconfig names it.
        node_ports: list[Json] = []
        names: dict[str, list[tuple[str, str]]] = {}
        for service in services:
            meta, spec = service["metadata"], service.get("spec", {})
            address = spec.get("clusterIP")
            if not address or address == "None":
                continue
            names.setdefault(meta["namespace"], []).append((meta["name"], address))
            for port in spec.get("ports", []):
                if port.get("protocol", "TCP") != "TCP":
                    continue
                targets = []
                for slice_ in endpoints.get((meta["namespace"], meta["name"]), []):
                    numbers = [
                        p["port"] for p in slice_.get("ports") or [] if p.get("name", "") == port.get("name", "")
                    ]
                    for endpoint in slice_.get("endpoints") or []:
                        if (endpoint.get("conditions") or {}).get("ready", True) is False:
                            continue
                        targets += [[a, n] for a in endpoint.get("addresses", []) for n in numbers]
                entries.append({"ip": address, "port": port["port"], "endpoints": targets})
                if port.get("nodePort"):
                    node_ports.append({"ip": self.gateway, "port": port["nodePort"], "endpoints": targets})
        self.entries, self.by_namespace = entries, names
        _write_in_place(self.folder / "services.json", json.dumps(entries))
        _write_in_place(self.folder / "node-ports.json", json.dumps(node_ports))

    def hosts(self, namespace: str, pod_name: str, pod_address: str) -> str:
        lines = ["127.0.0.1 localhost", f"{pod_address} {pod_name}"]
        for space, services in sorted(self.by_namespace.items()):
            for name, address in services:
                forms = [f"{name}.{space}.svc.cluster.local", f"{name}.{space}.svc", f"{name}.{space}"]
                if space == namespace:
                    forms.append(name)
                lines.append(f"{address} {' '.join(forms)}")
        return "\n".join(lines) + "\n"


def _write_in_place(path: Path, text: str) -> None:
    """Rewrite a file keeping its inode, so a bind mount of it in a pod's root sees the new content."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        handle.seek(0)
        if handle.read() == text:
            return
        handle.seek(0)
        handle.truncate()
        handle.write(text)


@dataclass
class Container:
    spec: Json
    init: bool
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    exit_code: int | None = None
    started_at: str | None = None
    finished_at: str | None = None
    ready: bool = False
    message: str = ""


class PodRunner(threading.Thread):
    """One pod, from its first status to its deletion."""

    def __init__(self, kubelet: "LabKubelet", pod: Json, index: int) -> None:
        super().__init__(daemon=True, name=f"pod-{pod['metadata']['namespace']}/{pod['metadata']['name']}")
        self.kubelet = kubelet
        self.pod = pod
        self.index = index
        self.uid = str(pod["metadata"]["uid"])
        self.folder = kubelet.state / "pods" / self.uid
        self.address = ""
        self.namespace_path = ""
        self.deleting = threading.Event()
        self.containers: list[Container] = []
        self.lock = threading.Lock()

    # The pod's sandbox: network, hosts, volumes.

    @property
    def pod_name(self) -> str:
        return str(self.pod["metadata"]["name"])

    @property
    def pod_namespace(self) -> str:
        return str(self.pod["metadata"]["namespace"])

    def _sandbox(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        network_namespace, self.address = self.kubelet.network.attach(self.index)
        self.namespace_path = f"/run/netns/{network_namespace}"
        self.refresh_hosts()
        (self.folder / "resolv.conf").write_text(
            f"search {self.pod_namespace}.svc.cluster.local svc.cluster.local cluster.local\n"
            "nameserver 127.0.0.53\noptions ndots:5\n"
        )

    def refresh_hosts(self) -> None:
        if self.address:
            text = self.kubelet.services.hosts(self.pod_namespace, self.pod_name, self.address)
            _write_in_place(self.folder / "hosts", text)

    def _volume_folder(self, name: str) -> Path:
        return self.folder / "volumes" / name

    def _write_items(
        self, folder: Path, data: Mapping[str, bytes], items: list[Json] | None, mode: int, *, optional: bool
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        chosen = items or [{"key": key, "path": key} for key in data]
        for item in chosen:
            if item["key"] not in data:
                if optional:
                    continue
                raise RuntimeError(f"key {item['key']} is missing")
            target = folder / item["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data[item["key"]])
            target.chmod(item.get("mode", mode) & 0o777)

    def _source_data(self, kind: str, name: str, *, optional: bool) -> dict[str, bytes]:
        found = self.kubelet.admin.find("v1", kind, name, self.pod_namespace)
        if found is None:
            if optional:
                return {}
            raise RuntimeError(f"{kind} {self.pod_namespace}/{name} does not exist")
        if kind == "Secret":
            return {k: base64.b64decode(v) for k, v in (found.get("data") or {}).items()}
        data = {k: v.encode() for k, v in (found.get("data") or {}).items()}
        data.update({k: base64.b64decode(v) for k, v in (found.get("binaryData") or {}).items()})
        return data

    def _token(self, audience: str | None, seconds: int) -> bytes:
        account = self.pod["spec"].get("serviceAccountName") or "default"
        body: Json = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": seconds,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": self.pod_name, "uid": self.uid},
            },
        }
        if audience:
            body["spec"]["audiences"] = [audience]
        path = self.kubelet.admin.path("v1", "ServiceAccount", self.pod_namespace, account) + "/token"
        answer = self.kubelet.admin.request("POST", path, body)
        return str(answer["status"]["token"]).encode()

    def _downward(self, item: Json) -> bytes:
        if "fieldRef" in item:
            return self._field(item["fieldRef"]["fieldPath"]).encode()
        return b"0"

    def _field(self, path: str) -> str:
        meta = self.pod["metadata"]
        simple = {
            "metadata.name": meta["name"],
            "metadata.namespace": meta["namespace"],
            "metadata.uid": meta["uid"],
            "spec.nodeName": self.pod["spec"].get("nodeName", ""),
            "spec.serviceAccountName": self.pod["spec"].get("serviceAccountName", "default"),
            "status.podIP": self.address,
            "status.podIPs": self.address,
            "status.hostIP": self.kubelet.network.gateway,
            "status.hostIPs": self.kubelet.network.gateway,
        }
        if path in simple:
            return str(simple[path])
        for prefix, values in (
            ("metadata.labels", meta.get("labels")),
            ("metadata.annotations", meta.get("annotations")),
        ):
            if path == prefix:
                return "\n".join(f'{k}="{v}"' for k, v in sorted((values or {}).items()))
            if path.startswith(prefix + "["):
                return str((values or {}).get(path[len(prefix) + 2 : -2], ""))
        raise RuntimeError(f"fieldRef {path} is not offered by the lab's kubelet")

    def _volumes(self) -> dict[str, Path]:
        folders: dict[str, Path] = {}
        for volume in self.pod["spec"].get("volumes") or []:
            folder = self._volume_folder(volume["name"])
            folder.mkdir(parents=True, exist_ok=True)
            folder.chmod(0o777)
            if "emptyDir" in volume:
                folder.chmod(0o1777)
            elif "configMap" in volume or "secret" in volume:
                kind = "ConfigMap" if "configMap" in volume else "Secret"
                source = volume.get("configMap") or volume.get("secret") or {}
                name_key = "name" if kind == "ConfigMap" else "secretName"
                data = self._source_data(kind, source[name_key], optional=bool(source.get("optional")))
                self._write_items(folder, data, source.get("items"), source.get("defaultMode", 0o644), optional=False)
                folder.chmod(0o755)
            elif "projected" in volume:
                mode = volume["projected"].get("defaultMode", 0o644)
                for part in volume["projected"].get("sources") or []:
                    self._project(folder, part, mode)
                folder.chmod(0o755)
            elif "downwardAPI" in volume:
                self._downward_files(folder, volume["downwardAPI"], volume["downwardAPI"].get("defaultMode", 0o644))
            elif "persistentVolumeClaim" in volume:
                folder = self._claimed(volume["persistentVolumeClaim"]["claimName"])
            else:
                kinds = sorted(k for k in volume if k != "name")
                raise RuntimeError(f"volume {volume['name']} ({', '.join(kinds)}) is not offered by the lab's kubelet")
            folders[volume["name"]] = folder
        return folders

    def _claimed(self, claim: str) -> Path:
        """A bound claim's volume: a folder of the lab's per PersistentVolume (KWOK's stages bind it, stages.py),
        kept when the pod goes, so a StatefulSet's restarted pod finds its data, as on a hostpath volume."""
        found = self.kubelet.admin.find("v1", "PersistentVolumeClaim", claim, self.pod_namespace)
        volume = str(((found or {}).get("spec") or {}).get("volumeName") or "")
        if not volume:
            raise RuntimeError(f"PersistentVolumeClaim {self.pod_namespace}/{claim} is not bound")
        folder: Path = self.kubelet.state / "volumes" / volume
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def _project(self, folder: Path, part: Json, mode: int) -> None:
        """One source of a projected volume: a token bound to the pod, a ConfigMap's or Secret's keys, or fields."""
        if "serviceAccountToken" in part:
            token = part["serviceAccountToken"]
            data = {"token": self._token(token.get("audience"), token.get("expirationSeconds", 3607))}
            self._write_items(folder, data, [{"key": "token", "path": token["path"]}], mode, optional=False)
        elif "configMap" in part or "secret" in part:
            kind = "ConfigMap" if "configMap" in part else "Secret"
            source = part.get("configMap") or part.get("secret") or {}
            optional = bool(source.get("optional"))
            data = self._source_data(kind, source["name"], optional=optional)
            self._write_items(folder, data, source.get("items"), mode, optional=optional)
        elif "downwardAPI" in part:
            self._downward_files(folder, part["downwardAPI"], mode)
        else:
            raise RuntimeError(f"projected source {sorted(part)} is not offered by the lab's kubelet")

    def _downward_files(self, folder: Path, source: Json, mode: int) -> None:
        for item in source.get("items") or []:
            data = {"v": self._downward(item)}
            self._write_items(folder, data, [{"key": "v", "path": item["path"]}], mode, optional=False)

    # Containers.

    def _env(self, container: Json) -> dict[str, str]:
        image = image_for(container["image"])
        assert image is not None
        environment: dict[str, str] = {"PATH": image.path, "HOSTNAME": self.pod_name, "HOME": "/root"}
        environment |= {
            "KUBERNETES_SERVICE_HOST": KUBERNETES_SERVICE_IP,
            "KUBERNETES_SERVICE_PORT": "443",
            "KUBERNETES_SERVICE_PORT_HTTPS": "443",
            "KUBERNETES_PORT": f"tcp://{KUBERNETES_SERVICE_IP}:443",
            "KUBERNETES_PORT_443_TCP": f"tcp://{KUBERNETES_SERVICE_IP}:443",
            "KUBERNETES_PORT_443_TCP_ADDR": KUBERNETES_SERVICE_IP,
            "KUBERNETES_PORT_443_TCP_PORT": "443",
            "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
        }
        if self.pod["spec"].get("enableServiceLinks", True):
            for name, address in self.kubelet.services.by_namespace.get(self.pod_namespace, []):
                variable = name.upper().replace("-", "_")
                environment.setdefault(f"{variable}_SERVICE_HOST", address)
        for source in container.get("envFrom") or []:
            prefix = source.get("prefix", "")
            for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
                if key in source:
                    data = self._source_data(kind, source[key]["name"], optional=bool(source[key].get("optional")))
                    environment |= {prefix + k: v.decode() for k, v in data.items()}
        for entry in container.get("env") or []:
            if "value" in entry or "valueFrom" not in entry:
                environment[entry["name"]] = _expand(str(entry.get("value", "")), environment)
                continue
            reference = entry["valueFrom"]
            if "fieldRef" in reference:
                environment[entry["name"]] = self._field(reference["fieldRef"]["fieldPath"])
            elif "resourceFieldRef" in reference:
                environment[entry["name"]] = "0"
            else:
                kind, key = (
                    ("ConfigMap", "configMapKeyRef") if "configMapKeyRef" in reference else ("Secret", "secretKeyRef")
                )
                ref = reference[key]
                data = self._source_data(kind, ref["name"], optional=bool(ref.get("optional")))
                if ref["key"] in data:
                    environment[entry["name"]] = data[ref["key"]].decode()
                elif not ref.get("optional"):
                    raise RuntimeError(f"{kind} {ref['name']} has no key {ref['key']}")
        return environment

    def _file_sources(self, image: Image, reference: str) -> dict[str, Json]:
        sources: dict[str, Json] = {}
        tag = image_tag(reference)
        if image.tags and tag not in image.tags:
            raise RuntimeError(
                f"the lab holds {image.repository} at {', '.join(image.tags)} only, not {tag} "
                "(harness/lab/build.py builds one program per tag)"
            )
        for path, source in image.files.items():
            if source == KAI_CHART_CRDS:
                sources[path] = {"kind": "path", "value": str(kai_chart_crds(tag))}
            elif source.startswith("lab:"):
                binary = source.removeprefix("lab:").format(tag=tag)
                sources[path] = {"kind": "path", "value": str(self.kubelet.binaries / binary)}
            elif source.startswith("host:"):
                sources[path] = {"kind": "path", "value": source.removeprefix("host:")}
            else:
                sources[path] = {"kind": "text", "value": source.removeprefix("text:")}
        return sources

    def _start(self, container: Container, volumes: dict[str, Path]) -> None:
        spec = container.spec
        image = image_for(spec["image"])
        assert image is not None
        security = {**(self.pod["spec"].get("securityContext") or {}), **(spec.get("securityContext") or {})}
        user = security.get("runAsUser", image.user)
        group = security.get("runAsGroup", user)
        command = spec.get("command")
        args = spec.get("args")
        environment = self._env(spec)
        argv = [*command, *(args or [])] if command else [*image.entrypoint, *(args if args is not None else image.cmd)]
        argv = [_expand(a, environment) for a in argv]
        mounts = []
        for mount in spec.get("volumeMounts") or []:
            source = volumes[mount["name"]]
            if mount.get("subPath"):
                source = source / mount["subPath"]
            mounts.append(
                {"source": str(source), "target": mount["mountPath"], "readOnly": bool(mount.get("readOnly"))}
            )
        scratch = self.folder / "containers" / spec["name"] / str(container.restarts)
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        exec_spec = {
            "root": str(scratch / "root"),
            "scratch": str(scratch),
            "base": image.base,
            "files": self._file_sources(image, spec["image"]),
            "mounts": mounts,
            "hosts": str(self.folder / "hosts"),
            "resolv.conf": str(self.folder / "resolv.conf"),
            "user": user,
            "group": group,
            "supplementalGroups": [
                *(security.get("supplementalGroups") or []),
                *([security["fsGroup"]] if "fsGroup" in security else []),
            ],
            "workingDir": spec.get("workingDir"),
            "argv": argv,
            "env": environment,
        }
        (scratch / "spec.json").write_text(json.dumps(exec_spec))
        log_path = self.kubelet.pod_log(self.pod, spec["name"])
        log = open(log_path, "ab")  # noqa: SIM115 - the child keeps it
        container.process = subprocess.Popen(
            [
                "nsenter",
                f"--net={self.namespace_path}",
                "unshare",
                "--mount",
                "--propagation",
                "private",
                sys.executable,
                "-m",
                "harness.lab.podexec",
                str(scratch / "spec.json"),
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        container.started_at, container.finished_at, container.exit_code = _now(), None, None
        self.kubelet.record(self, container, str(log_path))
        container.ready = not spec.get("readinessProbe")
        _log(f"started {self.pod_namespace}/{self.pod_name} {spec['name']}: {' '.join(argv)}")

    def _wait(self, container: Container) -> int:
        assert container.process is not None
        while True:
            code = container.process.poll()
            if code is not None:
                container.exit_code = code if code >= 0 else 128 - code
                container.finished_at = _now()
                container.ready = False
                return container.exit_code
            if self.deleting.is_set():
                return -1
            self._probe(container)
            time.sleep(0.2)

    def _probe(self, container: Container) -> None:
        probe = container.spec.get("readinessProbe")
        if not probe or container.ready:
            return
        was = container.ready
        port = _port((probe.get("httpGet") or probe.get("tcpSocket") or {}).get("port"), container.spec)
        try:
            if "httpGet" in probe and port:
                scheme = probe["httpGet"].get("scheme", "HTTP").lower()
                url = f"{scheme}://{self.address}:{port}{probe['httpGet'].get('path', '/')}"
                with urllib.request.urlopen(url, timeout=1, context=ssl._create_unverified_context()) as answer:
                    container.ready = 200 <= answer.status < 400
            elif "tcpSocket" in probe and port:
                with socket.create_connection((self.address, port), timeout=1):
                    container.ready = True
            else:
                container.ready = True
        except OSError:
            container.ready = False
        if container.ready != was:
            self.report()

    def _stop_all(self, grace: float) -> None:
        running = [c for c in self.containers if c.process is not None and c.process.poll() is None]
        for container in running:
            assert container.process is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(container.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(c.process and c.process.poll() is None for c in running):
            time.sleep(0.1)
        for container in running:
            assert container.process is not None
            if container.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(container.process.pid, signal.SIGKILL)
                container.process.wait()
            container.exit_code = container.exit_code if container.exit_code is not None else 137
            container.finished_at = container.finished_at or _now()

    def _teardown(self) -> None:
        self.kubelet.network.detach(self.index)

    # Status.

    def _status_of(self, container: Container) -> Json:
        spec = container.spec
        if container.process is not None and container.exit_code is None:
            state: Json = {"running": {"startedAt": container.started_at}}
        elif container.exit_code is not None:
            reason = "Completed" if container.exit_code == 0 else "Error"
            state = {
                "terminated": {
                    "exitCode": container.exit_code,
                    "reason": reason,
                    "startedAt": container.started_at,
                    "finishedAt": container.finished_at,
                    **({"message": container.message} if container.message else {}),
                }
            }
        else:
            state = {"waiting": {"reason": "PodInitializing" if not container.init else "Waiting"}}
        return {
            "name": spec["name"],
            "image": spec["image"],
            "imageID": "",
            "ready": container.ready,
            "started": container.process is not None and container.exit_code is None,
            "restartCount": container.restarts,
            "state": state,
        }

    def report(self, phase: str | None = None, message: str = "") -> None:
        with self.lock:
            inits = [c for c in self.containers if c.init]
            mains = [c for c in self.containers if not c.init]
            initialized = all(c.exit_code == 0 for c in inits)
            ready = bool(mains) and all(c.ready for c in mains)
            if phase is None:
                phase = "Running" if initialized and any(c.process is not None for c in mains) else "Pending"
            now = _now()

            def condition(kind: str, value: bool) -> Json:
                return {"type": kind, "status": "True" if value else "False", "lastTransitionTime": now}

            status: Json = {
                "phase": phase,
                "hostIP": self.kubelet.network.gateway,
                "hostIPs": [{"ip": self.kubelet.network.gateway}],
                "podIP": self.address,
                "podIPs": [{"ip": self.address}] if self.address else [],
                "startTime": self.pod.get("status", {}).get("startTime") or now,
                "conditions": [
                    condition("PodScheduled", True),
                    condition("Initialized", initialized),
                    condition("ContainersReady", ready and phase == "Running"),
                    condition("Ready", ready and phase == "Running"),
                ],
                "initContainerStatuses": [self._status_of(c) for c in inits],
                "containerStatuses": [self._status_of(c) for c in mains],
            }
            if message:
                status["message"] = message
                status["reason"] = "LabKubelet"
        try:
            self.kubelet.admin.patch(self.pod, {"status": status}, subresource="status")
        except ApiError as error:
            if error.code != 404:
                _log(f"status of {self.pod_namespace}/{self.pod_name}: {error}")

    # The pod's life.

    def run(self) -> None:
        try:
            self._live()
        except Exception as error:  # the pod fails, the kubelet goes on
            where = f"{self.pod_namespace}/{self.pod_name}"
            _log(f"pod {where} failed in the lab's kubelet: {error}\n{traceback.format_exc()}")
            self.report("Failed", f"the lab's kubelet could not run this pod: {error}")
        finally:
            if not self.deleting.is_set():
                self._teardown()
        if self.deleting.is_set():
            self._finish_deletion()

    def _live(self) -> None:
        spec = self.pod["spec"]
        self.containers = [Container(c, True) for c in spec.get("initContainers") or []]
        self.containers += [Container(c, False) for c in spec.get("containers") or []]
        self._sandbox()
        self.report()
        volumes = self._volumes()
        policy = spec.get("restartPolicy", "Always")
        if self._initialise(volumes, policy):
            self._supervise(volumes, policy)

    def _initialise(self, volumes: dict[str, Path], policy: str) -> bool:
        """Each init container to success, in order, retried unless the pod never restarts; False if the pod
        ends here."""
        for container in (c for c in self.containers if c.init):
            while True:
                self._start(container, volumes)
                self.report()
                code = self._wait(container)
                if self.deleting.is_set():
                    return False
                self.report()
                if code == 0:
                    break
                if policy == "Never":
                    self.report("Failed")
                    return False
                container.restarts += 1
                time.sleep(min(10, 2**container.restarts))
        return True

    def _supervise(self, volumes: dict[str, Path], policy: str) -> None:
        """The containers, restarted by the pod's policy, until the pod ends or is deleted."""
        mains = [c for c in self.containers if not c.init]
        for container in mains:
            self._start(container, volumes)
        self.report()
        while not self.deleting.is_set():
            for container in mains:
                if container.process is None or container.exit_code is not None:
                    continue
                code = container.process.poll()
                if code is None:
                    self._probe(container)
                    continue
                container.exit_code = code if code >= 0 else 128 - code
                container.finished_at, container.ready = _now(), False
                self.report()
                if policy == "Always" or (policy == "OnFailure" and container.exit_code != 0):
                    time.sleep(min(10, 2 ** min(container.restarts, 4)))
                    container.restarts += 1
                    self._start(container, volumes)
                    self.report()
            done = policy != "Always" and all(c.exit_code is not None for c in mains)
            if done and (policy == "Never" or all(c.exit_code == 0 for c in mains)):
                self.report("Succeeded" if all(c.exit_code == 0 for c in mains) else "Failed")
                return
            time.sleep(0.2)

    def _finish_deletion(self) -> None:
        grace = self.pod["metadata"].get("deletionGracePeriodSeconds", 30)
        self._stop_all(float(grace))
        self._teardown()
        try:
            body = {
                "kind": "DeleteOptions",
                "apiVersion": "v1",
                "gracePeriodSeconds": 0,
                "preconditions": {"uid": self.uid},
            }
            self.kubelet.admin.request("DELETE", self.kubelet.admin.object_path(self.pod), body)
        except ApiError as error:
            if error.code not in (404, 409):
                _log(f"deleting {self.pod_namespace}/{self.pod_name}: {error}")
        shutil.rmtree(self.folder, ignore_errors=True)
        self.kubelet.forget(self.uid)


def _port(port: Any, container: Json) -> int | None:
    if isinstance(port, int):
        return port
    for entry in container.get("ports") or []:
        if entry.get("name") == port:
            return int(entry["containerPort"])
    return int(port) if isinstance(port, str) and port.isdigit() else None


def _expand(text: str, environment: Mapping[str, str]) -> str:
    """$(VAR) references, as the kubelet expands them in command, args and env ($$ escapes)."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
        elif text.startswith("$(", i) and ")" in text[i:]:
            end = text.index(")", i)
            name = text[i + 2 : end]
            out.append(environment.get(name, text[i : end + 1]))
            i = end + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


class LabKubelet:
    def __init__(self, state: Path) -> None:
        self.state = state
        lab = json.loads((state / "lab.json").read_text())
        self.network = LabNetwork(int(lab["network"]["octet"]))
        self.binaries = Path(lab["binaries"])
        pki = lab_pki.Pki(state / "pki")
        certificate, key = pki.client(lab_pki.KUBELET)
        self.admin = Kube(Credentials(lab["apiServer"]["url"], pki.ca, certificate, key))
        self.run_folder = state / "run"
        self.run_folder.mkdir(parents=True, exist_ok=True)
        self.services = Services(self.admin, self.run_folder, self.network.gateway)
        self.pods: dict[str, PodRunner] = {}
        self.processes: dict[str, Json] = {}
        self.free_indexes: list[int] = []
        self.next_index = 0
        self.lock = threading.Lock()

    def pod_log(self, pod: Json, container: str) -> Path:
        folder = self.state / "logs" / "pods"
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{pod['metadata']['namespace']}_{pod['metadata']['name']}_{container}.log"

    def forget(self, uid: str) -> None:
        with self.lock:
            runner = self.pods.pop(uid, None)
            if runner is not None:
                self.free_indexes.append(runner.index)
            self.processes.pop(uid, None)
            self._write_processes()

    def record(self, runner: PodRunner, container: Container, log: str) -> None:
        """run/pods.json: each process the lab runs for a pod, for lab.json and for `down`."""
        assert container.process is not None
        image = image_for(container.spec["image"])
        with self.lock:
            entry = self.processes.setdefault(
                runner.uid, {"pod": f"{runner.pod_namespace}/{runner.pod_name}", "containers": {}}
            )
            entry["containers"][container.spec["name"]] = {
                "pid": container.process.pid,
                "ports": {
                    p.get("name", str(p["containerPort"])): p["containerPort"]
                    for p in container.spec.get("ports") or []
                },
                "log": log,
                "version": container.spec["image"],
                "real": image is not None and not image.substitutes,
                "program": "python3",
            }
            self._write_processes()

    def _write_processes(self) -> None:
        _write_in_place(self.run_folder / "pods.json", json.dumps(self.processes, indent=1, sort_keys=True))

    def stop_everything(self, *_: Any) -> None:
        """On SIGTERM (`down`): every pod's processes and namespaces go with the kubelet."""
        for runner in list(self.pods.values()):
            runner.deleting.set()
            runner._stop_all(2)
            runner._teardown()
        self.forwarder.kill()
        self.node_port_forwarder.kill()
        os._exit(0)

    def _index(self) -> int:
        """A pod's place on the bridge: a new address while there are some, else the one freed longest ago."""
        if self.next_index < MAX_PODS or not self.free_indexes:
            self.next_index += 1
            return self.next_index - 1
        return self.free_indexes.pop(0)

    def observe(self, pod: Json) -> None:
        """A pod as the API server now holds it: start it, or stop it when it is being deleted."""
        if not pod.get("spec", {}).get("nodeName") or not runs_as_processes(pod):
            return
        uid = pod["metadata"]["uid"]
        with self.lock:
            runner = self.pods.get(uid)
            if runner is None:
                if pod["metadata"].get("deletionTimestamp") or pod.get("status", {}).get("phase") in (
                    "Succeeded",
                    "Failed",
                ):
                    if pod["metadata"].get("deletionTimestamp"):
                        self.admin.delete(
                            "v1", "Pod", pod["metadata"]["name"], pod["metadata"]["namespace"], grace_seconds=0
                        )
                    return
                runner = PodRunner(self, pod, self._index())
                self.pods[uid] = runner
                runner.start()
                return
        runner.pod["metadata"] = pod["metadata"]
        if pod["metadata"].get("deletionTimestamp") and not runner.deleting.is_set():
            runner.deleting.set()
            if not runner.is_alive():
                threading.Thread(target=runner._finish_deletion, daemon=True).start()

    def _refresh_services(self) -> None:
        while True:
            try:
                self.services.refresh()
                for runner in list(self.pods.values()):
                    runner.refresh_hosts()
            except Exception as error:
                _log(f"services: {error}")
            time.sleep(1)

    def run(self) -> None:
        signal.signal(signal.SIGTERM, self.stop_everything)
        self.services.refresh()
        router = self.network.attach_router()
        log = open(self.state / "logs" / "lab-forwarder.log", "ab")  # noqa: SIM115 - the forwarder keeps it open
        self.forwarder = subprocess.Popen(
            [
                "nsenter",
                f"--net=/run/netns/{router}",
                sys.executable,
                "-m",
                "harness.lab.forwarder",
                str(self.run_folder / "services.json"),
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        # The node ports, in this (the host's) network namespace, where the gateway's address is.
        self.node_port_forwarder = subprocess.Popen(
            [sys.executable, "-m", "harness.lab.forwarder", str(self.run_folder / "node-ports.json"), "--on-host"],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        threading.Thread(target=self._refresh_services, daemon=True).start()
        (self.state / "kubelet.ready").write_text(str(os.getpid()))
        path = "/api/v1/pods"
        while True:
            try:
                listing = self.admin.request("GET", path)
                for pod in listing.get("items", []):
                    self.observe(pod)
                version = listing["metadata"]["resourceVersion"]
                for event in self.admin.watch(path, version):
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self.observe(event["object"])
                    elif event["type"] == "DELETED":
                        runner = self.pods.get(event["object"]["metadata"]["uid"])
                        if runner is not None and not runner.deleting.is_set():
                            runner.deleting.set()
                    elif event["type"] == "ERROR":
                        break
            except Exception as error:
                _log(f"watch: {error}")
                time.sleep(1)


def main() -> None:
    parser = argparse.ArgumentParser(description="The lab's kubelet for pods it runs as processes.")
    parser.add_argument("--state", type=Path, required=True)
    LabKubelet(parser.parse_args().state.resolve()).run()


if __name__ == "__main__":
    main()

"""The tenants running in the lab: each team's real vCluster, and the kubeconfig a team member would use.

A tenant's control plane is the chart's StatefulSet pod, run by the lab's kubelet as processes
(images.py: the vcluster-oss image's /vcluster, the kubernetes image's binaries and kine). It
writes its kubeconfig to the host Secret vc-<release> (loft-sh/vcluster
pkg/util/kubeconfig/kubeconfig.go KubeconfigSecretKey `config` @v0.35.1), with the server the
stack exposes it at: a node port at the stack's host address, which in the lab is the gateway,
where the kubelet forwards node ports (kubelet.py Services). That file is written, unchanged, to
DIR/tenants/<name>/kubeconfig.
"""

import base64
import os
from dataclasses import dataclass
from pathlib import Path

from harness.lab.images import tag as image_tag
from harness.lab.kube import Kube


@dataclass(frozen=True)
class Tenant:
    name: str
    namespace: str
    ready: bool
    version: str
    """The vCluster release its control plane runs: the tag of its syncer container's image."""
    kubeconfig: Path | None
    """None until the vCluster has written its Secret."""


def _ready(pod: dict[str, object]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []  # type: ignore[attr-defined]
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def tenants(admin: Kube, state: Path) -> list[Tenant]:
    """Every vCluster StatefulSet in the lab (the chart labels it app=vcluster, names it after the release and
    its control plane's container `syncer`: chart/templates/statefulset.yaml @v0.35.1, @v0.36.1), its
    kubeconfig (re)written from its Secret when there is one."""
    found = []
    for statefulset in admin.list("apps/v1", "StatefulSet"):
        meta = statefulset["metadata"]
        if (meta.get("labels") or {}).get("app") != "vcluster":
            continue
        name, namespace = meta["name"], meta["namespace"]
        pod = admin.find("v1", "Pod", f"{name}-0", namespace) or {}
        containers = statefulset["spec"]["template"]["spec"]["containers"]
        image = next(c["image"] for c in containers if c["name"] == "syncer")
        kubeconfig = _write_kubeconfig(admin, state, name, namespace)
        found.append(Tenant(name, namespace, _ready(pod), image_tag(image), kubeconfig))
    return sorted(found, key=lambda tenant: tenant.name)


def _write_kubeconfig(admin: Kube, state: Path, name: str, namespace: str) -> Path | None:
    secret = admin.find("v1", "Secret", f"vc-{name}", namespace)
    config = ((secret or {}).get("data") or {}).get("config")
    if not config:
        return None
    path = state / "tenants" / name / "kubeconfig"
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(base64.b64decode(config))
    return path

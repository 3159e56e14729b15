"""The images whose containers the lab runs as local processes, and what each holds.

No container runtime runs here, so an image is stood in for by what it contains, read from
the Dockerfile that builds it at the pinned tag: its programs (the lab's own builds of the
same projects, or the host's interpreter), its files, its ENTRYPOINT, CMD and USER. A pod
runs as processes only when every one of its containers' images is here; every other pod
is faked by KWOK (stages.py selects by the same rule). `base` says what the image's root
holds besides its files: `empty` for distroless or busybox images (so a shell a container
expects and the image lacks fails here too), `host` for a distribution's root, stood in
for by the host's /usr, /etc and /lib, read-only.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from config.upstream import KUBECTL, KUBECTL_IMAGE, PROM_LABEL_PROXY, PROM_LABEL_PROXY_IMAGE, PYTHON, PYTHON_IMAGE
from harness.lab.build import VCLUSTER_VERSIONS

KAI_CRD_UPGRADER = "ghcr.io/kai-scheduler/kai-scheduler/crd-upgrader"
_APPLY_CRDS = "kubectl apply --server-side=true --force-conflicts -f /internal-crds"
"""deployments/crd-upgrader/apply-crds.sh @v0.16.8, the crd-upgrader image's CMD."""
VCLUSTER_IMAGE = "ghcr.io/loft-sh/vcluster-oss"
VCLUSTER_KUBERNETES_IMAGE = "ghcr.io/loft-sh/kubernetes"
KAI_CHART_CRDS = "kai-chart-crds"
"""A file source: the crds/ folder of the pinned KAI chart."""


@dataclass(frozen=True)
class Image:
    repository: str
    base: Literal["empty", "host"]
    files: Mapping[str, str]
    """Path in the image -> its source: `lab:<binary>` (built by the lab), `host:<path>` (this machine's),
    `text:<content>` (a file the Dockerfile writes), or KAI_CHART_CRDS."""
    entrypoint: Sequence[str] = ()
    cmd: Sequence[str] = ()
    user: int | None = None
    path: str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    source: str = ""
    substitutes: Mapping[str, str] = field(default_factory=dict)
    """Program -> how the stand-in differs from the image's (a patch or interpreter version), for lab.json."""
    tags: Sequence[str] = ()
    """The tags the lab holds, where each tag is a program of its own (a `lab:` source's `{tag}` names its
    build); a pod of another tag fails as a pull of a missing tag would. Empty: one stand-in for every tag."""


IMAGES = (
    Image(
        KUBECTL_IMAGE,
        "empty",
        {KUBECTL: "lab:kubectl"},
        entrypoint=(KUBECTL,),
        source="kubernetes/kubernetes build/server-image/kubectl/Dockerfile, build/common.sh @v1.36.0 "
        "(distroless static, ENTRYPOINT /bin/kubectl)",
        substitutes={"kubectl": "the lab's kubectl at the lab's Kubernetes patch, whatever the image tag"},
    ),
    Image(
        PROM_LABEL_PROXY_IMAGE,
        "empty",
        {PROM_LABEL_PROXY: "lab:prom-label-proxy"},
        entrypoint=(PROM_LABEL_PROXY,),
        user=65534,
        source="prometheus-community/prom-label-proxy Dockerfile @v0.14.0 (busybox, USER nobody)",
    ),
    Image(
        PYTHON_IMAGE,
        "host",
        {PYTHON: "host:/usr/bin/python3"},
        cmd=("python3",),
        source="docker-library/python 3.13/slim-trixie Dockerfile (Debian, Python in /usr/local, no USER)",
        substitutes={"python3": "Debian's /usr/bin/python3 of this machine, not the image's Python 3.13"},
    ),
    Image(
        KAI_CRD_UPGRADER,
        "host",
        {
            "/usr/bin/kubectl": "lab:kubectl",
            "/internal-crds": KAI_CHART_CRDS,
            "/apply-crds.sh": f"text:#!/bin/bash\n{_APPLY_CRDS}\n",
        },
        cmd=("/apply-crds.sh",),
        user=65532,
        source="kai-scheduler/KAI-Scheduler deployments/crd-upgrader/Dockerfile and apply-crds.sh @v0.16.8 "
        "(alpine 3.20 with bash, kubectl v1.35.0 in /usr/bin, the chart's CRDs in /internal-crds)",
        substitutes={"kubectl": "the lab's kubectl, not v1.35.0", "bash": "this machine's bash, not alpine's"},
    ),
    Image(
        VCLUSTER_IMAGE,
        "host",
        {"/vcluster": "lab:vcluster-{tag}"},
        entrypoint=("/vcluster", "start"),
        source="loft-sh/vcluster Dockerfile @v0.35.1 and @v0.36.1 (alpine 3.23, /vcluster from cmd/vcluster, "
        "ENTRYPOINT /vcluster start, no USER); the chart's tag is its own version (chart/templates/_helper.tpl)",
        substitutes={
            "vcluster": "cmd/vcluster built from the Go module without the release's version stamp (so its "
            "telemetry, which a dev build skips, stays off)",
        },
        tags=VCLUSTER_VERSIONS,
    ),
    Image(
        VCLUSTER_KUBERNETES_IMAGE,
        "host",
        {
            "/kubernetes/kube-apiserver": "lab:kube-apiserver",
            "/kubernetes/kube-controller-manager": "lab:kube-controller-manager",
            "/kubernetes/kube-scheduler": "lab:kube-scheduler",
            "/kubernetes/kine": "lab:kine",
        },
        user=1000,
        source="loft-sh/kubernetes hack/Dockerfile, hack/kubernetes-v1.36 @v1.36.0 (alpine 3.18 with bash, the "
        "control plane in /kubernetes, kine v0.14.10, USER kubernetes); the chart's init container copies it to "
        "/binaries",
        substitutes={
            "kube-apiserver": "the lab's Kubernetes patch, not v1.36.0",
            "kube-controller-manager": "the lab's Kubernetes patch, not v1.36.0",
            "kube-scheduler": "the lab's Kubernetes patch, not v1.36.0",
            "kine": "github.com/k3s-io/kine v0.14.10 (the module proxy's), not loft-sh's fork of it, whose two "
            "commits add RDS IAM authentication and its release process",
            "cp": "this machine's coreutils, not alpine's busybox",
        },
    ),
)


def repository(image: str) -> str:
    """`quay.io/x/y:v1@sha256:...` -> `quay.io/x/y` (a registry port is kept)."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)
    if ":" in last[-1]:
        name = name[: name.rindex(":")]
    return name


def tag(image: str) -> str:
    """`quay.io/x/y:v1@sha256:...` -> `v1`; no tag is `latest`, as the kubelet reads it."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.rsplit(":", 1)[1] if ":" in last else "latest"


def normalise(image: str) -> str:
    """Docker Hub's short names in full, as the kubelet resolves them: `python` -> docker.io/library/python."""
    name = repository(image)
    first = name.split("/", 1)[0]
    if "/" not in name:
        return f"docker.io/library/{name}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{name}"
    return name


BY_REPOSITORY = {image.repository: image for image in IMAGES}


def image_for(reference: str) -> Image | None:
    return BY_REPOSITORY.get(normalise(reference))


def runs_as_processes(pod: Mapping[str, object]) -> bool:
    """Whether the lab runs this pod itself: every container's image is one it has."""
    spec = pod.get("spec") or {}
    assert isinstance(spec, Mapping)
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    return bool(containers) and all(image_for(str(c.get("image", ""))) is not None for c in containers)

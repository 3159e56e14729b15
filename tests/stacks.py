"""The stacks the render and network tests run the real program for, and the Helm releases each registers.

brev (a `restricted` tenant and a packaged add-on chart), ssh with two workers and kubeconfig
mode, each with the `nodePort` expose and two with `sni`: between them every branch that
shapes a release's values.
"""

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness import FAKE_HOST_KEY, ProgramRun, dev_settings, run_main
from tests.charts import chart_file_for, render
from tests.conftest import FAKE_KUBECONFIG

Json = dict[str, Any]
RELEASE = "kubernetes:helm.sh/v3:Release"
ADDON_CHART = {
    "repo": "https://prometheus-community.github.io/helm-charts",
    "chart": "kube-prometheus-stack",
    "version": "88.5.3",
    "values": {"grafana": {"enabled": False}},
}
BREV_ADDRESS = "198.51.100.7"
"""The Brev instance's address in the mocks (harness/mocks.py)."""
SSH_ADDRESS = "203.0.113.20"
WORKERS = ("203.0.113.21", "203.0.113.22")
EXISTING_CLUSTER_ADDRESS = "203.0.113.30"


def _brev(config: Json) -> Json:
    config["tenants"][2]["podSecurity"] = "restricted"
    config["tenants"][0]["addons"] = [{"name": "monitoring", "chart": ADDON_CHART}]
    return config


def _ssh(config: Json) -> Json:
    config["host"] = {"mode": "ssh", "address": SSH_ADDRESS, "workers": [{"address": a} for a in WORKERS]}
    return config


def _kubeconfig(config: Json) -> Json:
    config["host"] = {"mode": "kubeconfig", "address": EXISTING_CLUSTER_ADDRESS}
    return config


def _newer_vclusters(config: Json) -> Json:
    """Two teams gone first onto newer vClusters (tenants[].vclusterVersion)."""
    config["tenants"][0]["vclusterVersion"] = "0.35.3"
    config["tenants"][1]["vclusterVersion"] = "0.36.1"
    return config


def _sni(config: Json) -> Json:
    config["vcluster"] = {"expose": "sni", "domain": "gpu.example.com"}
    return config


STACKS: dict[str, tuple[Callable[[Json], Json], dict[str, str]]] = {
    "brev": (_brev, {}),
    "brev-sni": (_sni, {}),
    "ssh-2-workers": (_ssh, {"sshPrivateKey": FAKE_HOST_KEY}),
    "brev-newer-vclusters": (_newer_vclusters, {}),
    "kubeconfig": (_kubeconfig, {"kubeconfig": FAKE_KUBECONFIG}),
    "kubeconfig-sni": (lambda c: _sni(_kubeconfig(c)), {"kubeconfig": FAKE_KUBECONFIG}),
}
BOOTSTRAPPED = ("brev", "brev-sni", "ssh-2-workers", "brev-newer-vclusters")
MACHINES = {
    "brev": (BREV_ADDRESS,),
    "brev-sni": (BREV_ADDRESS,),
    "ssh-2-workers": (SSH_ADDRESS, *WORKERS),
    "brev-newer-vclusters": (BREV_ADDRESS,),
    "kubeconfig": (EXISTING_CLUSTER_ADDRESS,),
    "kubeconfig-sni": (EXISTING_CLUSTER_ADDRESS,),
}
"""Every machine's public address in each stack, as its config (or the mocked Brev instance) gives it."""


@functools.cache
def stack(name: str) -> ProgramRun:
    shape, secrets = STACKS[name]
    return run_main(shape(dev_settings()), secrets)


@dataclass(frozen=True)
class Release:
    stack: str
    resource: str
    name: str
    namespace: str
    chart: str
    values: Json

    @property
    def addon(self) -> bool:
        return "-addon-" in self.resource

    def render(self, *, crds: bool = False) -> list[Json]:
        return render(self.name, self.namespace, self.chart, self.values, crds=crds)


def releases(name: str) -> list[Release]:
    """The stack's releases in a stable order (registration order varies between runs)."""
    return [
        Release(
            name,
            r.name,
            r.inputs["name"],
            r.inputs["namespace"],
            chart_file_for(r.inputs["chart"], r.inputs["version"]),
            r.inputs["values"],
        )
        for r in sorted(stack(name).of_type(RELEASE), key=lambda r: r.name)
    ]


def release_id(release: Release) -> str:
    return f"{release.stack}:{release.resource}"

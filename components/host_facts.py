"""Reading what host scripts and the GPU gate report: `key=value` lines and a node table."""

import base64
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import yaml


def key_values(stdout: str) -> dict[str, list[str]]:
    """`key=value` lines, in order; anything else a script prints is ignored."""
    found: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep and key and " " not in key:
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def _single(values: dict[str, list[str]], key: str, source: str) -> str:
    if len(values.get(key, [])) != 1:
        raise ValueError(f"{source} did not report exactly one {key!r}; its output was not understood")
    return values[key][0]


@dataclass(frozen=True)
class SshEndpoint:
    address: str
    user: str
    port: int
    private_key: str


def parse_brev_ssh(stdout: str) -> SshEndpoint:
    values = key_values(stdout)
    return SshEndpoint(
        address=_single(values, "address", "brev-ssh.sh"),
        user=_single(values, "user", "brev-ssh.sh"),
        port=int(_single(values, "port", "brev-ssh.sh")),
        private_key=base64.b64decode(_single(values, "privateKey", "brev-ssh.sh")).decode(),
    )


def parse_preflight(stdout: str) -> dict[str, Any]:
    """The host's GPUs as preflight saw them, plus the first GPU's facts at the top level."""
    values = key_values(stdout)
    gpus = []
    for line in values.get("gpu", []):
        name, memory, driver = line.split("|")
        gpus.append({"name": name, "memoryMiB": int(memory), "driverVersion": driver})
    if not gpus:
        raise ValueError("preflight.sh reported no GPU")
    return {
        "hostname": _single(values, "hostname", "preflight.sh"),
        "ubuntu": _single(values, "ubuntu", "preflight.sh"),
        "gpuName": gpus[0]["name"],
        "gpuMemoryMiB": gpus[0]["memoryMiB"],
        "driverVersion": gpus[0]["driverVersion"],
        "gpus": gpus,
    }


def _number(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def parse_inventory(tsv: str) -> dict[str, dict[str, Any]]:
    """Per GPU node: product, memory, driver (GPU feature discovery labels) and allocatable GPUs.

    A label that the cluster does not set (no feature discovery) reads as None, not as a guess.
    """
    nodes: dict[str, dict[str, Any]] = {}
    for line in tsv.splitlines():
        if not line.strip():
            continue
        node, product, memory, driver, count = (line.split("\t") + [""] * 5)[:5]
        nodes[node] = {
            "name": product or None,
            "memoryMiB": _number(memory),
            "driverVersion": driver or None,
            "count": _number(count),
        }
    return nodes


def kubeconfig_server_host(kubeconfig: str) -> str:
    """The host part of the current context's API server URL."""
    document = yaml.safe_load(kubeconfig)
    contexts = {c["name"]: c["context"] for c in document.get("contexts") or []}
    clusters = {c["name"]: c["cluster"] for c in document.get("clusters") or []}
    current = contexts.get(document.get("current-context"), {})
    server = clusters.get(current.get("cluster"), {}).get("server")
    if not server:
        raise ValueError("the kubeconfig has no server for its current context")
    host = urlsplit(str(server)).hostname
    if not host:
        raise ValueError(f"the kubeconfig's server {server!r} has no host")
    return host

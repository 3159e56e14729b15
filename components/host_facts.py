"""Reading what host scripts report: `key=value` lines."""

import base64
from dataclasses import dataclass
from typing import Any


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
    """The host's GPUs as preflight saw them, plus the first GPU's facts at the top level.

    `nodeName` is the Kubernetes node MicroK8s registers for this machine: its hostname,
    lowercased (see config/upstream.py, MicroK8s).
    """
    values = key_values(stdout)
    gpus = []
    for line in values.get("gpu", []):
        name, memory, driver = line.split("|")
        gpus.append({"name": name, "memoryMiB": int(memory), "driverVersion": driver})
    if not gpus:
        raise ValueError("preflight.sh reported no GPU")
    return {
        "hostname": (hostname := _single(values, "hostname", "preflight.sh")),
        "nodeName": hostname.strip().lower(),
        "ubuntu": _single(values, "ubuntu", "preflight.sh"),
        "gpuName": gpus[0]["name"],
        "gpuMemoryMiB": gpus[0]["memoryMiB"],
        "driverVersion": gpus[0]["driverVersion"],
        "gpus": gpus,
    }

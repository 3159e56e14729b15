"""Reading what host scripts report: `key=value` lines."""

import base64
import ipaddress
import json
from dataclasses import dataclass
from typing import Any

from config.upstream import CLUSTER_AGENT_PORT


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


@dataclass(frozen=True)
class JoinTicket:
    """What `microk8s add-node --format json` prints: the single-use token (with the CA check) and join URLs."""

    token: str
    urls: tuple[str, ...]


def parse_join_tickets(stdout: str) -> dict[str, JoinTicket]:
    """worker-tokens.sh's `join.<node>=<json>` lines, by node name."""
    tickets = {}
    for key, values in key_values(stdout).items():
        node = key.removeprefix("join.")
        if node == key:
            continue
        ticket = json.loads(_single({key: values}, key, "worker-tokens.sh"))
        tickets[node] = JoinTicket(token=str(ticket["token"]), urls=tuple(str(url) for url in ticket["urls"]))
    return tickets


def join_urls(ticket: JoinTicket | None, control_plane_address: str) -> str:
    """The URLs a worker tries, in order, space-separated; empty without a ticket (the worker joined already).

    add-node lists one URL per address of the control plane's interfaces; `microk8s join` takes an IP
    literal only, so IPv6 ones are left out. A cloud VM's public address is on no interface: when the
    host's address is an IPv4 address, a URL for it is tried last.
    """
    if ticket is None:
        return ""
    urls = [url for url in ticket.urls if _ipv4(url.split("/", 1)[0].rpartition(":")[0])]
    public = f"{control_plane_address}:{CLUSTER_AGENT_PORT}/{ticket.token}"
    if _ipv4(control_plane_address) and public not in urls:
        urls.append(public)
    return " ".join(urls)


def _ipv4(text: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(text), ipaddress.IPv4Address)
    except ValueError:
        return False

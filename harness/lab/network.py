"""The lab's network: a bridge on the host and a network namespace per pod that runs as a process.

Why not loopback: the API server refuses 127.0.0.0/8 in Endpoints and EndpointSlices
(kubernetes pkg/apis/core/validation ValidateEndpointIP @v1.36.3), so a Service in front
of a real process, or the `kubernetes` Service itself (its endpoint is the advertise
address), needs an address of its own. Each lab takes a free 10.<octet>.0.0/16: the
bridge holds 10.<octet>.0.1, where the API server listens, and each process pod gets
10.<octet>.<1..63>.<1..250> on a veth pair into its own namespace, so it binds its
ports and reaches in-cluster addresses as in a real pod. KWOK gives faked pods
addresses from 10.<octet>.128.0/17 (the nodes' podCIDRs), never routed.

Needs root (CAP_NET_ADMIN): creating links and namespaces.
"""

import json
import subprocess
from dataclasses import dataclass

SERVICE_CIDR = "10.152.183.0/24"
"""MicroK8s' service range (canonical/microk8s microk8s-resources/default-args/kube-apiserver @v1.36)."""
KUBERNETES_SERVICE_IP = "10.152.183.1"
OCTETS = range(100, 250)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def _used_octets() -> set[int]:
    """Second octets of every 10.x address or route this machine has."""
    used: set[int] = set()
    for listing in (_ip("-j", "addr").stdout, _ip("-j", "route").stdout):
        for entry in json.loads(listing or "[]"):
            addresses = [a.get("local", "") for a in entry.get("addr_info", [])] + [entry.get("dst", "")]
            for address in addresses:
                parts = address.split("/")[0].split(".")
                if len(parts) == 4 and parts[0] == "10":
                    used.add(int(parts[1]))
    return used


@dataclass(frozen=True)
class LabNetwork:
    octet: int

    @property
    def bridge(self) -> str:
        return f"glab{self.octet}"

    @property
    def gateway(self) -> str:
        """The bridge's address: where the API server listens and pods route through."""
        return f"10.{self.octet}.0.1"

    @property
    def fake_pod_cidr(self) -> str:
        return f"10.{self.octet}.128.0/17"

    def node_cidr(self, index: int) -> str:
        return f"10.{self.octet}.{128 + index}.0/24"

    def node_address(self, index: int) -> str:
        return f"10.{self.octet}.0.{10 + index}"

    @property
    def service_router(self) -> str:
        """Where pods send ClusterIP traffic: the forwarder's own namespace on the bridge (forwarder.py)."""
        return f"10.{self.octet}.0.2"

    def pod_address(self, index: int) -> str:
        """The index-th process pod's address (0-based), 15,750 of them."""
        return f"10.{self.octet}.{1 + index // 250}.{1 + index % 250}"

    def namespace_name(self, index: int) -> str:
        return f"{self.bridge}-p{index}"

    def claim(self) -> bool:
        """Make the bridge, or say another lab was first: `ip link add` is atomic, where a look at what is used and
        a create after it would let two labs starting at once take one octet."""
        # A bridge takes the lowest MAC of its ports unless it is given one, so it would change as pods come and
        # go, and every namespace that cached the gateway's would send into the void (connects stuck in SYN-SENT).
        made = _ip(
            "link", "add", self.bridge, "address", f"02:00:0a:{self.octet:02x}:00:01", "type", "bridge", check=False
        )
        if made.returncode != 0:
            return False
        _ip("addr", "add", f"{self.gateway}/16", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        # A faked pod's address answers at once that nothing is there, as a cluster's dead pod does (a webhook
        # on a faked pod fails by its failurePolicy now, not after its timeout of up to 30 s on every request).
        _ip("route", "add", "unreachable", self.fake_pod_cidr)
        return True

    def remove(self) -> None:
        for name in _ip("netns", "list").stdout.split("\n"):
            if name.split(" ")[0].startswith(f"{self.bridge}-"):
                _ip("netns", "del", name.split(" ")[0], check=False)
        _ip("route", "del", "unreachable", self.fake_pod_cidr, check=False)
        _ip("link", "del", self.bridge, check=False)

    def attach_router(self) -> str:
        """The namespace of the lab's ClusterIP forwarder, at service_router: every Service address is its own."""
        return self._attach(f"{self.bridge}-svc", f"gv{self.octet}svc", self.service_router)

    def attach(self, index: int) -> tuple[str, str]:
        """A namespace for the index-th process pod, wired to the bridge, its Service range routed to the
        forwarder: (namespace, address)."""
        address = self.pod_address(index)
        namespace = self._attach(self.namespace_name(index), f"gv{self.octet}x{index}", address)
        _ip("-n", namespace, "route", "add", SERVICE_CIDR, "via", self.service_router)
        # An address used before answers from a new MAC: whoever still has the old one cached would send its
        # replies nowhere until the entry goes stale (a TLS handshake that times out).
        for where in ([], ["-n", f"{self.bridge}-svc"]):
            _ip(*where, "neigh", "flush", "to", address, check=False)
        return namespace, address

    def _attach(self, namespace: str, host_side: str, address: str) -> str:
        _ip("netns", "del", namespace, check=False)
        _ip("link", "del", host_side, check=False)
        _ip("netns", "add", namespace)
        _ip("link", "add", host_side, "type", "veth", "peer", "name", "eth0", "netns", namespace)
        _ip("link", "set", host_side, "master", self.bridge, "up")
        inside = ["-n", namespace]
        _ip(*inside, "addr", "add", f"{address}/16", "dev", "eth0")
        _ip(*inside, "link", "set", "eth0", "up")
        _ip(*inside, "link", "set", "lo", "up")
        _ip(*inside, "route", "add", "default", "via", self.gateway)
        return namespace

    def detach(self, index: int) -> None:
        _ip("netns", "del", self.namespace_name(index), check=False)
        _ip("link", "del", f"gv{self.octet}x{index}", check=False)


def claim_network() -> LabNetwork:
    """A 10.<octet>.0.0/16 no address or route of this machine uses, with the lab's bridge made on it."""
    used = _used_octets()
    for octet in OCTETS:
        if octet not in used and (network := LabNetwork(octet)).claim():
            return network
    raise SystemExit("lab: no free 10.x.0.0/16 for the lab's bridge (100 to 249 are all in use)")

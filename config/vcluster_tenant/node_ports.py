"""Which node ports each tenant's API Service takes, kept stable across every later `up`.

Every port a tenant's NodePort Service uses is set explicitly (https, and the
kubelet proxy's while vCluster proxies kubelets by hostname): a port left to the
API server is picked at random and can be one promised to a team created later.

A port, once given, stays with its team: the assignment of the previous `up` (remembered
on the host: components/vcluster_tenant/node_ports.py) is the starting point, so adding a team, or
removing one, moves no one. A new team's port is a hash of its name, moved up to
the next free port on a clash, so the whole range (2,768 ports) can be used
without a hand-set port. A user-set `nodePort` wins; one that is already another
team's is an error, never a silent move.
"""

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from config.issues import ConfigIssue, Path
from config.types import NODE_PORT_RANGE


@dataclass(frozen=True)
class PortRequest:
    """One tenant's needs: its name and index in gpu-tenancy:tenants, a user-set https port, a kubelet port or not."""

    tenant: str
    index: int
    https: int | None
    kubelet: bool


@dataclass(frozen=True)
class TenantPorts:
    https: int
    kubelet: int | None = None

    def to_data(self) -> dict[str, int | None]:
        return {"https": self.https, "kubelet": self.kubelet}


@dataclass
class PortAssignment:
    ports: dict[str, TenantPorts] = field(default_factory=dict)
    moved: dict[str, tuple[TenantPorts, TenantPorts]] = field(default_factory=dict)
    """Teams whose ports changed since the previous `up`: their handed-out kubeconfigs stop working."""
    issues: list[ConfigIssue] = field(default_factory=list)

    def to_data(self) -> dict[str, dict[str, int | None]]:
        return {tenant: ports.to_data() for tenant, ports in sorted(self.ports.items())}

    def of(self, tenant: str) -> TenantPorts | None:
        """A team's node ports; None when it has none (expose: sni)."""
        return self.ports.get(tenant)


def previous_ports(data: object) -> dict[str, TenantPorts]:
    """What the memory held after the previous `up`; anything else (a fresh cluster: None) is no memory."""
    if not isinstance(data, Mapping):
        return {}
    found = {}
    for tenant, ports in data.items():
        # Pulumi hands numbers back as floats.
        https = _port(ports.get("https")) if isinstance(ports, Mapping) else None
        if https is not None:
            found[str(tenant)] = TenantPorts(https, _port(ports.get("kubelet")))
    return found


def _port(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not float(value).is_integer():
        return None
    return int(value) if int(value) in NODE_PORT_RANGE else None


def hashed_port(tenant: str, role: str) -> int:
    """Where a new tenant's search for a free port starts: the same for a name, whatever else exists.

    The https port hashes the name alone, as every earlier version of this program did.
    """
    key = tenant if role == "https" else f"{tenant}/{role}"
    digest = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")
    return NODE_PORT_RANGE.start + digest % len(NODE_PORT_RANGE)


def assign_node_ports(
    requests: Sequence[PortRequest], previous: Mapping[str, TenantPorts], reserved: Mapping[int, Path] | None = None
) -> PortAssignment:
    """Every tenant's ports, none of them a `reserved` one (port -> the key that sets it). Two user-set ports that
    clash, or a user-set port that is reserved, are refused by config validation already."""
    result = PortAssignment()
    owner: dict[int, str] = {port: "" for port in reserved or {}}
    for request in requests:
        for port in _remembered_ports(request, previous.get(request.tenant)):
            if port in owner and owner[port] == "":
                key = (reserved or {})[port]
                result.issues.append(
                    ConfigIssue(
                        key,
                        port,
                        f"is a node port tenant {request.tenant!r} has held since an earlier `up`: choose another "
                        f"free port ({NODE_PORT_RANGE.start}-{NODE_PORT_RANGE.stop - 1})",
                    )
                )
            owner[port] = request.tenant
    for request in requests:
        if request.https is None:
            continue
        other = owner.setdefault(request.https, request.tenant)
        if other != request.tenant:
            result.issues.append(_clash(request, request.https, other))
    for request in sorted(requests, key=lambda r: r.tenant):
        remembered = previous.get(request.tenant)
        https = request.https
        if https is None:
            https = remembered.https if remembered else _take(request.tenant, "https", owner)
        kubelet = None
        if request.kubelet:
            kept = remembered.kubelet if remembered else None
            kubelet = kept or _take(request.tenant, "kubelet", owner)
        result.ports[request.tenant] = ports = TenantPorts(https, kubelet)
        if remembered and remembered.https != ports.https:
            result.moved[request.tenant] = (remembered, ports)
    return result


def _remembered_ports(request: PortRequest, remembered: TenantPorts | None) -> list[int]:
    """The ports a tenant keeps from the previous `up` (a user-set https port replaces its remembered one)."""
    if remembered is None:
        return []
    ports = [] if request.https is not None else [remembered.https]
    if request.kubelet and remembered.kubelet:
        ports.append(remembered.kubelet)
    return ports


def _take(tenant: str, role: str, owner: dict[int, str]) -> int:
    """The first free port from the tenant's hashed one on, now the tenant's."""
    start = hashed_port(tenant, role) - NODE_PORT_RANGE.start
    for offset in range(len(NODE_PORT_RANGE)):
        port = NODE_PORT_RANGE.start + (start + offset) % len(NODE_PORT_RANGE)
        if port not in owner:
            owner[port] = tenant
            return port
    raise ValueError(f"no free node port is left for tenant {tenant}: the range holds {len(NODE_PORT_RANGE)}")


def _clash(request: PortRequest, port: int, other: str) -> ConfigIssue:
    return ConfigIssue(
        ("tenants", request.index, "nodePort"),
        port,
        f"is a node port tenant {other!r} has held since an earlier `up`: moving it would break the "
        f"kubeconfig that team holds; choose another free port ({NODE_PORT_RANGE.start}-"
        f"{NODE_PORT_RANGE.stop - 1}) or remove nodePort",
    )


def remembered_after(
    assignment: PortAssignment, previous: Mapping[str, TenantPorts], tenants: Sequence[str]
) -> dict[str, dict[str, int | None]]:
    """What the memory holds after this `up`: this `up`'s ports, and, for a tenant that has none now (expose sni),
    the ones it held before, so a switch back gives them back. A tenant no longer configured is forgotten."""
    kept = {tenant: ports for tenant, ports in previous.items() if tenant in tenants}
    kept.update(assignment.ports)
    return {tenant: ports.to_data() for tenant, ports in sorted(kept.items())}

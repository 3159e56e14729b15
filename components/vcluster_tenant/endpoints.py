"""Where a team reaches its API: a node port on the host's address, or its own hostname on port 443 by SNI."""

from dataclasses import dataclass
from typing import Any

from config.upstream import TRAEFIK_TLS_ENTRYPOINT
from config.vcluster_tenant.node_ports import TenantPorts
from config.vcluster_tenant.tenants import TenantConfig, VClusterConfig


@dataclass(frozen=True)
class Endpoint:
    """Where a tenant's API is reached: the host's address and the tenant's node ports, or a hostname on 443."""

    host_address: str
    ports: TenantPorts | None = None
    """Node ports (expose: nodePort); None with expose sni."""
    hostname: str | None = None
    """<tenant>.<domain> (expose: sni)."""

    @property
    def name(self) -> str:
        """What teams connect to, and what the serving certificate must name."""
        return self.hostname or self.host_address

    @property
    def url(self) -> str:
        return f"https://{self.name}" if self.ports is None else f"https://{self.name}:{self.ports.https}"


def tenant_endpoint(
    tenant: TenantConfig, settings: VClusterConfig, *, host_address: str, ports: TenantPorts | None
) -> Endpoint:
    if settings.expose == "sni":
        return Endpoint(host_address, hostname=f"{tenant.name}.{settings.domain}")
    if ports is None:
        raise ValueError(f"tenant {tenant.name} has no node ports")
    return Endpoint(host_address, ports=ports)


def sni_route_spec(hostname: str, *, service: str) -> dict[str, Any]:
    """A Traefik IngressRouteTCP that passes TLS for `hostname` through to the tenant's API Service.

    It lives in the tenant's namespace beside the Service: the add-on leaves cross-namespace
    references off (see config/upstream.py, Traefik).
    """
    return {
        "entryPoints": [TRAEFIK_TLS_ENTRYPOINT],
        "routes": [{"match": f"HostSNI(`{hostname}`)", "services": [{"name": service, "port": 443}]}],
        "tls": {"passthrough": True},
    }

"""Where pods really reach the host's API server: the endpoints behind the `kubernetes` Service."""

from collections.abc import Sequence
from typing import Any


def api_endpoints(endpoints: Sequence[Any] | None, ports: Sequence[Any] | None) -> list[tuple[str, int]]:
    """(address, port) of each ready address of the EndpointSlice, for its TCP ports.

    A pod that connects to `kubernetes.default` is translated to one of these, and a
    NetworkPolicy sees that address and port, not the Service's (Calico checks after DNAT).
    """
    tcp = [int(port["port"]) for port in ports or [] if port.get("protocol", "TCP") == "TCP" and "port" in port]
    return [
        (str(address), port)
        for endpoint in endpoints or []
        for address in endpoint.get("addresses") or []
        for port in tcp
    ]

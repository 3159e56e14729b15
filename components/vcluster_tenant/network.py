"""The NetworkPolicies around each tenant, registered by the platform rather than rendered by the vCluster chart.

The chart's policies (policies.networkPolicy, chart/templates/networkpolicy.yaml @v0.35.1) let the
control plane reach ports 443, 8443 and 6443 at any address, which is the cloud metadata
service and every other tenant's API; its values can only add rules, not narrow them; and
the addresses a tenant may not reach (the machines, which grow with each worker) would be
release values, so adding a worker would upgrade every vCluster. Here each tenant gets:

- its workloads (the pods its syncer made, its CoreDNS among them): its own pods, its
  control plane, the host's DNS on port 53 (what the team's CoreDNS forwards to), and the
  internet, except private ranges, link-local, every machine of the cluster and the
  stack's blocked ranges;
- its control plane: its own pods, the host's DNS, and the host's API server at the
  addresses and port of the `kubernetes` Service's endpoints, nothing else.

The workloads' policy is registered on its own: the machines it blocks change with every
worker, and the release's values must not (each change of them restarts the control
plane: the chart puts their hash on its pod template, chart/templates/statefulset.yaml
@v0.35.1). The control plane's policy changes only with the host's API endpoints and the
identity provider, which restart the control plane anyway, so it goes with the release,
as a manifest of `experimental.deploy.host.manifests` (chart/templates/manifests.yaml
@v0.35.1): one registration less per team. Helm installs a NetworkPolicy before any
StatefulSet (InstallOrder, helm.sh/helm/v3 pkg/releaseutil/kind_sorter.go @v3.18.6, the
Helm pulumi-kubernetes' Release runs), so the control plane never runs outside it.

The team's CoreDNS runs inside the team's own cluster (vCluster OSS), so a policy of its
own could not tell it from a team pod labelled as it: the host's DNS on 53 is the team's
either way, and one policy says so (docs/security.md, The host's DNS).

Calico, MicroK8s' CNI, checks egress after the Service's DNAT, so a control plane reaching
`kubernetes.default` is checked at the endpoint's address and port.
"""

import contextlib
import ipaddress
import json
from collections.abc import Sequence
from typing import Any

from config.upstream import METADATA_NAME_LABEL, SYNCED_POD_LABEL, VCLUSTER_DEFAULT_PUBLIC_EGRESS_EXCEPT
from config.vcluster_tenant.oidc import OidcConfig

LINK_LOCAL = "169.254.0.0/16"
"""Cloud metadata (169.254.169.254) and its credentials: never a tenant's to reach."""
HOST_DNS = {
    "namespaceSelector": {"matchLabels": {METADATA_NAME_LABEL: "kube-system"}},
    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
}
DNS_PORTS = [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]
VCLUSTER_API_PORT = 8443
VCLUSTER_DNS_PORT = 1053
# The control plane serves its API on 8443 and its CoreDNS answers on 1053; its pods carry release=<name>, the
# CoreDNS pod it syncs k8s-app=vcluster-kube-dns: loft-sh/vcluster chart/templates/networkpolicy.yaml,
# statefulset.yaml @v0.35.1.
WORKLOADS_POLICY = "gpu-tenancy-workloads"
CONTROL_PLANE_POLICY = "gpu-tenancy-vcluster-control-plane"
"""Rendered with the tenant's release (control_plane_manifest); the stack registered it as
`gpu-tenancy-control-plane` before, which Helm could not adopt, hence the new name."""


def blocked_ranges(machine_addresses: Sequence[str], extra: Sequence[str]) -> list[str]:
    """What a tenant workload may not reach on the internet side: vCluster's private ranges, link-local,
    every machine's own address (its API, kubelet, cluster agent, node exporter and node ports), and the
    ranges the stack names. A DNS name has no address here (docs/security.md says what to add)."""
    blocked = [*VCLUSTER_DEFAULT_PUBLIC_EGRESS_EXCEPT, LINK_LOCAL]
    for address in machine_addresses:
        with contextlib.suppress(ValueError):
            blocked.append(f"{ipaddress.IPv4Address(address)}/32")
    for cidr in extra:
        if cidr not in blocked:
            blocked.append(cidr)
    return blocked


def _pods(**labels: str) -> dict[str, Any]:
    return {"podSelector": {"matchLabels": labels}}


def _policy(selector: dict[str, str], egress: list[dict[str, Any]], ingress: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "podSelector": {"matchLabels": selector},
        "policyTypes": ["Egress", "Ingress"],
        "egress": egress,
        "ingress": ingress,
    }


def workload_policy(tenant: str, blocked: Sequence[str]) -> dict[str, Any]:
    own_workloads = _pods(**{SYNCED_POD_LABEL: tenant})
    control_plane = _pods(release=tenant)
    control_plane_ports = [
        {"port": VCLUSTER_DNS_PORT, "protocol": "UDP"},
        {"port": VCLUSTER_DNS_PORT, "protocol": "TCP"},
        {"port": VCLUSTER_API_PORT, "protocol": "TCP"},
    ]
    return _policy(
        {SYNCED_POD_LABEL: tenant},
        egress=[
            {"to": [control_plane], "ports": control_plane_ports},
            {"to": [own_workloads]},
            {"to": [HOST_DNS], "ports": DNS_PORTS},
            {"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": list(blocked)}}]},
        ],
        ingress=[{"from": [control_plane]}, {"from": [own_workloads]}],
    )


def control_plane_manifest(
    tenant: str,
    namespace: str,
    api: Sequence[tuple[str, int]],
    identity_provider: OidcConfig | None,
    labels: dict[str, str],
) -> str:
    """The control plane's NetworkPolicy as the release's host manifest: JSON, which is YAML, inserted as it is."""
    return json.dumps(
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": CONTROL_PLANE_POLICY, "namespace": namespace, "labels": labels},
            "spec": control_plane_policy(tenant, api, identity_provider),
        },
        sort_keys=True,
    )


def control_plane_policy(
    tenant: str, api: Sequence[tuple[str, int]], identity_provider: OidcConfig | None = None
) -> dict[str, Any]:
    """`api`: (address, port) of each endpoint of the host's `kubernetes` Service; `identity_provider`, which the
    API server fetches its signing keys from (components/vcluster_tenant/oidc.py)."""
    own_workloads = _pods(**{SYNCED_POD_LABEL: tenant})
    peers = _pods(release=tenant)
    egress: list[dict[str, Any]] = [
        {"to": [peers]},
        {"to": [own_workloads]},
        {"to": [HOST_DNS], "ports": DNS_PORTS},
    ]
    egress += [
        {"to": [{"ipBlock": {"cidr": f"{address}/32"}}], "ports": [{"port": port, "protocol": "TCP"}]}
        for address, port in api
    ]
    if identity_provider is not None:
        egress.append(
            {
                "to": [{"ipBlock": {"cidr": cidr}} for cidr in identity_provider.reachable_ranges()],
                "ports": [{"port": identity_provider.issuer_port(), "protocol": "TCP"}],
            }
        )
    return _policy(
        {"release": tenant},
        egress=egress,
        ingress=[
            # The team's endpoint: through its node port or the SNI router, from anywhere.
            {"ports": [{"port": VCLUSTER_API_PORT, "protocol": "TCP"}]},
            {"from": [peers]},
        ],
    )

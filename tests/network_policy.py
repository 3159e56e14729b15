"""Kubernetes NetworkPolicy, evaluated for one connection as the CNI enforces it.

A stand-in, modelled on the NetworkPolicy API (kubernetes/api networking/v1/types.go @v0.36.0)
as Calico, MicroK8s' CNI, enforces it: a pod selected by no policy of a type is open in that
direction; otherwise a connection needs a rule of some selecting policy on the source's
egress and on the destination pod's ingress. Peers are pods (podSelector in the policy's
namespace, namespaceSelector with an optional podSelector) or IP blocks (cidr minus
except), which Calico applies to pod addresses too. A Service is reached at the pod it is
translated to: policies see the connection after DNAT.
"""

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Json = dict[str, Any]


@dataclass(frozen=True)
class Pod:
    namespace: str
    ip: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Target:
    """Where a connection goes: an address and port, and the pod behind it if there is one."""

    ip: str
    port: int
    protocol: str = "TCP"
    pod: Pod | None = None


def _selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        present = key in labels
        ok = {
            "In": present and labels[key] in values,
            "NotIn": not present or labels[key] not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }[operator]
        if not ok:
            return False
    return True


def _in_block(ip: str, block: Mapping[str, Any]) -> bool:
    address = ipaddress.ip_address(ip)
    if address not in ipaddress.ip_network(block["cidr"]):
        return False
    return not any(address in ipaddress.ip_network(excluded) for excluded in block.get("except") or [])


class World:
    """The policies in force and the namespaces' labels."""

    def __init__(self, policies: Iterable[Json], namespace_labels: Mapping[str, Mapping[str, str]]) -> None:
        self.policies = list(policies)
        self.namespaces = namespace_labels

    def _peer_matches(self, peer: Mapping[str, Any], policy_namespace: str, ip: str, pod: Pod | None) -> bool:
        if "ipBlock" in peer:
            return _in_block(ip, peer["ipBlock"])
        if pod is None:
            return False
        if "namespaceSelector" in peer:
            in_namespace = _selects(peer["namespaceSelector"], self.namespaces.get(pod.namespace, {}))
        else:
            in_namespace = pod.namespace == policy_namespace
        pods = peer.get("podSelector")
        return in_namespace and (pods is None or _selects(pods, pod.labels))

    @staticmethod
    def _port_matches(ports: list[Json] | None, target: Target) -> bool:
        if not ports:
            return True
        for port in ports:
            if port.get("protocol", "TCP") != target.protocol:
                continue
            if "port" not in port:
                return True
            start = port["port"]
            # A named port (a string) is never used here. Numbers arrive as floats through Pulumi's wire format.
            if isinstance(start, int | float) and start <= target.port <= port.get("endPort", start):
                return True
        return False

    def _selecting(self, pod: Pod, kind: str) -> list[Json]:
        return [
            p
            for p in self.policies
            if p["metadata"]["namespace"] == pod.namespace
            and _selects(p["spec"].get("podSelector", {}), pod.labels)
            and kind in p["spec"].get("policyTypes", ["Ingress"])
        ]

    def _egress(self, source: Pod, target: Target) -> bool:
        policies = self._selecting(source, "Egress")
        if not policies:
            return True
        for policy in policies:
            for rule in policy["spec"].get("egress") or []:
                peers = rule.get("to")
                reached = not peers or any(
                    self._peer_matches(peer, policy["metadata"]["namespace"], target.ip, target.pod) for peer in peers
                )
                if reached and self._port_matches(rule.get("ports"), target):
                    return True
        return False

    def _ingress(self, source: Pod, target: Target) -> bool:
        if target.pod is None:
            return True
        policies = self._selecting(target.pod, "Ingress")
        if not policies:
            return True
        for policy in policies:
            for rule in policy["spec"].get("ingress") or []:
                peers = rule.get("from")
                reached = not peers or any(
                    self._peer_matches(peer, policy["metadata"]["namespace"], source.ip, source) for peer in peers
                )
                if reached and self._port_matches(rule.get("ports"), target):
                    return True
        return False

    def allows(self, source: Pod, target: Target) -> bool:
        return self._egress(source, target) and self._ingress(source, target)

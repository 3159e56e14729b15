"""Each tenant's node ports, and which teams there are, remembered on the host cluster from one `up` to the next.

The assignment itself is pure (config.vcluster_tenant.node_ports); what it starts from is a
ConfigMap on the host, `kube-system/gpu-tenancy-node-ports`, that every `up` reads and then
writes before any tenant's Service takes a port. The memory lives with the ports it
describes (a new cluster starts afresh), holds no credential, and survives what a stack
output does not: a failed `up` (the stack's outputs are written only when the program
finishes), a switch to `sni` and back (the ports stay remembered while unused), and any
backend layout (a StackReference to the stack itself needs the project-scoped name).

The memory also holds the teams this `up` configured (`tenants.json`), so that the next one
refuses to delete a team the operator did not name in `vcluster.removeTenants`
(config/vcluster_tenant/removals.py). NodePortMemory owns three resources: the ConfigMap,
created empty once and never rewritten by its own resource (`ignore_changes: data`); a
read of it, which sees what the last `up` wrote (in a preview too; in a fresh stack's
preview it is unknown); and a server-side-apply patch that writes this `up`'s assignment.
"""

import json
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.shared.labels import MANAGED_BY
from components.shared.ownership import owned
from config.issues import ConfigError, Path, problem
from config.stack import StackConfig
from config.vcluster_tenant.node_ports import (
    PortAssignment,
    PortRequest,
    TenantPorts,
    assign_node_ports,
    previous_ports,
    remembered_after,
)
from config.vcluster_tenant.removals import (
    PORTS_KEY,
    TENANTS_KEY,
    previous_tenants,
    removal_problems,
    undeclared_removals,
)
from config.vcluster_tenant.tenants import proxies_kubelets_by_hostname

NODE_PORTS_OUTPUT = "nodePorts"
"""The stack output that shows which node ports each tenant holds."""
MEMORY_NAMESPACE = "kube-system"
MEMORY_NAME = "gpu-tenancy-node-ports"
MEMORY_KEY = PORTS_KEY


@dataclass(frozen=True)
class NodePortMemoryArgs:
    settings: StackConfig
    """The tenants and how they are exposed; the memory is kept for them whatever `expose` is."""


def _requests(settings: StackConfig) -> list[PortRequest]:
    return [
        PortRequest(tenant.name, index, tenant.node_port, proxies_kubelets_by_hostname(tenant.values))
        for index, tenant in enumerate(settings.tenants)
    ]


def _reserved(settings: StackConfig) -> dict[int, Path]:
    """Node ports no tenant may take: the team views' (observability.teamViewsNodePort)."""
    views = settings.observability
    if not views.team_views_enabled:
        return {}
    return {views.team_views_node_port: ("observability", "teamViewsNodePort")}


def _stored(text: str | None) -> dict[str, TenantPorts]:
    """The memory's ports; text no version of this program wrote is no memory."""
    try:
        return previous_ports(json.loads(text or "{}"))
    except json.JSONDecodeError:
        return {}


def _removals_declared(settings: StackConfig, data: dict[str, str] | None) -> dict[str, str] | None:
    """The memory, once no team it lists would go without being named in vcluster.removeTenants; else the run ends
    with the fix."""
    tenants = [tenant.name for tenant in settings.tenants]
    gone = undeclared_removals(previous_tenants(data), tenants, settings.vcluster.remove_tenants)
    if gone:
        raise pulumi.RunError(str(ConfigError(removal_problems(gone))))
    return data


def _assign(settings: StackConfig, stored: str | None) -> PortAssignment:
    """This `up`'s ports (none with expose sni); a user-set port another tenant holds ends the run with the fix."""
    if settings.vcluster.expose != "nodePort":
        return PortAssignment()
    assignment = assign_node_ports(_requests(settings), _stored(stored), _reserved(settings))
    if assignment.issues:
        lines = [problem(issue.path, issue.value, issue.message) for issue in assignment.issues]
        raise pulumi.RunError(str(ConfigError(lines)))
    for tenant, (before, after) in sorted(assignment.moved.items()):
        pulumi.log.warn(
            f"tenant {tenant}'s API moves from node port {before.https} to {after.https}: "
            "the kubeconfig its team holds stops working; hand out the new one"
        )
    return assignment


class NodePortMemory(pulumi.ComponentResource):
    assignment: pulumi.Output[PortAssignment]
    """This `up`'s ports for every tenant (none with expose sni)."""
    remembered: list[pulumi.Resource]
    """Done once this `up`'s assignment is written: every tenant's Service waits for it."""

    def __init__(self, name: str, args: NodePortMemoryArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-tenancy:index:NodePortMemory", name, None, owned(opts))
        settings = args.settings
        child = pulumi.ResourceOptions(parent=self)
        metadata = {"name": MEMORY_NAME, "namespace": MEMORY_NAMESPACE, "labels": dict(MANAGED_BY)}
        memory = k8s.core.v1.ConfigMap(
            f"{name}-configmap",
            metadata=metadata,
            data={},
            opts=child.merge(pulumi.ResourceOptions(ignore_changes=["data"])),
        )
        # Kept whether or not there are teams: removing the last one is a removal like any other.
        held = k8s.core.v1.ConfigMap.get(
            f"{name}-read", memory.id, opts=child.merge(pulumi.ResourceOptions(depends_on=[memory]))
        ).data
        stored = held.apply(lambda data: _removals_declared(settings, data)).apply(
            lambda data: (data or {}).get(MEMORY_KEY)
        )
        self.assignment = stored.apply(lambda text: _assign(settings, text))
        tenants = [tenant.name for tenant in settings.tenants]
        written = pulumi.Output.all(self.assignment, stored).apply(
            lambda parts: json.dumps(remembered_after(parts[0], _stored(parts[1]), tenants), sort_keys=True)
        )
        patch = k8s.core.v1.ConfigMapPatch(
            f"{name}-write",
            metadata={**metadata, "annotations": {"pulumi.com/patchForce": "true"}},
            data={MEMORY_KEY: written, TENANTS_KEY: json.dumps(sorted(tenants))},
            opts=child.merge(pulumi.ResourceOptions(depends_on=[memory])),
        )
        self.remembered = [patch]
        self.register_outputs({"assignment": self.assignment.apply(lambda a: a.to_data())})

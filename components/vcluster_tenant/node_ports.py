"""Each tenant's node ports, remembered from the stack's own previous `up`.

The assignment itself is pure (config.node_ports); what it starts from is the stack's
last `nodePorts` output, read with a StackReference to the stack itself. That read is
a Pulumi resource, so it lives here rather than in config/, which only validates.
"""

import pulumi

from config.issues import ConfigError, problem
from config.stack import StackConfig
from config.vcluster_tenant.node_ports import PortAssignment, PortRequest, assign_node_ports, previous_ports
from config.vcluster_tenant.tenants import proxies_kubelets_by_hostname

NODE_PORTS_OUTPUT = "nodePorts"
"""The stack output that remembers which node ports each tenant holds, for every later `up`."""


def node_port_assignment(settings: StackConfig) -> pulumi.Output[PortAssignment]:
    """Each tenant's node ports, starting from what the previous `up` gave them.

    The stack reads its own last outputs (a StackReference to itself: on a fresh stack they are
    empty, and the engine reads them in a preview too). A user-set port that another tenant
    already holds ends the run with the fix; a port that moved anyway is a warning naming the team.
    """
    if settings.vcluster.expose != "nodePort" or not settings.tenants:
        return pulumi.Output.from_input(PortAssignment())
    requests = [
        PortRequest(tenant.name, index, tenant.node_port, proxies_kubelets_by_hostname(tenant.values))
        for index, tenant in enumerate(settings.tenants)
    ]
    # The DIY backend's organization is always "organization" (pulumi/pulumi pkg/backend/diy/state.go).
    self_name = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
    remembered = pulumi.StackReference("previous-up", stack_name=self_name).get_output(NODE_PORTS_OUTPUT)

    def assign(previous: object) -> PortAssignment:
        assignment = assign_node_ports(requests, previous_ports(previous))
        if assignment.issues:
            lines = [problem(issue.path, issue.value, issue.message) for issue in assignment.issues]
            raise pulumi.RunError(str(ConfigError(lines)))
        for tenant, (before, after) in sorted(assignment.moved.items()):
            pulumi.log.warn(
                f"tenant {tenant}'s API moves from node port {before.https} to {after.https}: "
                "the kubeconfig its team holds stops working; hand out the new one"
            )
        return assignment

    return remembered.apply(assign)

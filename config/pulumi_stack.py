"""The running program's view of its config: validated settings plus secret credentials.

This is the only module that reads `pulumi.Config`; components receive what it returns.
"""

from dataclasses import dataclass

import pulumi
import pulumi.runtime

from config.issues import PROJECT, ConfigError, problem
from config.node_ports import PortAssignment, PortRequest, assign_node_ports, previous_ports
from config.sources import SECRET_KEYS, decode_structured, load_settings, secret_problems, split_project_keys
from config.stack import StackConfig
from config.tenants import proxies_kubelets_by_hostname

NODE_PORTS_OUTPUT = "nodePorts"
"""The stack output that remembers which node ports each tenant holds, for every later `up`."""


@dataclass(frozen=True)
class StackInputs:
    settings: StackConfig
    secrets: dict[str, pulumi.Output[str]]
    """Credentials the host mode needs (`kubeconfig`, `sshPrivateKey`), secret from the moment they are read."""


def _project_keys() -> dict[str, str | None]:
    # Pulumi has no public "list my config keys" call; the two places it keeps
    # them are the explicit map (set by tests and the exec host) and PULUMI_CONFIG.
    keys = set(pulumi.runtime.config.CONFIG.get()) | set(pulumi.runtime.get_config_env())
    return split_project_keys({key: pulumi.runtime.get_config(key) for key in keys})


def load_stack_inputs() -> StackInputs:
    """Validate everything before any resource exists; any problem ends the run as one RunError."""
    keys = _project_keys()
    plain = {key: decode_structured(value) for key, value in keys.items() if key not in SECRET_KEYS}
    try:
        settings = load_settings({**plain, **dict.fromkeys(SECRET_KEYS & keys.keys())})
        problems = secret_problems(settings, keys.keys())
        if problems:
            raise ConfigError(problems)
    except ConfigError as error:
        raise pulumi.RunError(str(error)) from None
    for warning in settings.warnings():
        pulumi.log.warn(warning)
    config = pulumi.Config(PROJECT)
    secrets = {key: config.require_secret(key) for key in SECRET_KEYS & keys.keys()}
    return StackInputs(settings=settings, secrets=secrets)


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

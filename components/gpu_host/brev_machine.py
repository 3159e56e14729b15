"""A Brev instance as an SSH-reachable machine, created and deleted by the brev CLI on the machine running Pulumi.

Two local commands: one makes sure the instance exists and runs (and deletes it on
destroy, if asked and if this stack created it), the other reads how to reach it
over SSH. `role` only shapes the refusal of an instance behind a ProxyCommand.
"""

from typing import Any

import pulumi
import pulumi_command as command

from components.gpu_host.host_facts import parse_brev_ssh
from components.gpu_host.host_scripts import render_script
from config.gpu_host.host import BrevHost

BREV_READY_TIMEOUT_SECONDS = 900


def brev_machine(
    host: BrevHost, instance_name: str, prefix: str, *, role: str, parent: pulumi.Resource
) -> tuple[pulumi.Output[Any], pulumi.Output[str], list[pulumi.Resource]]:
    """A Brev instance with the host's GPU filter: its SSH connection (secret), address, and resources."""
    local = pulumi.ResourceOptions(parent=parent)
    spec = {
        "BREV_NAME": instance_name,
        "BREV_GPU_NAME": host.gpu_name,
        "BREV_CLOUD": host.cloud,
        "BREV_INSTANCE_TYPE": host.instance_type or "",
    }
    ensure = render_script(
        "brev-instance.sh", {**spec, "ACTION": "ensure", "READY_TIMEOUT_SECONDS": str(BREV_READY_TIMEOUT_SECONDS)}
    )
    instance = command.local.Command(
        f"{prefix}-brev-instance",
        create=ensure,
        # An update (e.g. a new deleteOnDestroy) must carry the created=true marker on: pulumi-command
        # runs `update` (else `create`) on an input change, with the last output in PULUMI_COMMAND_STDOUT.
        update=ensure,
        delete=render_script(
            "brev-instance.sh",
            {
                "ACTION": "delete",
                "BREV_NAME": instance_name,
                "DELETE_ON_DESTROY": str(host.delete_on_destroy).lower(),
            },
        ),
        # Another instance (a new name, GPU or cloud) is a new resource: the old one's delete step runs
        # once the new one exists (pulumi/pulumi-command provider/pkg/provider/common/inputs.go @v1.2.1).
        triggers=list(spec.values()),
        interpreter=["/bin/bash", "-c"],
        add_previous_output_in_env=True,
        opts=local,
    )
    ssh = command.local.Command(
        f"{prefix}-brev-ssh",
        create=render_script("brev-ssh.sh", {"BREV_NAME": instance_name, "ROLE": role}),
        interpreter=["/bin/bash", "-c"],
        triggers=[instance.id],
        # The output carries the instance's private key: secret in state and never logged.
        logging=command.local.Logging.STDERR,
        opts=local.merge(pulumi.ResourceOptions(additional_secret_outputs=["stdout"], depends_on=[instance])),
    )
    endpoint = ssh.stdout.apply(parse_brev_ssh)
    connection = endpoint.apply(
        lambda e: {"host": e.address, "user": e.user, "port": e.port, "privateKey": e.private_key}
    )
    address = pulumi.Output.unsecret(endpoint.apply(lambda e: e.address))
    return pulumi.Output.secret(connection), address, [instance, ssh]

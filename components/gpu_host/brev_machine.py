"""A Brev instance as an SSH-reachable machine, created and deleted by the brev CLI on the machine running Pulumi.

A local command makes sure the instance exists, runs and is what config asks (and deletes
it on destroy, if asked and if this stack created it, by the id it recorded); a local
invoke reads how to reach it over SSH on every run. `role` only shapes the refusal of an
instance behind a ProxyCommand.
"""

from typing import Any

import pulumi
import pulumi_command as command

from components.gpu_host.host_facts import parse_brev_ssh
from components.gpu_host.host_scripts import render_script
from config.gpu_host.host import BrevHost
from config.issues import PROJECT

BREV_READY_TIMEOUT_SECONDS = 900
LOCAL_INTERPRETER = ("/bin/sh", "-c")
"""Scripts on the operator's machine are POSIX sh: macOS has bash 3.2 as /bin/bash, Debian dash as /bin/sh."""


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
        "brev-instance.sh",
        {
            **spec,
            "ACTION": "ensure",
            "CONFIG_KEY": f"{PROJECT}:host",
            "READY_TIMEOUT_SECONDS": str(BREV_READY_TIMEOUT_SECONDS),
        },
    )
    instance = command.local.Command(
        f"{prefix}-brev-instance",
        create=ensure,
        # A changed spec runs `update`, with the last output in PULUMI_COMMAND_STDOUT: the script refuses a
        # spec Brev cannot give an existing instance, and carries the created marker and the id on.
        update=ensure,
        delete=render_script(
            "brev-instance.sh",
            {
                "ACTION": "delete",
                "BREV_NAME": instance_name,
                "DELETE_ON_DESTROY": str(host.delete_on_destroy).lower(),
            },
        ),
        # Only another name is another instance. A trigger replaces the resource, create-before-delete
        # (pulumi/pulumi-command provider/pkg/provider/common/inputs.go @v1.2.1: replaceOnChanges
        # triggers[*]), and the new one would find the same instance and the old one's delete would remove
        # it. The spec stays in the triggers, as earlier versions stored them, so an upgrade replaces
        # nothing; the engine keeps their old values (ignoreChanges applies before the diff).
        triggers=list(spec.values()),
        interpreter=list(LOCAL_INTERPRETER),
        add_previous_output_in_env=True,
        opts=local.merge(pulumi.ResourceOptions(ignore_changes=[f"triggers[{i}]" for i in range(1, len(spec))])),
    )
    # Its own step, so that a timeout here cannot lose what the instance step recorded (that this stack created
    # the instance): a failed command keeps no output. A new instance (another id) is waited for again.
    running = command.local.Command(
        f"{prefix}-brev-running",
        create=render_script(
            "brev-instance.sh",
            {"ACTION": "wait", "BREV_NAME": instance_name, "READY_TIMEOUT_SECONDS": str(BREV_READY_TIMEOUT_SECONDS)},
        ),
        triggers=[instance.stdout],
        interpreter=list(LOCAL_INTERPRETER),
        opts=local.merge(pulumi.ResourceOptions(depends_on=[instance])),
    )
    # Resolved on every preview and `up`, not stored: a stopped and started instance may have a new address.
    resolved = command.local.run_output(
        command=render_script("brev-ssh.sh", {"BREV_NAME": instance_name, "ROLE": role}),
        interpreter=list(LOCAL_INTERPRETER),
        # Its stdout is the instance's private key: never logged (the key is printed last, after every check).
        logging=command.local.Logging.STDERR,
        opts=pulumi.InvokeOutputOptions(depends_on=[running], parent=parent),
    )
    endpoint = pulumi.Output.secret(resolved.stdout).apply(lambda stdout: parse_brev_ssh(str(stdout)))
    connection = endpoint.apply(
        lambda e: {"host": e.address, "user": e.user, "port": e.port, "privateKey": e.private_key}
    )
    address = pulumi.Output.unsecret(endpoint.apply(lambda e: e.address))
    return pulumi.Output.secret(connection), address, [instance, running]

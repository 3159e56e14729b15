"""A host script run over SSH as a Pulumi resource: one bootstrap step on one machine."""

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_command as command

from components.gpu_host.host_scripts import remote_command


def remote_step(
    resource_name: str,
    *,
    connection: pulumi.Input[Any],
    script: str,
    inputs: Mapping[str, pulumi.Input[str]],
    parent: pulumi.Resource,
    after: Sequence[pulumi.Resource] = (),
    triggers: Sequence[pulumi.Input[str]] = (),
    delete: pulumi.Input[str] | None = None,
    secret_output: bool = False,
    stdin: pulumi.Input[str] | None = None,
    ignore_changes: Sequence[str] = (),
) -> command.remote.Command:
    """The rendered script, run once `after` finished.

    A changed script (new inputs) re-runs it in place; a changed trigger replaces it,
    which also re-runs it. Only steps without a delete command take triggers: replacing
    a step that has one would run its teardown. A step whose output is a credential keeps
    it out of the logs (pulumi-command streams stdout by default, and secretness applies
    only to state: provider/pkg/provider/local/commandOutputs.go @v1.2.1).

    `inputs` are never secret: a failed step's error holds the whole script text and
    everything it printed, whatever `logging` says (`fmt.Errorf("%w: running %q:\n%s", ...)`,
    remote/commandOutputs.go @v1.2.1). A secret goes on `stdin`, which is piped to the
    session, kept secret in state, and in no error text.
    """
    rendered = pulumi.Output.all(**inputs).apply(lambda values: remote_command(script, values))
    return command.remote.Command(
        resource_name,
        connection=connection,
        create=rendered,
        delete=delete,
        stdin=stdin,
        triggers=list(triggers) or None,
        # The previous stdout would go as PULUMI_COMMAND_STDOUT over SSH setenv, which sshd refuses unless
        # AcceptEnv allows it: a warning on every update (remote/commandOutputs.go @v1.2.1). No step reads it.
        add_previous_output_in_env=False,
        logging=command.remote.Logging.STDERR if secret_output else None,
        opts=pulumi.ResourceOptions(
            parent=parent,
            depends_on=list(after),
            additional_secret_outputs=["stdout"] if secret_output else None,
            ignore_changes=list(ignore_changes) or None,
        ),
    )


def remote_delete(script: str, inputs: Mapping[str, pulumi.Input[str]]) -> pulumi.Output[str]:
    """A delete command: the script rendered with its inputs, as stored when the step was created."""
    return pulumi.Output.all(**inputs).apply(lambda values: remote_command(script, values))

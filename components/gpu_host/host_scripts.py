"""Host scripts as they are shipped: the `.sh` file with its inputs pinned at the top.

The scripts read their inputs from variables, so they also run unchanged under
tests with a stand-in environment. Rendering assigns those variables in the
script text itself: pulumi-command sends a remote command's `environment` with SSH
setenv, which the server refuses unless its AcceptEnv allows it
(pulumi/pulumi-command provider/pkg/provider/remote/commandOutputs.go @v1.2.1), and the
rendered text is what Pulumi diffs and stores.
"""

import shlex
from collections.abc import Mapping
from pathlib import Path

SCRIPTS_DIR = Path(__file__).parent / "scripts"

MARKER_DIR = "/var/lib/gpu-tenancy"
"""Where host scripts record what this stack installed, so teardown removes only that."""


def render_script(name: str, inputs: Mapping[str, str]) -> str:
    """The script `name` with each input assigned right after its shebang line."""
    shebang, body = (SCRIPTS_DIR / name).read_text().split("\n", 1)
    assignments = "".join(f"{key}={shlex.quote(value)}\n" for key, value in sorted(inputs.items()))
    return f"{shebang}\n# Inputs, rendered by gpu-tenancy:\n{assignments}{body}"


def remote_command(name: str, inputs: Mapping[str, str]) -> str:
    """A command line that runs the rendered script with bash, whatever the remote login shell is."""
    return f"bash -c {shlex.quote(render_script(name, inputs))}"

"""Rules of the Pulumi engine and its providers that Pulumi's mocks do not apply, reproduced from their source.

- pulumi-command's error for a failed command: the exit error, the whole command text (Go `%q`), then
  everything it printed on stdout and stderr, whatever `logging` says:
  `fmt.Errorf("%w: running %q:\\n%s", err, command, stdouterrbuf.String())`
  (pulumi/pulumi-command provider/pkg/provider/{local,remote}/commandOutputs.go @v1.2.1).
"""

import json


def failure_text(command: str, stdout: str, stderr: str, exit_error: str = "exit status 1") -> str:
    """What `pulumi up` prints when a command step fails. Go's %q escapes as JSON does for this text."""
    return f"{exit_error}: running {json.dumps(command)}:\n{stdout}{stderr}"

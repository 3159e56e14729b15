"""The real program under Pulumi's mocks: what it registers, exports and logs, with the engine's URNs.

Shared by the tests and the benchmarks, so neither depends on the other. Nothing here
talks to a cluster or the Pulumi CLI; the mocks answer as the real providers would
(a kubeconfig for `microk8s config`, a status for a Helm release, a read Secret).
"""

from harness.mocks import (
    FAKE_HOST_KEY,
    FAKE_HOST_KUBECONFIG,
    GRAFANA_PASSWORD,
    JOIN_TOKEN,
    FreshPreviewMocks,
    RealisticMocks,
    script_input,
    tenant_kubeconfig,
)
from harness.monitor import RecordingMonitor, Registration
from harness.program import (
    MAIN,
    PROJECT,
    ROOT,
    ExportedValue,
    ProgramRun,
    attempt_main,
    is_unknown,
    run_main,
    run_pulumi,
)
from harness.stacks import dev_settings, stack_with_teams

__all__ = [
    "FAKE_HOST_KEY",
    "FAKE_HOST_KUBECONFIG",
    "GRAFANA_PASSWORD",
    "JOIN_TOKEN",
    "MAIN",
    "PROJECT",
    "ROOT",
    "ExportedValue",
    "FreshPreviewMocks",
    "ProgramRun",
    "RealisticMocks",
    "RecordingMonitor",
    "Registration",
    "attempt_main",
    "dev_settings",
    "is_unknown",
    "run_main",
    "run_pulumi",
    "script_input",
    "stack_with_teams",
    "tenant_kubeconfig",
]

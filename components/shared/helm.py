"""Every Helm release this program installs, with the options a release always needs."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

HELM_TIMEOUT_SECONDS = 600
"""How long Helm waits for a release's resources to be ready (its --wait, on by default in pulumi-kubernetes)."""
HELM_HISTORY = 3
"""Revisions Helm keeps per release, each a Secret in the release's namespace. pulumi-kubernetes keeps every
one unless told (maxHistory unset means 0, no limit: provider/pkg/provider/helm_release.go @v4.32.0), and in a
tenant's namespace they count against the quota's count/secrets, so a long-lived tenant's upgrades would
eventually fail on quota."""


@dataclass(frozen=True)
class ReleaseSpec:
    """What a release installs; as plain data, it is also what a gate vouches for."""

    name: str
    chart: str
    """A chart name in `repo`, or a whole `oci://` reference (then `repo` is None)."""
    version: str
    values: Mapping[str, Any] = field(default_factory=dict)
    repo: str | None = None


def helm_release(
    resource_name: str,
    spec: ReleaseSpec,
    *,
    namespace: pulumi.Input[str],
    opts: pulumi.ResourceOptions,
    values: pulumi.Input[Mapping[str, Any]] | None = None,
    timeout_seconds: int = HELM_TIMEOUT_SECONDS,
    secret_values: bool = False,
    free_name_first: bool = True,
    **options: Any,
) -> k8s.helm.v3.Release:
    """A release of `spec`; `values` replaces the spec's when they are only known as an Output. `secret_values`:
    they came from config with a secret inside, and stay secret in the release's inputs, state and previews.

    Deleted before it is replaced (`free_name_first`): a replacement (new name or namespace)
    would otherwise install the new release while the old one still owns the chart's
    cluster-scoped objects, and Helm refuses a name that is still in use
    (helm/helm pkg/action/install.go @v3.20.2; pulumi-kubernetes leaves
    deleteBeforeReplace false: provider/pkg/provider/helm_release.go @v4.32.0). A release
    whose name and namespace never change (a team's) is replaced only when its cluster is
    (a new clusterIdentifier): then the old one is deleted last, after every new step.
    """
    oci = spec.chart.startswith("oci://")
    given: pulumi.Input[Mapping[str, Any]] = dict(spec.values) if values is None else values
    return k8s.helm.v3.Release(
        resource_name,
        name=spec.name,
        chart=spec.chart,
        repository_opts=None if oci or spec.repo is None else {"repo": spec.repo},
        version=spec.version,
        namespace=namespace,
        values=pulumi.Output.secret(given) if secret_values else given,
        timeout=timeout_seconds,
        max_history=HELM_HISTORY,
        **options,
        opts=opts.merge(pulumi.ResourceOptions(delete_before_replace=free_name_first)),
    )

"""Gate: a Job of kubectl steps that Pulumi awaits, with just the access those steps need.

Why a Job: pulumi-kubernetes awaits a batch/v1 Job until it completes and fails
the update on BackoffLimitExceeded or DeadlineExceeded (pulumi/pulumi-kubernetes
provider/pkg/await/job.go, checker/job/check.go @v4.32.0), so whatever depends on
the Job starts only once every step has succeeded; activeDeadlineSeconds bounds the
whole gate (kubernetes/api batch/v1/types.go @v0.36.0).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.shared.gate_pod import RETRIES, GateStep, fingerprint, gate_pod
from components.shared.labels import MANAGED_BY
from components.shared.ownership import owned

RBAC_GROUP = "rbac.authorization.k8s.io"
GATE_TYPE = "gpu-tenancy:index:Gate"
"""Gate's type token, for the aliases of a Job that was once a Gate's."""


@dataclass(frozen=True)
class Grant:
    """RBAC rules for the gate's ServiceAccount: in one namespace, or cluster-wide when `namespace` is None.

    `key` names the Role and its binding among the gate's resources (e.g. `operator`).
    """

    key: str
    rules: tuple[Mapping[str, Any], ...]
    namespace: pulumi.Input[str] | None = None


@dataclass(frozen=True)
class GateArgs:
    object_name: str
    """The name of the Job, its account and its files in the cluster: fixed, so it fits every limit."""
    namespace: pulumi.Input[str]
    steps: Sequence[GateStep]
    kubectl_version: str
    """Tag of the kubectl image every step runs in."""
    timeout_seconds: int
    """How long each waiting step waits; the Job's deadline and Pulumi's wait add a margin."""
    grants: Sequence[Grant] = ()
    service_account: str | None = None
    """Run as this existing account, which already has what the steps need: no account or RBAC of the gate's own."""
    vouches_for: Any = None
    """Plain data the gate proves: when it changes, the Job is replaced and the gate runs again."""
    files: Mapping[str, str] | None = None
    """Mounted read-only at /gate, e.g. a manifest a step submits."""
    after: Sequence[pulumi.Resource] = ()
    """What must exist before the Job starts, beyond the gate's own account and files."""


def gate_job(
    name: str, args: GateArgs, prerequisites: Sequence[pulumi.Resource], opts: pulumi.ResourceOptions
) -> k8s.batch.v1.Job:
    """The gate's Job alone: what a gate running as an existing account, with no files, is made of.

    Such a gate needs no component of its own (a tenant's kubeconfig gate is one per team, and
    each registration is a step of every `up`): its owner registers this Job as its own child.
    """
    meta = {"name": args.object_name, "namespace": args.namespace, "labels": MANAGED_BY}
    wait = f"{args.timeout_seconds + 120}s"
    return k8s.batch.v1.Job(
        name,
        metadata={**meta, "annotations": {"pulumi.com/replaceUnready": "true"}},
        spec={
            "backoffLimit": RETRIES,
            "activeDeadlineSeconds": args.timeout_seconds + 60,
            "template": {
                "metadata": {
                    "labels": MANAGED_BY,
                    "annotations": {"gpu-tenancy/vouches-for": fingerprint(args.vouches_for)},
                },
                "spec": gate_pod(
                    args.steps,
                    kubectl_version=args.kubectl_version,
                    service_account=args.service_account or args.object_name,
                    files_config_map=args.object_name if args.files else None,
                ),
            },
        },
        opts=opts.merge(
            pulumi.ResourceOptions(
                depends_on=[*prerequisites, *args.after],
                # The name is fixed: a replacement must remove the old Job first.
                delete_before_replace=True,
                custom_timeouts=pulumi.CustomTimeouts(create=wait, update=wait),
            )
        ),
    )


class Gate(pulumi.ComponentResource):
    """A gate's Job, files, and ServiceAccount with RBAC, named after the gate.

    The Job's template carries `vouches_for` as a fingerprint: when that changes, the
    immutable template changes, the Job is replaced and the gate runs again. A gate
    that failed is replaced on the next `up` as well (pulumi.com/replaceUnready).
    """

    job: k8s.batch.v1.Job
    """Depend on this to run only once every step has passed."""

    def __init__(self, name: str, args: GateArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-tenancy:index:Gate", name, None, owned(opts))
        if args.service_account is not None and args.grants:
            raise ValueError("a gate either runs as an existing account or is granted its own")
        # Before gates were components, these resources were children of the component that made the gate:
        # the alias keeps every live Job, account and binding instead of replacing it.
        were_under = opts.parent if opts is not None and opts.parent is not None else None
        child = pulumi.ResourceOptions(parent=self, aliases=[pulumi.Alias(parent=were_under)])
        meta = {"name": args.object_name, "namespace": args.namespace, "labels": MANAGED_BY}
        prerequisites: list[pulumi.Resource] = []
        if args.service_account is None:
            prerequisites.append(k8s.core.v1.ServiceAccount(name, metadata=meta, opts=child))
            subject = {"kind": "ServiceAccount", "name": args.object_name, "namespace": args.namespace}
            prerequisites += [self._grant(name, args.object_name, grant, subject, child) for grant in args.grants]
        if args.files:
            prerequisites.append(k8s.core.v1.ConfigMap(name, metadata=meta, data=dict(args.files), opts=child))
        self.job = gate_job(name, args, prerequisites, child)
        self.register_outputs({})

    @staticmethod
    def _grant(
        name: str,
        object_name: str,
        grant: Grant,
        subject: dict[str, Any],
        opts: pulumi.ResourceOptions,
    ) -> pulumi.Resource:
        """The Role (or ClusterRole) and its binding; the binding is what the Job waits for."""
        resource_name = f"{name}-{grant.key}"
        # Outside the gate's own namespace, and cluster-wide, names are shared: prefix them with the project.
        meta: dict[str, Any] = {"name": f"gpu-tenancy-{object_name}", "labels": MANAGED_BY}
        if grant.namespace is None:
            kind, role_type, binding_type = "ClusterRole", k8s.rbac.v1.ClusterRole, k8s.rbac.v1.ClusterRoleBinding
        else:
            kind, role_type, binding_type = "Role", k8s.rbac.v1.Role, k8s.rbac.v1.RoleBinding
            meta["namespace"] = grant.namespace
        role = role_type(resource_name, metadata=meta, rules=[dict(rule) for rule in grant.rules], opts=opts)
        binding: pulumi.Resource = binding_type(
            resource_name,
            metadata=meta,
            role_ref={"apiGroup": RBAC_GROUP, "kind": kind, "name": meta["name"]},
            subjects=[subject],
            opts=opts.merge(pulumi.ResourceOptions(depends_on=[role])),
        )
        return binding

"""KaiScheduler: the KAI Scheduler Helm release and a gate that opens only once KAI admits Queues."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.kai_scheduler.gate import gate_files, gate_grants, kai_gate_steps
from components.kai_scheduler.shard import PATCH_FORCE, SHARD_NAME, shard_spec
from components.kai_scheduler.values import kai_release_values
from components.shared.gate import Gate, GateArgs
from components.shared.helm import ReleaseSpec, helm_release
from components.shared.labels import MANAGED_BY, object_name
from components.shared.ownership import owned
from config.kai_scheduler.fairness import FairnessConfig
from config.kai_scheduler.settings import KaiSchedulerConfig
from config.upstream import SCHEDULER_NAME, SCHEDULING_SHARD_API

RELEASE_NAME = "kai-scheduler"


@dataclass(frozen=True)
class KaiSchedulerArgs:
    settings: KaiSchedulerConfig
    version: str
    """Exact chart version, e.g. v0.16.8."""
    kubectl_version: str
    """Tag of the kubectl image the gate runs."""
    cdi_enabled: bool | None
    """Whether the GPU Operator this stack installs runs CDI; None leaves it to KAI's own detection."""
    depends_on: Sequence[pulumi.Resource] = field(default_factory=tuple)
    """Upstream gates (e.g. the GPU host's) that must pass before KAI is installed."""
    secret_values: bool = False
    """`kaiScheduler.values` holds a secret: the release's values are a Pulumi secret."""
    fairness: FairnessConfig = field(default_factory=FairnessConfig)
    """Time-based fair share, written into the default SchedulingShard."""
    prometheus: str | None = None
    """The stack's Prometheus as pods reach it, where KAI reads past usage (time-based fairness)."""


@dataclass(frozen=True)
class _Shard:
    resource: pulumi.Resource
    spec: dict[str, Any]


class KaiScheduler(pulumi.ComponentResource):
    namespace: pulumi.Output[str]
    """Namespace of the release and its operands."""
    scheduler_name: pulumi.Output[str]
    """The `schedulerName` that routes pods to KAI."""
    release_status: pulumi.Output[str]
    """Helm's status of the release, e.g. `deployed`."""
    ready: pulumi.Resource
    """Depend on this to run only after KAI admits Queues."""
    shard_spec: dict[str, Any]
    """The default SchedulingShard's spec, as applied."""

    def __init__(self, name: str, args: KaiSchedulerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-tenancy:index:KaiScheduler", name, None, owned(opts))
        settings = args.settings
        # Children inherit the host's provider from this component's options.
        child = pulumi.ResourceOptions(parent=self)

        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": settings.namespace, "labels": MANAGED_BY},
            opts=child.merge(pulumi.ResourceOptions(depends_on=list(args.depends_on))),
        )
        namespace_name = object_name(namespace)
        spec = ReleaseSpec(
            name=RELEASE_NAME,
            chart=settings.chart,
            version=args.version,
            values=kai_release_values(settings, cdi_enabled=args.cdi_enabled),
        )
        # The release depends on its namespace, so destroy uninstalls it (and runs KAI's post-delete
        # cleanup Job, which deletes kai-config and with it KAI's webhooks) before the namespace goes:
        # deployments/kai-scheduler/templates/hooks/post/post-delete-job.yaml @v0.16.8.
        release = helm_release(
            f"{name}-release",
            spec,
            namespace=namespace_name,
            cleanup_on_fail=True,
            wait_for_jobs=True,
            secret_values=args.secret_values,
            opts=child,
        )
        shard = self._shard(name, args, dict(spec.values), release, child)
        gate = Gate(
            f"{name}-gate",
            GateArgs(
                object_name="kai-gate",
                namespace=namespace_name,
                steps=kai_gate_steps(settings.ready_timeout_seconds, settings.namespace),
                grants=gate_grants(namespace_name),
                kubectl_version=args.kubectl_version,
                timeout_seconds=settings.ready_timeout_seconds,
                # A new chart, version, values or shard re-runs the gate.
                vouches_for=(spec, shard.spec),
                files=gate_files(),
                after=[release, shard.resource],
            ),
            opts=child,
        )
        self.ready = gate.job
        self.shard_spec = shard.spec
        self.namespace = namespace_name
        self.scheduler_name = pulumi.Output.from_input(SCHEDULER_NAME)
        self.release_status = release.status.apply(lambda status: status.status)
        self.register_outputs(
            {
                "namespace": self.namespace,
                "scheduler_name": self.scheduler_name,
                "release_status": self.release_status,
            }
        )

    @staticmethod
    def _shard(
        name: str,
        args: KaiSchedulerArgs,
        values: dict[str, Any],
        release: pulumi.Resource,
        opts: pulumi.ResourceOptions,
    ) -> _Shard:
        """The default SchedulingShard, applied once the release has brought its CRD (and, on an upgrade, kept the
        chart's own shard for this patch to take over)."""
        spec = shard_spec(values.get("scheduler") or {}, args.fairness, args.prometheus)
        api_version, kind = SCHEDULING_SHARD_API
        resource = k8s.apiextensions.CustomResourcePatch(
            f"{name}-shard",
            api_version=api_version,
            kind=kind,
            metadata={"name": SHARD_NAME, "labels": MANAGED_BY, "annotations": PATCH_FORCE},
            spec=spec,
            opts=opts.merge(pulumi.ResourceOptions(depends_on=[release])),
        )
        return _Shard(resource, spec)

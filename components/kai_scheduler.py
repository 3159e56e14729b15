"""KaiScheduler: the KAI Scheduler Helm release and a gate that opens only once KAI admits Queues."""

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.gate_job import GateAccess, gate_job, gate_pod
from components.kai_gate import GATE_RULES, gate_files, kai_gate_container, release_fingerprint
from components.kai_values import kai_release_values
from components.labels import MANAGED_BY, object_name
from config.platform import KaiSchedulerConfig

RELEASE_NAME = "kai-scheduler"
SCHEDULER_NAME = "kai-scheduler"
"""The `schedulerName` team pods use to reach KAI."""

HELM_TIMEOUT_SECONDS = 600
KUBECTL_IMAGE = "registry.k8s.io/kubectl"


@dataclass(frozen=True)
class KaiSchedulerArgs:
    settings: KaiSchedulerConfig
    version: str
    """Exact chart version, e.g. v0.16.4."""
    kubectl_version: str
    """Tag of the kubectl image the gate runs."""
    provider: k8s.Provider
    depends_on: Sequence[pulumi.Resource] = field(default_factory=tuple)
    """Upstream gates (e.g. the GPU host's) that must pass before KAI is installed."""


class KaiScheduler(pulumi.ComponentResource):
    namespace: pulumi.Output[str]
    """Namespace of the release and its operands."""
    scheduler_name: pulumi.Output[str]
    """The `schedulerName` that routes pods to KAI."""
    release_status: pulumi.Output[str]
    """Helm's status of the release, e.g. `deployed`."""
    ready: pulumi.Resource
    """Depend on this to run only after KAI admits Queues."""

    def __init__(self, name: str, args: KaiSchedulerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-tenancy:index:KaiScheduler", name, None, opts)
        settings = args.settings
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)

        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": settings.namespace, "labels": MANAGED_BY},
            opts=child.merge(pulumi.ResourceOptions(depends_on=list(args.depends_on))),
        )
        namespace_name = object_name(namespace)

        values = kai_release_values(settings)
        release = k8s.helm.v3.Release(
            f"{name}-release",
            name=RELEASE_NAME,
            chart=settings.chart,
            version=args.version,
            namespace=namespace_name,
            values=values,
            cleanup_on_fail=True,
            wait_for_jobs=True,
            timeout=HELM_TIMEOUT_SECONDS,
            opts=child,
        )

        self.ready = self._gate(
            name, args, namespace_name, release, release_fingerprint(settings.chart, args.version, values)
        )
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

    def _gate(
        self,
        name: str,
        args: KaiSchedulerArgs,
        namespace: pulumi.Output[str],
        release: k8s.helm.v3.Release,
        fingerprint: str,
    ) -> k8s.batch.v1.Job:
        """A Job that pulumi-kubernetes awaits to completion; see scripts/kai-ready.sh for the why."""
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        timeout = args.settings.ready_timeout_seconds
        access = GateAccess(
            f"{name}-gate", namespace=namespace, files=gate_files(), cluster_rules=GATE_RULES, opts=child
        )
        pod = gate_pod(
            service_account=access.service_account,
            config_map=access.config_map,
            containers=[kai_gate_container(image=f"{KUBECTL_IMAGE}:{args.kubectl_version}", timeout_seconds=timeout)],
        )
        return gate_job(
            f"{name}-gate",
            namespace=namespace,
            pod=pod,
            fingerprint_annotation=("gpu-tenancy/kai-release", fingerprint),
            timeout_seconds=timeout,
            backoff_limit=1,
            opts=child.merge(pulumi.ResourceOptions(depends_on=[release, *access.bindings])),
        )

"""TenantAdmission: the host-side admission policies every tenant's pods pass, bound to all tenant namespaces."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.shared.labels import MANAGED_BY
from components.shared.ownership import owned
from components.vcluster_tenant.gang_rules import (
    CONSISTENCY_POLICY,
    GANG_POLICY,
    PODGROUP_POLICY,
    consistency_binding,
    consistency_policy_spec,
    gang_name_policy_spec,
    podgroup_policy_spec,
)
from components.vcluster_tenant.kai_rules import GPU_MEMORY_PARAMS, LARGEST_GPU_MEMORY_KEY, largest_gpu_memory_mib
from components.vcluster_tenant.object_rules import (
    LABEL_POLICY,
    SERVICE_POLICY,
    reserved_label_policy_spec,
    service_policy_spec,
)
from components.vcluster_tenant.policies import (
    CONFIGMAP_POLICY,
    NON_PREEMPTIBLE_POLICY,
    POD_POLICY,
    SECCOMP_POLICY,
    SYNCED_WORKLOAD,
    TENANT_NAMESPACES,
    binding_spec,
    configmap_policy_spec,
    non_preemptible_binding,
    non_preemptible_policy_spec,
    pinning_policy_spec,
    pod_binding_spec,
    pod_policy_spec,
    pod_rules,
    policy_metadata,
    seccomp_default_policy_spec,
)
from config.vcluster_tenant.tenants import VClusterConfig


@dataclass(frozen=True)
class TenantAdmissionArgs:
    settings: VClusterConfig
    kai_namespace: str
    """Where KAI runs: only its binder writes a fraction's ConfigMaps, only its pod-grouper KAI's PodGroups."""
    gang_controller_user: str
    """The gang controller's username: with KAI's pod-grouper, the only maker of PodGroups in tenant namespaces."""
    reserved_labels: Sequence[str]
    """Labels no tenant ConfigMap or Secret may carry: what the platform's Grafana (or an existing one) loads by."""
    default_seccomp: bool
    """The kubelet gives no default seccomp profile (a cluster this stack did not build): the policies do."""
    gpus: pulumi.Input[Mapping[str, Mapping[str, Any]] | None]
    """The GPU nodes the host read once its GPU gate passed (GpuHost.gpu): the gpu-memory floor follows the
    largest. Written into the pod policy's params once known; nothing waits for it."""
    pod_groups_served: Sequence[pulumi.Resource] = ()
    """What proves KAI's PodGroup API is served (KAI's gate): the gang-consistency policy waits for it.

    That policy reads PodGroups as its params, and while their kind is not served the API server refuses
    every request the policy's matchConstraints match, before it looks at a binding or a matchCondition
    (kubernetes/apiserver pkg/admission/plugin/policy/validating/dispatcher.go Dispatch, ConfigurationError
    from generic/policy_source.go @v0.36.3): every pod in every tenant namespace, the vCluster control
    planes included, for as long as KAI installs. Until it exists, gang pods are still safe: none runs
    without KAI, and the gang controller makes no PodGroup for pods that disagree."""


class TenantAdmission(pulumi.ComponentResource):
    ready: list[pulumi.Resource]
    """The bindings: a tenant's vCluster waits for them, so no synced pod ever escapes the policies."""

    def __init__(self, name: str, args: TenantAdmissionArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-tenancy:index:TenantAdmission", name, None, owned(opts))
        child = pulumi.ResourceOptions(parent=self)
        configmaps = configmap_policy_spec(args.kai_namespace, args.gang_controller_user)
        podgroups = podgroup_policy_spec(
            TENANT_NAMESPACES, kai_namespace=args.kai_namespace, controller_user=args.gang_controller_user
        )
        gangs = consistency_policy_spec(pod_rules("CREATE"), SYNCED_WORKLOAD)
        pods = pod_policy_spec(args.kai_namespace, require_seccomp=args.default_seccomp)
        labels = reserved_label_policy_spec(args.reserved_labels)
        params = self._gpu_memory(name, args.gpus, child)
        self.ready = [
            self._policy(
                f"{name}-pods",
                POD_POLICY,
                pods,
                validating=True,
                opts=child.merge(pulumi.ResourceOptions(depends_on=[params])),
                binding_with=pod_binding_spec(),
            ),
            self._policy(f"{name}-gpu-configmaps", CONFIGMAP_POLICY, configmaps, validating=True, opts=child),
            self._policy(f"{name}-services", SERVICE_POLICY, service_policy_spec(), validating=True, opts=child),
            self._policy(f"{name}-reserved-labels", LABEL_POLICY, labels, validating=True, opts=child),
            self._policy(f"{name}-podgroups", PODGROUP_POLICY, podgroups, validating=True, opts=child),
        ]
        # Not in `ready`: tenants start before KAI, and this policy only once KAI serves PodGroups.
        self._policy(
            f"{name}-gang-consistency",
            CONSISTENCY_POLICY,
            gangs,
            validating=True,
            opts=child.merge(pulumi.ResourceOptions(depends_on=list(args.pod_groups_served))),
            binding_with=consistency_binding(TENANT_NAMESPACES),
        )
        if args.settings.admission == "mutate":
            pinning = pinning_policy_spec()
            naming = gang_name_policy_spec(pod_rules("CREATE"), SYNCED_WORKLOAD)
            self.ready += [
                self._policy(f"{name}-pin-queue", POD_POLICY, pinning, validating=False, opts=child),
                self._policy(f"{name}-gang-names", GANG_POLICY, naming, validating=False, opts=child),
                self._policy(
                    f"{name}-non-preemptible",
                    NON_PREEMPTIBLE_POLICY,
                    non_preemptible_policy_spec(),
                    validating=False,
                    opts=child,
                    binding_with=non_preemptible_binding(),
                ),
            ]
            if args.default_seccomp:
                seccomp = seccomp_default_policy_spec()
                self.ready.append(
                    self._policy(f"{name}-seccomp-default", SECCOMP_POLICY, seccomp, validating=False, opts=child)
                )
        self.register_outputs({})

    @staticmethod
    def _gpu_memory(
        name: str, gpus: pulumi.Input[Mapping[str, Mapping[str, Any]] | None], opts: pulumi.ResourceOptions
    ) -> pulumi.Resource:
        """The pod policy's params, there before its binding; the largest GPU's memory patched on once the GPU
        gate has read the nodes. One pair for every team: a team waits for neither the GPUs nor a patch of its
        own. The ConfigMap never sets the key, so the patch alone owns it (a later apply of the ConfigMap cannot
        take it back); until it lands, the policy refuses gpu-memory pods, which KAI would not place yet."""
        metadata = {**GPU_MEMORY_PARAMS, "labels": dict(MANAGED_BY)}
        params: pulumi.Resource = k8s.core.v1.ConfigMap(f"{name}-gpu-memory", metadata=metadata, opts=opts)
        k8s.core.v1.ConfigMapPatch(
            f"{name}-gpu-memory",
            metadata={**GPU_MEMORY_PARAMS, "annotations": {"pulumi.com/patchForce": "true"}},
            data={
                LARGEST_GPU_MEMORY_KEY: pulumi.Output.from_input(gpus).apply(
                    lambda found: str(largest_gpu_memory_mib(found))
                )
            },
            opts=opts.merge(pulumi.ResourceOptions(depends_on=[params])),
        )
        return params

    @staticmethod
    def _policy(
        resource_name: str,
        policy_name: str,
        spec: dict[str, Any],
        *,
        validating: bool,
        opts: pulumi.ResourceOptions,
        binding_with: dict[str, Any] | None = None,
    ) -> pulumi.Resource:
        """The policy and its binding (`binding_with`, or the plain one); the binding is what tenants wait for."""
        api = k8s.admissionregistration.v1
        if validating:
            policy_type, binding_type = api.ValidatingAdmissionPolicy, api.ValidatingAdmissionPolicyBinding
        else:
            policy_type, binding_type = api.MutatingAdmissionPolicy, api.MutatingAdmissionPolicyBinding
        metadata = policy_metadata(policy_name)
        policy = policy_type(resource_name, metadata=metadata, spec=spec, opts=opts)
        binding: pulumi.Resource = binding_type(
            resource_name,
            metadata=metadata,
            spec=binding_with or binding_spec(policy_name, validating=validating),
            opts=opts.merge(pulumi.ResourceOptions(depends_on=[policy])),
        )
        return binding

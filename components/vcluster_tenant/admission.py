"""TenantAdmission: the host-side admission policies every tenant's pods pass, bound to all tenant namespaces."""

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.vcluster_tenant.policies import (
    CONFIGMAP_POLICY,
    POD_POLICY,
    binding_spec,
    gpu_configmap_policy_spec,
    pinning_policy_spec,
    pod_policy_spec,
    policy_metadata,
)
from config.vcluster_tenant.tenants import VClusterConfig


@dataclass(frozen=True)
class TenantAdmissionArgs:
    settings: VClusterConfig
    kai_namespace: str
    """Where KAI's binder runs: only it may write a GPU fraction's ConfigMaps."""


class TenantAdmission(pulumi.ComponentResource):
    ready: list[pulumi.Resource]
    """The bindings: a tenant's vCluster waits for them, so no synced pod ever escapes the policies."""

    def __init__(self, name: str, args: TenantAdmissionArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-tenancy:index:TenantAdmission", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        configmaps = gpu_configmap_policy_spec(args.kai_namespace)
        self.ready = [
            self._policy(f"{name}-pods", POD_POLICY, pod_policy_spec(args.kai_namespace), validating=True, opts=child),
            self._policy(f"{name}-gpu-configmaps", CONFIGMAP_POLICY, configmaps, validating=True, opts=child),
        ]
        if args.settings.admission == "mutate":
            pinning = pinning_policy_spec()
            self.ready.append(self._policy(f"{name}-pin-queue", POD_POLICY, pinning, validating=False, opts=child))
        self.register_outputs({})

    @staticmethod
    def _policy(
        resource_name: str, policy_name: str, spec: dict[str, Any], *, validating: bool, opts: pulumi.ResourceOptions
    ) -> pulumi.Resource:
        """The policy and its binding; the binding is what tenants wait for."""
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
            spec=binding_spec(policy_name, validating=validating),
            opts=opts.merge(pulumi.ResourceOptions(depends_on=[policy])),
        )
        return binding

"""VClusterTenant: one team's own Kubernetes API on the shared GPU nodes, fenced into its KAI queue.

The order matters: the queue policies exist before the vCluster, so no synced
pod ever escapes them; the kubeconfig is read only after a gate has seen the
control plane publish it; add-ons go in through the tenant's own API server.
"""

import base64
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.gate_job import GateAccess, fingerprint, gate_job, gate_pod, script_container
from components.host_scripts import SCRIPTS_DIR
from components.labels import MANAGED_BY, object_name
from components.queue_policies import (
    binding_spec,
    mutating_policy_spec,
    policy_metadata,
    validating_policy_spec,
)
from components.vcluster_values import VCLUSTER_CHART, kubeconfig_secret, tenant_endpoint, vcluster_values
from config.tenants import AddonConfig, TenantConfig, VClusterConfig

READY_SCRIPT = "vcluster-ready.sh"
KUBECTL_IMAGE = "registry.k8s.io/kubectl"
HELM_TIMEOUT_SECONDS = 600


@dataclass(frozen=True)
class VClusterTenantArgs:
    tenant: TenantConfig
    node_port: int
    settings: VClusterConfig
    version: str
    """vCluster chart version, e.g. 0.35.1."""
    kubectl_version: str
    host_address: pulumi.Input[str]
    """Where teams reach the host: the API endpoint is https://<host_address>:<node_port>."""
    provider: k8s.Provider
    """The host cluster's provider."""
    queue: pulumi.Resource
    """The tenant's KAI Queue: the policies that pin pods to it come after it."""
    depends_on: Sequence[pulumi.Resource] = ()
    """Gates that must pass first, e.g. the GPU gate."""


class VClusterTenant(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]
    """kubeconfig of the tenant's vCluster, for `kubectl --kubeconfig` from anywhere (secret)."""
    endpoint: pulumi.Output[str]
    """URL of the tenant's API server."""
    namespace: pulumi.Output[str]
    """Host namespace holding the vCluster and every pod it syncs."""
    provider: k8s.Provider
    """Provider that talks to the tenant's own API server (for add-ons)."""

    def __init__(self, name: str, args: VClusterTenantArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-tenancy:index:VClusterTenant", name, None, opts)
        tenant = args.tenant
        host = pulumi.ResourceOptions(parent=self, provider=args.provider)

        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={
                "name": f"vcluster-{tenant.name}",
                "labels": {**MANAGED_BY, "gpu-tenancy/tenant": tenant.name, "gpu-tenancy/queue": tenant.queue},
            },
            opts=host.merge(pulumi.ResourceOptions(depends_on=list(args.depends_on))),
        )
        self.namespace = object_name(namespace)
        policies = self._queue_policies(name, args)
        values = pulumi.Output.from_input(args.host_address).apply(
            lambda address: vcluster_values(tenant, node_port=args.node_port, address=address, settings=args.settings)
        )
        release = k8s.helm.v3.Release(
            f"{name}-vcluster",
            name=tenant.name,
            chart=VCLUSTER_CHART,
            repository_opts={"repo": args.settings.repo},
            version=args.version,
            namespace=self.namespace,
            values=values,
            timeout=HELM_TIMEOUT_SECONDS,
            opts=host.merge(pulumi.ResourceOptions(depends_on=policies)),
        )
        ready = self._kubeconfig_gate(name, args, release)
        # Read only once the gate has completed: its id is unknown until then, so preview never reads early.
        secret = k8s.core.v1.Secret.get(
            f"{name}-kubeconfig",
            pulumi.Output.all(self.namespace, ready.id).apply(
                lambda parts: f"{parts[0]}/{kubeconfig_secret(tenant.name)}"
            ),
            opts=host,
        )
        self.kubeconfig = pulumi.Output.secret(
            secret.data.apply(lambda data: base64.b64decode(data["config"]).decode())
        )
        self.endpoint = pulumi.Output.from_input(args.host_address).apply(
            lambda address: tenant_endpoint(address, args.node_port)
        )
        self.provider = k8s.Provider(
            f"{name}-vcluster", kubeconfig=self.kubeconfig, opts=pulumi.ResourceOptions(parent=self)
        )
        for addon in tenant.addons:
            self._addon(name, addon)
        self.register_outputs({"kubeconfig": self.kubeconfig, "endpoint": self.endpoint, "namespace": self.namespace})

    def _queue_policies(self, name: str, args: VClusterTenantArgs) -> list[pulumi.Resource]:
        """Validation always; mutation too where the cluster has MutatingAdmissionPolicy (1.36+)."""
        tenant = args.tenant
        namespace = f"vcluster-{tenant.name}"
        opts = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[args.queue])
        policy_name = f"gpu-tenancy-{tenant.name}-queue"
        validating = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{name}-validate-queue",
            metadata=policy_metadata(policy_name, tenant.name),
            spec=validating_policy_spec(tenant.name, tenant.queue),
            opts=opts,
        )
        bindings: list[pulumi.Resource] = [
            k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
                f"{name}-validate-queue",
                metadata=policy_metadata(policy_name, tenant.name),
                spec=binding_spec(policy_name, namespace, validating=True),
                opts=opts.merge(pulumi.ResourceOptions(depends_on=[validating])),
            )
        ]
        if args.settings.admission == "mutate":
            mutating = k8s.admissionregistration.v1.MutatingAdmissionPolicy(
                f"{name}-pin-queue",
                metadata=policy_metadata(policy_name, tenant.name),
                spec=mutating_policy_spec(tenant.queue),
                opts=opts,
            )
            bindings.append(
                k8s.admissionregistration.v1.MutatingAdmissionPolicyBinding(
                    f"{name}-pin-queue",
                    metadata=policy_metadata(policy_name, tenant.name),
                    spec=binding_spec(policy_name, namespace, validating=False),
                    opts=opts.merge(pulumi.ResourceOptions(depends_on=[mutating])),
                )
            )
        return bindings

    def _kubeconfig_gate(self, name: str, args: VClusterTenantArgs, release: k8s.helm.v3.Release) -> k8s.batch.v1.Job:
        host = pulumi.ResourceOptions(parent=self, provider=args.provider)
        secret = kubeconfig_secret(args.tenant.name)
        timeout = args.settings.ready_timeout_seconds
        access = GateAccess(
            f"{name}-ready",
            namespace=self.namespace,
            files={READY_SCRIPT: (SCRIPTS_DIR / READY_SCRIPT).read_text()},
            namespace_rules=[
                {
                    "apiGroups": [""],
                    "resources": ["secrets"],
                    "resourceNames": [secret],
                    "verbs": ["get", "list", "watch"],
                }
            ],
            opts=host,
        )
        pod = gate_pod(
            service_account=access.service_account,
            config_map=access.config_map,
            containers=[
                script_container(
                    name="vcluster-ready",
                    image=f"{KUBECTL_IMAGE}:{args.kubectl_version}",
                    script=READY_SCRIPT,
                    env=[{"name": "SECRET", "value": secret}, {"name": "TIMEOUT_SECONDS", "value": str(timeout)}],
                )
            ],
        )
        return gate_job(
            f"{name}-ready",
            namespace=self.namespace,
            pod=pod,
            # A new chart version or new values restart the control plane: wait for it again.
            fingerprint_annotation=(
                "gpu-tenancy/vcluster-release",
                fingerprint(
                    args.settings.repo,
                    args.version,
                    args.tenant.values,
                    args.node_port,
                    args.settings.persistence_size,
                    args.settings.storage_class,
                ),
            ),
            timeout_seconds=timeout,
            backoff_limit=1,
            opts=host.merge(pulumi.ResourceOptions(depends_on=[release, *access.bindings])),
        )

    def _addon(self, name: str, addon: AddonConfig) -> None:
        """Installed through the tenant's API server: the team's CRDs never touch the host or other teams."""
        inside = pulumi.ResourceOptions(parent=self, provider=self.provider)
        if addon.chart is not None:
            chart = addon.chart
            oci = chart.repo.startswith("oci://")
            k8s.helm.v3.Release(
                f"{name}-addon-{addon.name}",
                name=addon.name,
                chart=f"{chart.repo.rstrip('/')}/{chart.chart}" if oci else chart.chart,
                repository_opts=None if oci else {"repo": chart.repo},
                version=chart.version,
                namespace=addon.namespace or addon.name,
                create_namespace=True,
                values=chart.values,
                timeout=HELM_TIMEOUT_SECONDS,
                opts=inside,
            )
        else:
            k8s.yaml.v2.ConfigGroup(f"{name}-addon-{addon.name}", objs=addon.manifests, opts=inside)

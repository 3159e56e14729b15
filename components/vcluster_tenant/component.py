"""VClusterTenant: one team's own Kubernetes API on the shared GPU nodes, fenced in.

The order matters: the tenant admission policies exist before the vCluster, so no
synced pod ever escapes them; the kubeconfig is read only after a gate has seen the
control plane publish it; add-ons go in through the tenant's own API server.
"""

import base64
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.shared.gate import GATE_TYPE, GateArgs, gate_job
from components.shared.gate_pod import GateStep
from components.shared.helm import ReleaseSpec, helm_release
from components.shared.kubeconfigs import with_server
from components.shared.labels import MANAGED_BY, PART_OF, object_name
from components.shared.ownership import owned
from components.shared.providers import MUTABLE_OBJECTS
from components.vcluster_tenant.endpoints import Endpoint, sni_route_spec, tenant_endpoint
from components.vcluster_tenant.kai_rules import namespace_annotations
from components.vcluster_tenant.members import (
    ACCOUNTS_RELEASE,
    ACCOUNTS_RELEASE_NAMESPACE,
    OBJECTS_CHART,
    OBJECTS_CHART_VERSION,
    TOKEN_SECRET_TYPE,
    accounts,
    member_kubeconfig,
    member_token,
    token_secret,
)
from components.vcluster_tenant.network import (
    WORKLOADS_POLICY,
    blocked_ranges,
    control_plane_manifest,
    workload_policy,
)
from components.vcluster_tenant.oidc import CA_KEY as OIDC_CA_KEY
from components.vcluster_tenant.oidc import ca_configmap as oidc_ca_configmap
from components.vcluster_tenant.oidc import groups_binding, sign_in_kubeconfig
from components.vcluster_tenant.policies import NON_PREEMPTIBLE
from components.vcluster_tenant.values import (
    PERSISTENCE_PATHS,
    SECURITY_PATHS,
    control_plane_account,
    kubeconfig_secret,
    vcluster_values,
)
from config.names import PREEMPTIBILITY_NAMESPACE_LABEL, QUEUE_NAMESPACE_LABEL, TENANT_LABEL, TENANT_NAMESPACE_PREFIX
from config.upstream import KUBECONFIG_SECRET_KEY, TRAEFIK_API_VERSION, VCLUSTER_CHART
from config.vcluster_tenant.node_ports import TenantPorts
from config.vcluster_tenant.tenants import AddonConfig, TenantConfig, VClusterConfig

POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"
# The namespace label Pod Security admission enforces: kubernetes/pod-security-admission api/constants.go
# (EnforceLevelLabel). Without a version label it enforces the cluster's own version of the level.


@dataclass(frozen=True)
class VClusterTenantArgs:
    tenant: TenantConfig
    ports: pulumi.Input[TenantPorts | None]
    """The tenant's node ports (expose: nodePort); None with expose sni."""
    settings: VClusterConfig
    version: str
    """vCluster chart version, e.g. 0.35.1."""
    sized_gpus: int
    """The whole GPUs its quota holds a GPU's share of the machines for (StackConfig.sized_gpus)."""
    kubectl_version: str
    host_address: pulumi.Input[str]
    """Where teams reach the host: with expose nodePort the API is https://<host_address>:<https port>."""
    api_endpoints: pulumi.Input[Sequence[tuple[str, int]]]
    """(address, port) of each endpoint of the host's `kubernetes` Service: all the control plane may reach of the
    host."""
    machine_addresses: pulumi.Input[Sequence[str]]
    """Every machine of the cluster this stack knows: the tenant's workloads reach none of them."""
    host_cluster_identifier: str
    """The host provider's identity; the tenant's provider derives its own from it."""
    control_plane_node: pulumi.Input[str] | None
    """The node the vCluster's control plane must run on (the one holding its volume); None: anywhere."""
    secret_values: bool
    """`tenants` holds a secret (in a tenant's values or an add-on): the tenant's Helm values and add-on manifests
    are Pulumi secrets."""
    waits_for: Sequence[pulumi.Resource]
    """All a tenant waits for: the tenant admission policies' bindings (TenantAdmission.ready), and the node-port
    memory written (NodePorts.remembered), so no Service takes a port the memory does not know.

    Not the GPU stack, KAI or the tenant's queue: a pod that arrives first waits for KAI
    to schedule it, and the host's policies hold whether KAI runs yet or not."""


class VClusterTenant(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]
    """kubeconfig of the tenant's vCluster, for `kubectl --kubeconfig` from anywhere (secret)."""
    endpoint: pulumi.Output[str]
    """URL of the tenant's API server."""
    namespace: pulumi.Output[str]
    """Host namespace holding the vCluster and every pod it syncs."""
    provider: k8s.Provider | None
    """Provider that talks to the tenant's own API server; only a tenant with add-ons, members or groups has one."""
    member_kubeconfigs: pulumi.Output[dict[str, str]]
    """Member -> a kubeconfig of that member's own (members.py), secret; empty without members."""
    member_tokens: pulumi.Output[dict[str, str]]
    """Member -> their token (secret): what each member's other credentials are derived from (the team views')."""
    sign_in_kubeconfig: pulumi.Output[str] | None
    """With vcluster.oidc: the kubeconfig every member signs in through the identity provider with (oidc.py)."""

    def __init__(self, name: str, args: VClusterTenantArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-tenancy:index:VClusterTenant", name, None, owned(opts))
        tenant = args.tenant
        self._tenant = tenant.name
        # The host's provider comes with this component's options; add-ons name the tenant's own.
        host = pulumi.ResourceOptions(parent=self)
        namespace_name = f"{TENANT_NAMESPACE_PREFIX}{tenant.name}"
        timeout = args.settings.ready_timeout_seconds

        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={
                "name": namespace_name,
                "labels": {
                    **MANAGED_BY,
                    # The tenant admission policies read the tenant and its queue from here.
                    TENANT_LABEL: tenant.name,
                    QUEUE_NAMESPACE_LABEL: tenant.queue,
                    POD_SECURITY_ENFORCE: args.settings.pod_security_for(tenant),
                    **({PREEMPTIBILITY_NAMESPACE_LABEL: NON_PREEMPTIBLE} if tenant.non_preemptible else {}),
                },
                # What the tenant admission policy reads of this team: its priority classes and fraction limits.
                "annotations": namespace_annotations(args.settings.gpu_sharing_for(tenant)),
            },
            opts=host.merge(
                pulumi.ResourceOptions(
                    # The level is chosen with the control plane's user, at creation (see SECURITY_PATHS).
                    ignore_changes=[f'metadata.labels["{POD_SECURITY_ENFORCE}"]'],
                )
            ),
        )
        self.namespace = object_name(namespace)
        endpoint = pulumi.Output.all(args.host_address, args.ports).apply(
            lambda parts: tenant_endpoint(tenant, args.settings, host_address=parts[0], ports=parts[1])
        )
        fence_of_control_plane = pulumi.Output.from_input(args.api_endpoints).apply(
            lambda api: control_plane_manifest(tenant.name, namespace_name, api, args.settings.oidc, PART_OF)
        )
        values = pulumi.Output.all(endpoint, args.control_plane_node, fence_of_control_plane).apply(
            lambda parts: vcluster_values(
                tenant,
                endpoint=parts[0],
                settings=args.settings,
                version=args.version,
                sized_gpus=args.sized_gpus,
                control_plane_fence=parts[2],
                control_plane_node=parts[1],
            )
        )
        fence = self._network_policies(name, args, host)
        oidc = args.settings.oidc
        mounted: list[pulumi.Resource] = []
        if oidc is not None and oidc.certificate_authority:
            # The provider's CA, mounted into the control plane (oidc.py), there before the control plane starts.
            ca = k8s.core.v1.ConfigMap(
                f"{name}-oidc-ca",
                metadata={**oidc_ca_configmap(), "namespace": self.namespace},
                data={OIDC_CA_KEY: oidc.certificate_authority},
                opts=host,
            )
            mounted.append(ca)
        release = helm_release(
            f"{name}-vcluster",
            ReleaseSpec(name=tenant.name, chart=VCLUSTER_CHART, repo=args.settings.repo, version=args.version),
            values=values,
            namespace=self.namespace,
            secret_values=args.secret_values,
            # Its name and namespace are the team's, fixed: it is replaced only on a new cluster, and then the old
            # team keeps running until the new one has passed its gate (the old release goes last).
            free_name_first=False,
            opts=host.merge(
                pulumi.ResourceOptions(
                    # No synced pod, and no control plane, ever runs outside the fence.
                    depends_on=[*args.waits_for, *fence, *mounted],
                    # Settings that cannot change on a running control plane are kept as they were created.
                    ignore_changes=[".".join(("values", *path)) for path in (*PERSISTENCE_PATHS, *SECURITY_PATHS)],
                )
            ),
        )
        secret_name = kubeconfig_secret(tenant.name)
        secret_step = ("wait", "--for=create", f"secret/{secret_name}", "-n", namespace_name, f"--timeout={timeout}s")
        # Helm's wait ends when the control plane is Ready; it writes its kubeconfig Secret afterwards
        # (config/upstream.py, vCluster), so a gate waits for the Secret. The credentials in it last as
        # long as the control plane's volume, so the gate runs once per tenant. It runs as the control
        # plane's own ServiceAccount, whose Role already reads the namespace's Secrets.
        # The Job alone, a child of this component: it was once a Gate component's, and the alias keeps it.
        gate_name = f"{name}-ready"
        was_under = pulumi.create_urn(gate_name, GATE_TYPE, parent=self)
        gate = gate_job(
            gate_name,
            GateArgs(
                object_name="kubeconfig-gate",
                namespace=self.namespace,
                steps=(GateStep("kubeconfig-written", secret_step),),
                service_account=control_plane_account(tenant.name),
                kubectl_version=args.kubectl_version,
                timeout_seconds=timeout,
                after=[release],
            ),
            (),
            host.merge(pulumi.ResourceOptions(aliases=[pulumi.Alias(parent=was_under)])),
        )
        # Read only once the gate has completed: its id is unknown until then, so preview never reads early.
        secret = k8s.core.v1.Secret.get(
            f"{name}-kubeconfig",
            pulumi.Output.all(self.namespace, gate.id).apply(lambda parts: f"{parts[0]}/{secret_name}"),
            opts=host,
        )
        self.endpoint = endpoint.apply(lambda e: e.url)
        if args.settings.expose == "sni":
            self._route(name, endpoint, release, host)
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(secret.data, self.endpoint).apply(
                lambda parts: with_server(base64.b64decode(parts[0][KUBECONFIG_SECRET_KEY]).decode(), parts[1])
            )
        )
        self.provider = None
        self.member_kubeconfigs = pulumi.Output.secret({})
        self.member_tokens = pulumi.Output.secret({})
        self.sign_in_kubeconfig = None
        if tenant.addons or tenant.members or tenant.groups:
            self.provider = self._inside(name, args, gate)
            for addon in tenant.addons:
                self._addon(name, addon, self.provider, secret=args.secret_values)
            if tenant.members:
                self.member_tokens = self._members(name, tenant.members, self.provider)
                self.member_kubeconfigs = pulumi.Output.secret(
                    pulumi.Output.all(self.kubeconfig, self.member_tokens).apply(self._member_kubeconfigs)
                )
        if oidc is not None:
            if tenant.groups:
                inside = pulumi.ResourceOptions(parent=self, provider=self.provider)
                k8s.rbac.v1.ClusterRoleBinding(f"{name}-oidc-groups", **groups_binding(tenant.groups), opts=inside)
            # Only the team's endpoint and CA, which are no secret: one file for every member to sign in with.
            self.sign_in_kubeconfig = pulumi.Output.unsecret(
                self.kubeconfig.apply(functools.partial(sign_in_kubeconfig, f"{tenant.name}-oidc", oidc))
            )
        self.register_outputs(
            {
                "kubeconfig": self.kubeconfig,
                "endpoint": self.endpoint,
                "namespace": self.namespace,
                "member_kubeconfigs": self.member_kubeconfigs,
                "member_tokens": self.member_tokens,
                "sign_in_kubeconfig": self.sign_in_kubeconfig,
            }
        )

    def _members(self, name: str, members: list[str], provider: k8s.Provider) -> pulumi.Output[dict[str, str]]:
        """The members' accounts inside the vCluster, one release for the team, and a registered token Secret each
        (members.py); member -> their token, secret."""
        inside = pulumi.ResourceOptions(parent=self, provider=provider)
        release = helm_release(
            f"{name}-members",
            ReleaseSpec(
                name=ACCOUNTS_RELEASE,
                chart=OBJECTS_CHART,
                version=OBJECTS_CHART_VERSION,
                values={"objects": accounts(members)},
            ),
            namespace=ACCOUNTS_RELEASE_NAMESPACE,
            opts=inside,
        )
        after = inside.merge(pulumi.ResourceOptions(depends_on=[release]))
        tokens = {
            member: k8s.core.v1.Secret(
                f"{name}-member-{member}-token", metadata=token_secret(member), type=TOKEN_SECRET_TYPE, opts=after
            ).data.apply(member_token)
            for member in members
        }
        return pulumi.Output.secret(pulumi.Output.all(**tokens))

    def _member_kubeconfigs(self, parts: Sequence[Any]) -> dict[str, str]:
        """`parts`: the team kubeconfig and member -> token."""
        team_kubeconfig, tokens = parts
        return {
            member: member_kubeconfig(f"{self._tenant}-{member}", team_kubeconfig, token)
            for member, token in tokens.items()
        }

    def _network_policies(
        self, name: str, args: VClusterTenantArgs, opts: pulumi.ResourceOptions
    ) -> list[pulumi.Resource]:
        """The tenant's workloads, fenced (network.py); updated in place when a machine comes or goes, without
        touching the vCluster. The control plane's policy goes with its release (control_plane_manifest)."""
        tenant = self._tenant
        blocked = pulumi.Output.from_input(args.machine_addresses).apply(
            lambda addresses: blocked_ranges(addresses, args.settings.blocked_egress)
        )
        return [
            k8s.networking.v1.NetworkPolicy(
                f"{name}-workloads",
                metadata={"name": WORKLOADS_POLICY, "namespace": self.namespace, "labels": MANAGED_BY},
                spec=blocked.apply(lambda ranges: workload_policy(tenant, ranges)),
                opts=opts,
            )
        ]

    def _inside(self, name: str, args: VClusterTenantArgs, gate: pulumi.Resource) -> k8s.Provider:
        """The provider for the tenant's own API server, created once the control plane has written its kubeconfig."""
        return k8s.Provider(
            f"{name}-vcluster",
            kubeconfig=self.kubeconfig,
            # Stable from config alone: the kubeconfig is unknown in a preview of a new tenant or an endpoint
            # change, and without an identity every add-on would be planned as a replacement.
            cluster_identifier=f"{args.host_cluster_identifier}/vcluster/{self._tenant}",
            **MUTABLE_OBJECTS,
            # A read records no dependency on what its id came from, so the chain to the control plane is
            # stated here: destroy then deletes every add-on while its API server still serves.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[gate]),
        )

    def _route(
        self, name: str, endpoint: pulumi.Output[Endpoint], release: pulumi.Resource, opts: pulumi.ResourceOptions
    ) -> None:
        """TLS passthrough from the shared port 443 to the tenant's API, chosen by SNI: the control plane
        presents its own certificate, which names the hostname (see config/upstream.py, Traefik)."""
        k8s.apiextensions.CustomResource(
            f"{name}-route",
            api_version=TRAEFIK_API_VERSION,
            kind="IngressRouteTCP",
            metadata={"name": "vcluster-api", "namespace": self.namespace, "labels": MANAGED_BY},
            spec=endpoint.apply(lambda e: sni_route_spec(e.name, service=self._tenant)),
            opts=opts.merge(pulumi.ResourceOptions(depends_on=[release])),
        )

    def _addon(self, name: str, addon: AddonConfig, provider: k8s.Provider, *, secret: bool) -> None:
        """Installed through the tenant's API server: the team's CRDs never touch the host or other teams."""
        inside = pulumi.ResourceOptions(parent=self, provider=provider)
        if addon.chart is not None:
            chart = addon.chart
            oci = chart.repo.startswith("oci://")
            helm_release(
                f"{name}-addon-{addon.name}",
                ReleaseSpec(
                    name=addon.name,
                    chart=f"{chart.repo.rstrip('/')}/{chart.chart}" if oci else chart.chart,
                    repo=None if oci else chart.repo,
                    version=chart.version,
                    values=chart.values,
                ),
                namespace=addon.namespace or addon.name,
                create_namespace=True,
                secret_values=secret,
                opts=inside,
            )
        else:
            objs: pulumi.Input[Any] = pulumi.Output.secret(addon.manifests) if secret else addon.manifests
            k8s.yaml.v2.ConfigGroup(f"{name}-addon-{addon.name}", objs=objs, opts=inside)

"""gpu-tenancy: a GPU host cluster, KAI Scheduler, its queue hierarchy and one vCluster per team."""

import gc
from functools import partial

import pulumi

from components.gang_controller import GANG_CONTROLLER_USER, GangController, GangControllerArgs
from components.gpu_host import GpuHost, GpuHostArgs, installed_operator_runs_cdi
from components.kai_scheduler import KaiScheduler, KaiSchedulerArgs
from components.observability import Observability, ObservabilityArgs, TeamViewsSignIn
from components.queue_hierarchy import QueueHierarchy, QueueHierarchyArgs
from components.vcluster_tenant import (
    NODE_PORTS_OUTPUT,
    NodePortMemory,
    NodePortMemoryArgs,
    TenantAdmission,
    TenantAdmissionArgs,
    VClusterTenant,
    VClusterTenantArgs,
)
from config.names import TENANT_NAMESPACE_PREFIX
from config.pulumi_stack import load_stack_inputs
from config.upstream import MICROK8S_INGRESS_ADDON
from config.vcluster_tenant.node_ports import PortAssignment
from fairshare.plan import plan, pool_capacity
from fairshare.table import render

# The SDK keeps every resource's inputs, outputs and futures until the program ends: some 700 MB at 1,000 teams,
# which each full collection walks again (a third of the evaluation there, `benchmarks.scale`). Collect the young
# generation as often as ever, the older ones ten times less often; cyclic garbage still goes (memory: the same).
gc.set_threshold(20_000, 10, 100)

inputs = load_stack_inputs()
settings = inputs.settings

# The effect of the quotas, next to the resource diff in `pulumi preview`.
capacity = pool_capacity(settings.queues)
if capacity is None:
    pulumi.log.info("No fair-share plan: a root queue's GPU quota is unlimited; see `python -m fairshare --capacity`.")
else:
    queue_plan = plan(settings.queues, capacity)
    pulumi.log.info(f"Fair-share plan (KAI's division of the GPU pool):\n{render(queue_plan)}")
    pulumi.export("queuePlan", queue_plan.to_data())

# Members sign in to the team views through the tenants' identity provider (config makes sure it is set).
sign_in, oidc = settings.observability.team_views_sign_in, settings.vcluster.oidc
team_sign_in = (
    TeamViewsSignIn.of(sign_in, oidc, {t.name: t.groups for t in settings.tenants})
    if sign_in is not None and oidc is not None
    else None
)

host = GpuHost(
    "host",
    GpuHostArgs(
        host=settings.host,
        versions=settings.versions,
        gpu_operator=settings.gpu_operator,
        gpu_gate=settings.gpu_gate,
        kubeconfig=inputs.secrets.get("kubeconfig"),
        ssh_private_key=inputs.secrets.get("sshPrivateKey"),
        # Tenants exposed by SNI are routed by MicroK8s' ingress add-on (Traefik) on the host's port 443.
        extra_addons=(MICROK8S_INGRESS_ADDON,) if settings.vcluster.expose == "sni" else (),
        secret_operator_values="gpuOperator" in inputs.secret_values,
    ),
)
# Everything else runs on the host cluster, through its provider (never the ambient kubeconfig).
on_host = pulumi.ResourceOptions(provider=host.provider)
kai = KaiScheduler(
    "kai",
    KaiSchedulerArgs(
        settings=settings.kai_scheduler,
        version=settings.versions.kai_scheduler,
        kubectl_version=settings.versions.kubectl,
        cdi_enabled=installed_operator_runs_cdi(settings.gpu_operator, microk8s=settings.bootstraps_host),
        depends_on=[host.ready],
        secret_values="kaiScheduler" in inputs.secret_values,
        fairness=settings.fairness,
        prometheus=settings.observability.prometheus_address,
    ),
    opts=on_host,
)
queues = QueueHierarchy("queues", QueueHierarchyArgs(queues=settings.queues, kai_ready=kai.ready), opts=on_host)

# One set of policies fences every tenant's pods; each vCluster waits for it and for nothing of the
# GPU stack, so control planes start while the operator and KAI install (the gang-consistency policy alone
# waits for KAI's PodGroup API).
admission = (
    TenantAdmission(
        "tenant-admission",
        TenantAdmissionArgs(
            settings=settings.vcluster,
            kai_namespace=settings.kai_scheduler.namespace,
            gang_controller_user=GANG_CONTROLLER_USER,
            reserved_labels=settings.observability.grafana_labels,
            # A kubelet this stack bootstraps defaults to RuntimeDefault (host.kubelet); another may not.
            default_seccomp=not settings.bootstraps_host,
            gpus=host.gpu,
            pod_groups_served=[kai.ready],
        ),
        opts=on_host,
    ).ready
    if settings.tenants
    else []
)
# Node ports stay with their team from one `up` to the next (expose: nodePort), remembered on the host.
ports = NodePortMemory("node-ports", NodePortMemoryArgs(settings), opts=on_host)
tenants = {
    tenant.name: VClusterTenant(
        tenant.name,
        VClusterTenantArgs(
            tenant=tenant,
            ports=ports.assignment.apply(partial(PortAssignment.of, tenant=tenant.name)),
            settings=settings.vcluster,
            version=settings.vcluster_version(tenant),
            sized_gpus=settings.sized_gpus(tenant),
            kubectl_version=settings.versions.kubectl,
            host_address=host.address,
            api_endpoints=host.api_endpoints,
            machine_addresses=host.machine_addresses,
            host_cluster_identifier=host.cluster_identifier,
            control_plane_node=host.control_plane_node,
            secret_values="tenants" in inputs.secret_values,
            waits_for=[*admission, *ports.remembered],
        ),
        opts=on_host,
    )
    for tenant in settings.tenants
}
if tenants:
    # KAI's PodGroups for the gangs teams start, written only in the tenants' namespaces.
    GangController(
        "gangs",
        GangControllerArgs(kai_namespace=settings.kai_scheduler.namespace),
        opts=on_host,
    )

if settings.observability.enabled:
    observability = Observability(
        "observability",
        ObservabilityArgs(
            settings=settings.observability,
            version=settings.versions.kube_prometheus_stack,
            kai_namespace=kai.namespace,
            operator_namespace=None if settings.gpu_operator.mode == "skip" else settings.gpu_operator.namespace,
            gpus_ready=[host.ready],
            leaf_queues=settings.queue_tree.leaves,
            limits=settings.queue_limits,
            kubectl_version=settings.versions.kubectl,
            microk8s=settings.bootstraps_host,
            prometheus_node=host.control_plane_node,
            secret_values="observability" in inputs.secret_values,
            teams={tenant.name: f"{TENANT_NAMESPACE_PREFIX}{tenant.name}" for tenant in settings.tenants},
            team_limits={tenant.name: settings.queue_limits[tenant.queue] for tenant in settings.tenants},
            team_members={tenant.name: tenant.members for tenant in settings.tenants if tenant.members},
            team_member_tokens={t.name: tenants[t.name].member_tokens for t in settings.tenants if t.members},
            team_sign_in=team_sign_in,
            host_address=host.address,
            grafana_version=settings.versions.grafana,
            proxy_version=settings.versions.prom_label_proxy,
        ),
        opts=on_host,
    )
    pulumi.export("grafana", observability.grafana)
    pulumi.export("grafanaAdminPassword", observability.grafana_admin_password)
    if observability.team_views is not None:
        # Each team's login to its own view (docs/teams.md): hand each team only its own entry.
        pulumi.export("teamViews", observability.team_views.credentials)
        pulumi.export("memberTeamViews", observability.team_views.member_credentials)
        pulumi.export("teamViewsCaCertificate", observability.team_views.ca_certificate)

pulumi.export("hostKubeconfig", host.kubeconfig)
pulumi.export("hostAddress", host.address)
pulumi.export("gpu", host.gpu)
pulumi.export("kaiNamespace", kai.namespace)
pulumi.export("schedulerName", kai.scheduler_name)
pulumi.export("kaiReleaseStatus", kai.release_status)
pulumi.export("queues", queues.queue_names)
pulumi.export("leafQueues", queues.leaf_names)
pulumi.export("tenantKubeconfigs", pulumi.Output.secret({name: t.kubeconfig for name, t in tenants.items()}))
pulumi.export("tenantEndpoints", {name: t.endpoint for name, t in tenants.items()})
pulumi.export(
    "memberKubeconfigs",
    pulumi.Output.secret({t.name: tenants[t.name].member_kubeconfigs for t in settings.tenants if t.members}),
)
# With vcluster.oidc: one kubeconfig per team, holding no credential, that signs a member in at the provider.
pulumi.export(
    "signInKubeconfigs",
    {name: t.sign_in_kubeconfig for name, t in tenants.items() if t.sign_in_kubeconfig is not None},
)
pulumi.export(NODE_PORTS_OUTPUT, ports.assignment.apply(lambda assignment: assignment.to_data()))

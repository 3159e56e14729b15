"""A caller's options reach every child: the provider a component is given is the one its resources use.

Components take the Kubernetes provider through `opts` (`provider=` or `providers=`), as
Pulumi's component libraries do, so the same component can be pointed at another cluster
by its caller alone. Each component is built here on its own, against a provider of the
test's, and every Kubernetes resource under it must name that provider; the only other
provider allowed is a tenant's own, for what is installed inside its vCluster.
"""

from collections.abc import Callable

import pulumi
import pulumi_kubernetes as k8s
import pytest

from components.gang_controller import GANG_CONTROLLER_USER, GangController, GangControllerArgs
from components.kai_scheduler import KaiScheduler, KaiSchedulerArgs
from components.observability import Observability, ObservabilityArgs
from components.queue_hierarchy import QueueHierarchy, QueueHierarchyArgs
from components.vcluster_tenant import TenantAdmission, TenantAdmissionArgs, VClusterTenant, VClusterTenantArgs
from config.sources import load_settings
from config.stack import StackConfig
from config.vcluster_tenant.node_ports import TenantPorts
from harness import ProgramRun, dev_settings, run_pulumi

PROVIDER = "pulumi:providers:kubernetes"


def _settings() -> StackConfig:
    config = dev_settings()
    config["tenants"][0]["addons"] = [
        {"name": "kuberay", "chart": {"repo": "https://example.com/charts", "chart": "kuberay", "version": "1.4.2"}}
    ]
    return load_settings(config)


def _kai(settings: StackConfig, opts: pulumi.ResourceOptions) -> None:
    args = KaiSchedulerArgs(settings.kai_scheduler, "v0.16.8", settings.versions.kubectl, cdi_enabled=True)
    KaiScheduler("kai", args, opts=opts)


def _queues(settings: StackConfig, opts: pulumi.ResourceOptions) -> None:
    kai_ready = k8s.core.v1.ConfigMap("kai-ready", opts=opts)
    QueueHierarchy("queues", QueueHierarchyArgs(settings.queues, kai_ready=kai_ready), opts=opts)


def _admission(settings: StackConfig, opts: pulumi.ResourceOptions) -> None:
    args = TenantAdmissionArgs(
        settings.vcluster,
        "kai-scheduler",
        GANG_CONTROLLER_USER,
        reserved_labels=settings.observability.grafana_labels,
        default_seccomp=True,
        gpus={"gpu-node-1": {"memoryMiB": 46068}},
    )
    TenantAdmission("tenant-admission", args, opts=opts)


def _tenant(settings: StackConfig, opts: pulumi.ResourceOptions) -> None:
    tenant = settings.tenants[0]
    args = VClusterTenantArgs(
        tenant=tenant,
        ports=TenantPorts(https=31000, kubelet=31001),
        settings=settings.vcluster,
        version="0.35.1",
        sized_gpus=settings.sized_gpus(tenant),
        kubectl_version=settings.versions.kubectl,
        host_address="203.0.113.10",
        api_endpoints=[("10.0.0.10", 16443)],
        machine_addresses=["203.0.113.10"],
        host_cluster_identifier="elsewhere",
        control_plane_node="gpu-node-1",
        secret_values=False,
        waits_for=[],
    )
    VClusterTenant(tenant.name, args, opts=opts)


def _observability(settings: StackConfig, opts: pulumi.ResourceOptions) -> None:
    args = ObservabilityArgs(
        settings=settings.observability,
        version="88.5.3",
        kai_namespace="kai-scheduler",
        operator_namespace="gpu-operator",
        gpus_ready=[],
        leaf_queues=settings.queue_tree.leaves,
        limits={},
        kubectl_version=settings.versions.kubectl,
    )
    Observability("observability", args, opts=opts)


def _gangs(settings: StackConfig, opts: pulumi.ResourceOptions) -> None:
    args = GangControllerArgs(settings.kai_scheduler.namespace)
    GangController("gangs", args, opts=opts)


Build = Callable[[StackConfig, pulumi.ResourceOptions], None]
COMPONENTS: dict[str, Build] = {
    "KaiScheduler": _kai,
    "QueueHierarchy": _queues,
    "TenantAdmission": _admission,
    "VClusterTenant": _tenant,
    "Observability": _observability,
    "GangController": _gangs,
}
OPTIONS: dict[str, Callable[[k8s.Provider], pulumi.ResourceOptions]] = {
    "provider": lambda provider: pulumi.ResourceOptions(provider=provider),
    "providers": lambda provider: pulumi.ResourceOptions(providers=[provider]),
}


def _built(build: Build, options: Callable[[k8s.Provider], pulumi.ResourceOptions]) -> ProgramRun:
    settings = _settings()

    def program() -> None:
        provider = k8s.Provider("elsewhere", kubeconfig="unused", cluster_identifier="elsewhere")
        build(settings, options(provider))

    return run_pulumi(program)


@pytest.mark.parametrize("options", OPTIONS.values(), ids=list(OPTIONS))
@pytest.mark.parametrize("build", COMPONENTS.values(), ids=list(COMPONENTS))
def test_every_kubernetes_resource_uses_the_provider_its_caller_gave(
    build: Build, options: Callable[[k8s.Provider], pulumi.ResourceOptions]
) -> None:
    run = _built(build, options)
    given = run.one(PROVIDER, "elsewhere")
    inside = [p.urn for p in run.of_type(PROVIDER) if p.name != "elsewhere"]
    resources = [r for r in run.registrations if r.type.startswith("kubernetes:")]
    assert resources
    wrong = [
        r.name
        for r in resources
        if not r.provider.startswith(given.urn) and r.provider.rsplit("::", 1)[0] not in inside
    ]
    assert not wrong, f"not on the caller's provider: {wrong}"
    # A tenant's own provider carries only what is installed inside its vCluster.
    for provider in inside:
        assert {r.name for r in resources if r.provider.startswith(provider)} == {"team-nlp-addon-kuberay"}

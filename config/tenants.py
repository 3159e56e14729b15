"""`gpu-tenancy:tenants`: one vCluster per team, each pinned to a leaf queue."""

from config.types import ConfigModel, QueueName, TenantName


class TenantConfig(ConfigModel):
    """One team. Its vCluster and admission policies arrive with the VClusterTenant component."""

    name: TenantName
    queue: QueueName

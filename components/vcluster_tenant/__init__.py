"""VClusterTenant: one team's own Kubernetes API on the shared GPU nodes, and the fence around every team.

Owns each tenant's namespace, vCluster release and values (endpoint, quota, limit
range, network policies, Pod Security), its kubeconfig gate and kubeconfig, its SNI
route and its add-ons; NodePortMemory, the node ports every tenant keeps from one `up` to the next;
and TenantAdmission, the one set of host admission policies every tenant's synced pods pass.
"""

from components.vcluster_tenant.admission import TenantAdmission, TenantAdmissionArgs
from components.vcluster_tenant.component import VClusterTenant, VClusterTenantArgs
from components.vcluster_tenant.node_ports import NODE_PORTS_OUTPUT, NodePortMemory, NodePortMemoryArgs

__all__ = [
    "NODE_PORTS_OUTPUT",
    "NodePortMemory",
    "NodePortMemoryArgs",
    "TenantAdmission",
    "TenantAdmissionArgs",
    "VClusterTenant",
    "VClusterTenantArgs",
]

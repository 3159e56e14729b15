"""GangController: KAI PodGroups for the gangs teams start in their vCluster.

Owns the controller program (`gangcontrol`, stdlib-only Python run from a ConfigMap in the
official python image), its namespace, ServiceAccount and RBAC (read cluster-wide; write
PodGroups and Events only in tenant namespaces), and its Deployment. The admission side
(the gang's pod-group-name, who may make PodGroups) is the tenants' fence, in
components/vcluster_tenant.
"""

from components.gang_controller.component import GANG_CONTROLLER_USER, GangController, GangControllerArgs

__all__ = ["GANG_CONTROLLER_USER", "GangController", "GangControllerArgs"]

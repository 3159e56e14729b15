"""Admission policies for what else a team's syncer writes to the host: Services, ConfigMaps and Secrets.

With the chart's defaults vCluster's syncer copies a Service's whole spec to the host on
create, and `externalIPs`, `type` and `loadBalancerIP` both ways on update; ConfigMaps and
Secrets a pod uses arrive with their labels and data (loft-sh/vcluster
pkg/controllers/resources/{services,configmaps}, chart/values.yaml sync.toHost @v0.35.1).
The host's kube-proxy and Grafana act on those fields in every namespace.
"""

from collections.abc import Sequence
from typing import Any

from components.vcluster_tenant.cel import cel_list, validation
from components.vcluster_tenant.policies import TENANT_NAMESPACES

SERVICE_POLICY = "gpu-tenancy-tenant-services"
LABEL_POLICY = "gpu-tenancy-tenant-reserved-labels"


def service_policy_spec() -> dict[str, Any]:
    """No Service in a tenant's namespace claims an address outside the cluster's service network.

    kube-proxy sends traffic for a Service's `externalIPs`, and for the addresses in its
    load balancer status, to that Service's endpoints on every node, whoever the traffic was
    for (CVE-2020-8554): the host's API, another team's node port, a DNS resolver. MicroK8s
    does not enable the DenyServiceExternalIPs admission plugin (canonical/microk8s
    microk8s-resources/default-args/kube-apiserver @v1.36), and an existing cluster may not.
    """
    rule = {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["services"], "operations": ["CREATE", "UPDATE"]}
    status = {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["services/status"], "operations": ["UPDATE"]}
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"namespaceSelector": TENANT_NAMESPACES, "resourceRules": [rule, status]},
        "validations": [
            validation(
                "!has(object.spec.externalIPs) || size(object.spec.externalIPs) == 0",
                "a tenant's Service may not set externalIPs: every node would send traffic for those addresses "
                "(the host's API, another team's endpoint, a DNS server) to it",
            ),
            validation(
                "!has(object.status) || !has(object.status.loadBalancer) || "
                "!has(object.status.loadBalancer.ingress) || size(object.status.loadBalancer.ingress) == 0",
                "a tenant's Service may not claim load balancer addresses: every node would send their traffic to it",
            ),
        ],
    }


def reserved_label_policy_spec(labels: Sequence[str]) -> dict[str, Any]:
    """No ConfigMap or Secret in a tenant's namespace carries a label the platform's Grafana loads by.

    Grafana's sidecars load every ConfigMap and Secret so labelled in the namespaces they
    search (`ALL` for dashboards in kube-prometheus-stack, and whatever an `existing`
    stack's Grafana searches): a team's dashboard of the platform's name would replace it,
    a data source could point Grafana elsewhere.
    """
    rule = {
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "resources": ["configmaps", "secrets"],
        "operations": ["CREATE", "UPDATE"],
    }
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"namespaceSelector": TENANT_NAMESPACES, "resourceRules": [rule]},
        "validations": [
            validation(
                f"!has(object.metadata.labels) || !object.metadata.labels.exists(k, k in {cel_list(labels)})",
                f"the labels {', '.join(labels)} are the platform's: Grafana loads what carries them",
            )
        ],
    }

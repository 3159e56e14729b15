"""How long a configured name may be, derived from every object name and label it ends up in.

A name that passes validation must be accepted by the API server everywhere it is
used; the longest allowed name is therefore the tightest of those uses. The limits
are Kubernetes' and Helm's; each is cited where it is defined upstream.
"""

from collections.abc import Mapping

DNS_LABEL_MAX = 63
LABEL_VALUE_MAX = 63
# kubernetes/apimachinery pkg/util/validation/validation.go (DNS1123LabelMaxLength, DNS1035LabelMaxLength)
# and pkg/api/validate/content/kube.go (LabelValueMaxLength) @v0.36.0.
HELM_RELEASE_NAME_MAX = 53
# helm/helm pkg/chartutil/validate_name.go (maxReleaseNameLen = 53) @v3.20.2.
STATEFULSET_REVISION_HASH_MAX = 10
# A StatefulSet's pods carry the label controller-revision-hash: <statefulset>-<FNV-32 in decimal>:
# kubernetes/kubernetes pkg/controller/history/controller_history.go; the failure is kubernetes/kubernetes#64023.

TENANT_NAMESPACE_PREFIX = "vcluster-"
TENANT_LABEL = "gpu-tenancy/tenant"
QUEUE_NAMESPACE_LABEL = "gpu-tenancy/queue"
"""Every tenant namespace carries its tenant and queue: admission policies, dashboards and cost read them."""
PREEMPTIBILITY_NAMESPACE_LABEL = "gpu-tenancy/preemptibility"
"""On the namespace of a tenant set nonPreemptible: its value is every pod's kai.scheduler/preemptibility."""
QUEUE_VIEW_CONFIGMAP = "gpu-tenancy-queue"
"""The team's view of its KAI queue, in its host namespace; its vCluster shows it as QUEUE_VIEW_IN_TENANT."""
QUEUE_VIEW_IN_TENANT = "gpu-tenancy/queue"
MEMBERS_NAMESPACE = "gpu-tenancy-users"
"""Inside a tenant's vCluster: one ServiceAccount per member, whose token is that member's credential. Until
members' accounts went into one Helm release per team it was `gpu-tenancy-members`, whose objects Pulumi
registered one by one: a new name, so the first `up` after cannot delete what the release just made."""

TENANT_NAME_USES: Mapping[str, int] = {
    # The vCluster chart names its StatefulSet and Services after the release and checks no length:
    # loft-sh/vcluster chart/templates/statefulset.yaml, service.yaml, headless-service.yaml @v0.35.1.
    "its vCluster's StatefulSet, whose pods carry the label controller-revision-hash: <name>-<10 characters>": (
        LABEL_VALUE_MAX - 1 - STATEFULSET_REVISION_HASH_MAX
    ),
    "its Helm release": HELM_RELEASE_NAME_MAX,
    "the Service <name>-headless": DNS_LABEL_MAX - len("-headless"),
    f"the namespace {TENANT_NAMESPACE_PREFIX}<name>": DNS_LABEL_MAX - len(TENANT_NAMESPACE_PREFIX),
    "the label vcluster.loft.sh/managed-by on every synced pod": LABEL_VALUE_MAX,
}
"""Where a tenant's name is used, and the longest name each use accepts."""

TENANT_NAME_MAX = min(TENANT_NAME_USES.values())


def tightest_use(uses: Mapping[str, int]) -> str:
    """The use that sets the limit, for error messages."""
    return min(uses, key=lambda use: uses[use])

"""Gangs: the PodGroup name every pod of one job shares, and who may make PodGroups in a tenant's namespace.

With setOwner false a synced pod has no owner, so KAI's pod-grouper would give each pod
a PodGroup of its own, and a 4-worker job could start 2 workers and hold their GPUs
forever. A pod that states its gang's size (the annotation gpu-tenancy/gang-size, or a
LeaderWorkerSet's own size) is given, at creation, `pod-group-name:
<tenant>.<virtual namespace>.<job key>`, the job key being the first grouping label it
carries (config/upstream.py GANG_KEY_LABELS). Neither a tenant's nor a namespace's name
can hold a '.', so two tenants never produce one name, which matters because KAI's
scheduler joins pods to PodGroups by name across namespaces. The pod-grouper then
leaves the pod alone, and the gang controller makes the PodGroup.

The policies here: the naming mutation, the PodGroup fence (only KAI's pod-grouper and
the gang controller create PodGroups in a tenant's namespace, always in the tenant's
queue), and a check of each new pod of a gang against the PodGroup it joins.
"""

from typing import Any

from components.vcluster_tenant.cel import cel_list, present, validation, value
from config.names import QUEUE_NAMESPACE_LABEL, TENANT_LABEL
from config.upstream import (
    DEFAULT_PRIORITY_CLASS,
    GANG_KEY_LABELS,
    KAI_POD_GROUPER_USER,
    KAI_SCHEDULER_USER,
    LWS_SIZE_ANNOTATION,
    POD_GROUP_ANNOTATION,
    POD_GROUP_API,
    PREEMPTIBILITY_LABEL,
    PRIORITY_LABEL,
    VIRTUAL_NAMESPACE_LABEL,
)

GANG_SIZE_ANNOTATION = "gpu-tenancy/gang-size"
GANG_LABEL = GANG_KEY_LABELS[0]
GANG_POLICY = "gpu-tenancy-gang-names"
PODGROUP_POLICY = "gpu-tenancy-tenant-podgroups"
CONSISTENCY_POLICY = "gpu-tenancy-gang-consistency"
CONTROLLER_PODGROUP_LABELS = {"app.kubernetes.io/managed-by": "gpu-tenancy-gang-controller"}
"""What the gang controller puts on its PodGroups (components/gang_controller/gangcontrol/gangs.py OWNED)."""
GANG_EMPTY_LABEL = "gpu-tenancy/gang-empty"
"""The gang controller's mark on a PodGroup no pod uses (gangs.py EMPTY_LABEL): a pod of another shape may join
it, and the controller fits the group to it."""

_LWS_KEY = "leaderworkerset.sigs.k8s.io/group-key"


def _gang_key() -> str:
    """The first grouping label the pod carries, or ''."""
    expression = "''"
    for label in reversed(GANG_KEY_LABELS):
        expression = f"({present('object', 'labels', label)} ? object.metadata.labels['{label}'] : {expression})"
    return expression


_STATED_SIZE = value("object", "annotations", GANG_SIZE_ANNOTATION)
_GANG_SIZE = (
    f"{_STATED_SIZE} != '' ? {_STATED_SIZE} : "
    f"({present('object', 'labels', _LWS_KEY)} ? {value('object', 'annotations', LWS_SIZE_ANNOTATION)} : '')"
)
_GANG_NAME = (
    f"namespaceObject.metadata.labels['{TENANT_LABEL}'] + '.' + "
    f"{value('object', 'labels', VIRTUAL_NAMESPACE_LABEL)} + '.' + variables.gangKey"
)


def gang_variables() -> list[dict[str, str]]:
    return [
        {"name": "gangKey", "expression": _gang_key()},
        {"name": "gangSize", "expression": _GANG_SIZE},
        {"name": "gang", "expression": "variables.gangSize != '' && variables.gangKey != ''"},
        {"name": "gangName", "expression": _GANG_NAME},
    ]


def gang_validations() -> list[dict[str, Any]]:
    on_create = "request.operation != 'CREATE' || "
    keys = ", ".join(GANG_KEY_LABELS)
    return [
        validation(
            f"{on_create}{_STATED_SIZE} == '' || variables.gangKey != ''",
            f"a gang ({GANG_SIZE_ANNOTATION}) needs a label all its pods share: one of {keys}",
        ),
        validation(
            f"{on_create}variables.gangSize == '' || variables.gangSize.matches('^[1-9][0-9]{{0,3}}$')",
            f"{GANG_SIZE_ANNOTATION} is the number of pods the gang starts together: a whole number from 1 to 9999",
        ),
        validation(
            f"{on_create}!variables.gang || (size(variables.gangName) <= 253 && "
            "variables.gangName.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$'))",
            "the gang's name is not a valid object name",
            "'the gang\\'s name ' + variables.gangName + ' is not a valid object name: its grouping label (' + "
            f"variables.gangKey + ') must be lowercase letters, digits, \\'-\\' and \\'.\\' (e.g. {GANG_LABEL}=bert)'",
        ),
        validation(
            f"{on_create}!{present('object', 'annotations', POD_GROUP_ANNOTATION)} || "
            f"(variables.gang && {value('object', 'annotations', POD_GROUP_ANNOTATION)} == variables.gangName)",
            f"{POD_GROUP_ANNOTATION} is the platform's: set {GANG_SIZE_ANNOTATION} and a grouping label instead",
            f"'{POD_GROUP_ANNOTATION} is the platform\\'s: ' + (variables.gang ? 'this gang\\'s is ' + "
            "variables.gangName : 'set " + GANG_SIZE_ANNOTATION + " and a grouping label instead')",
        ),
    ]


def gang_name_policy_spec(pod_rules: dict[str, Any], synced: dict[str, str]) -> dict[str, Any]:
    """New synced pods of a gang get its pod-group-name, so no team writes one (mutate mode)."""
    apply_configuration = (
        f"Object{{metadata: Object.metadata{{annotations: {{'{POD_GROUP_ANNOTATION}': variables.gangName}}}}}}"
    )
    return {
        "failurePolicy": "Fail",
        "matchConstraints": pod_rules,
        "matchConditions": [
            synced,
            {"name": "gang-pods", "expression": f"({_GANG_SIZE}) != '' && ({_gang_key()}) != ''"},
        ],
        "variables": gang_variables(),
        "reinvocationPolicy": "IfNeeded",
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": apply_configuration}}],
    }


def _podgroup_rules(namespaces: dict[str, Any]) -> dict[str, Any]:
    group = POD_GROUP_API[0].split("/")[0]
    rules = [
        {
            "apiGroups": [group],
            "apiVersions": ["*"],
            "operations": ["CREATE", "UPDATE", "DELETE"],
            "resources": ["podgroups"],
        }
    ]
    return {"namespaceSelector": namespaces, "resourceRules": rules}


PODGROUP_DELETERS = (
    "system:serviceaccount:kube-system:generic-garbage-collector",
    "system:serviceaccount:kube-system:namespace-controller",
)
"""Who else deletes a tenant's PodGroups: the garbage collector (a pg-<pod> group is owned by its pod) and the
namespace controller, as MicroK8s runs them (--use-service-account-credentials: canonical/microk8s
microk8s-resources/default-args/kube-controller-manager @v1.36)."""


def podgroup_policy_spec(namespaces: dict[str, Any], *, kai_namespace: str, controller_user: str) -> dict[str, Any]:
    """Only KAI's pod-grouper and the gang controller create PodGroups in a tenant's namespace, in its queue; only
    they, KAI's scheduler, the garbage collector and the namespace controller delete one (an operator deletes the
    pod, or the namespace; a cluster-admin's own delete is refused too, since groups prove nothing here).

    A deleted PodGroup is never made again for a running pod (the pod-grouper acts on new pods:
    pkg/podgrouper/pod_controller.go @v0.16.8), and KAI then counts the pod's GPUs on its node but in no queue
    (pkg/scheduler/cache/cluster_info/cluster_info.go), where nothing can reclaim them."""
    pod_grouper = KAI_POD_GROUPER_USER.format(namespace=kai_namespace)
    scheduler = KAI_SCHEDULER_USER.format(namespace=kai_namespace)
    deleters = cel_list([pod_grouper, controller_user, scheduler, *PODGROUP_DELETERS])
    return {
        "failurePolicy": "Fail",
        "matchConstraints": _podgroup_rules(namespaces),
        "variables": [
            {"name": "user", "expression": "request.userInfo.username"},
            {"name": "queue", "expression": f"namespaceObject.metadata.labels['{QUEUE_NAMESPACE_LABEL}']"},
            {"name": "tenant", "expression": f"namespaceObject.metadata.labels['{TENANT_LABEL}']"},
            {"name": "group", "expression": "request.operation == 'DELETE' ? oldObject : object"},
            {"name": "groupQueue", "expression": "has(variables.group.spec.queue) ? variables.group.spec.queue : ''"},
        ],
        "validations": [
            validation(
                f"request.operation != 'DELETE' || variables.user in {deleters}",
                "only KAI, the platform's gang controller and the cluster's own controllers delete PodGroups in a "
                "tenant's namespace: a pod whose group is gone holds its GPUs outside every queue",
            ),
            validation(
                f"request.operation != 'CREATE' || variables.user in ['{pod_grouper}', '{controller_user}']",
                "only KAI's pod-grouper and the platform's gang controller create PodGroups in a tenant's namespace",
            ),
            validation(
                f"request.operation != 'UPDATE' || variables.user in ['{pod_grouper}', '{controller_user}', "
                f"'{scheduler}']",
                "only KAI and the platform's gang controller change PodGroups in a tenant's namespace",
            ),
            validation(
                "request.operation == 'DELETE' || variables.groupQueue == variables.queue",
                "a PodGroup in a tenant's namespace is in the tenant's queue",
            ),
            validation(
                f"variables.user != '{controller_user}' || "
                "variables.group.metadata.name.startsWith(variables.tenant + '.')",
                "the gang controller names a tenant's PodGroups after the tenant",
            ),
            validation(
                f"request.operation == 'DELETE' || variables.user != '{pod_grouper}' || "
                "object.metadata.name.startsWith('pg-')",
                "KAI's pod-grouper names a tenant pod's own PodGroup pg-<pod>-<uid>",
            ),
        ],
    }


def consistency_policy_spec(pod_rules: dict[str, Any], synced: dict[str, str]) -> dict[str, Any]:
    """A new pod of a gang agrees with the PodGroup it joins, once that exists: same size and priority.

    The policy reads the gang controller's PodGroups in the pod's namespace as its params, so it is
    created only once KAI serves them (TenantAdmissionArgs.pod_groups_served): before that its
    configuration error would refuse every pod in every tenant namespace.
    """
    api_version, kind = POD_GROUP_API
    group = value("object", "annotations", POD_GROUP_ANNOTATION)
    priority = value("object", "labels", PRIORITY_LABEL)
    return {
        "failurePolicy": "Fail",
        "paramKind": {"apiVersion": api_version, "kind": kind},
        "matchConstraints": pod_rules,
        "matchConditions": [
            synced,
            {"name": "gang-pods", "expression": f"{group} != '' && !{group}.startsWith('pg-')"},
        ],
        "variables": [
            *gang_variables(),
            {"name": "group", "expression": group},
            {"name": "priority", "expression": f"{priority} != '' ? {priority} : '{DEFAULT_PRIORITY_CLASS}'"},
            {"name": "preemptibility", "expression": value("object", "labels", PREEMPTIBILITY_LABEL)},
            {
                "name": "emptied",
                "expression": (
                    f"has(params.metadata.labels) && '{GANG_EMPTY_LABEL}' in params.metadata.labels && "
                    f"params.metadata.labels['{GANG_EMPTY_LABEL}'] == 'true'"
                ),
            },
            {
                "name": "agrees",
                "expression": (
                    "params.spec.minMember == int(variables.gangSize) && "
                    "(has(params.spec.priorityClassName) ? params.spec.priorityClassName : '') == variables.priority "
                    "&& (has(params.spec.preemptibility) ? params.spec.preemptibility : '') == variables.preemptibility"
                ),
            },
        ],
        "validations": [
            validation(
                "params.metadata.name != variables.group || variables.agrees || variables.emptied",
                "a pod of a gang must agree with its PodGroup on the gang's size, priority class and preemptibility",
                "'this pod disagrees with PodGroup ' + variables.group + ' (' + string(params.spec.minMember) + "
                "' pods, ' + (has(params.spec.priorityClassName) ? params.spec.priorityClassName : '') + "
                "'): give every pod of a job the same " + GANG_SIZE_ANNOTATION + " and priority labels'",
            )
        ],
    }


def consistency_binding(namespaces: dict[str, Any]) -> dict[str, Any]:
    return {
        "policyName": CONSISTENCY_POLICY,
        "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": namespaces},
        # The params are the gang controller's PodGroups in the request's own namespace.
        "paramRef": {"selector": {"matchLabels": CONTROLLER_PODGROUP_LABELS}, "parameterNotFoundAction": "Allow"},
    }

"""GangController: the Deployment that makes KAI's PodGroups for the tenants' gangs, with just the access it needs.

It also writes each tenant's queue view (gangcontrol/queue_view.py), which the tenant's syncer copies
into its vCluster. Reading is cluster-wide (namespaces, the syncers' pods, PodGroups, Queues); writing
PodGroups, Events and the view is granted cluster-wide too, by one ClusterRoleBinding, and an admission
policy refuses every write of the controller's outside the tenants' namespaces (those labelled with a
tenant, which only the program makes): so the controller cannot make a PodGroup anywhere else, and a
new team costs no grant of its own. One replica, replaced with Recreate, so two never race. If it is
down, gang pods wait for their PodGroup: none starts alone.
"""

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.shared.labels import MANAGED_BY
from components.shared.ownership import owned
from components.shared.python_program import LOCKED_CONTAINER, fresh_file_check, python_env
from components.shared.python_program import program_files as python_program_files
from config.names import QUEUE_VIEW_CONFIGMAP, TENANT_LABEL
from config.upstream import KAI_METRICS_SERVICES, KAI_SCHEDULER_METRICS_PORT, POD_GROUP_API, PYTHON, PYTHON_IMAGE_REF

NAMESPACE = "gpu-tenancy-gangs"
SERVICE_ACCOUNT = "gang-controller"
GANG_CONTROLLER_USER = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
PROGRAM_DIR = Path(__file__).parent / "gangcontrol"
PACKAGE = PROGRAM_DIR.name
MOUNT = "/app"
GRACE_SECONDS = 300
"""A PodGroup outlives its last pod this long, so a job whose pods are replaced one by one keeps its gang."""
RESYNC_SECONDS = 30
HEARTBEAT_DIR = "/run/gangs"
HEARTBEAT = f"{HEARTBEAT_DIR}/alive"
STALE_SECONDS = 10 * RESYNC_SECONDS
"""The loop touches the heartbeat at least once a resync (the watch ends then and everything is listed again, and
every queue view written, 34 s at a thousand teams in benchmarks/gang_controller.py): ten resyncs without one is a
stuck loop."""
MEMORY = {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}}
"""benchmarks/gang_controller.py at 1,000 teams with 10 gangs each (41,000 synced pods, every gang waiting in its
queue view): 64 MiB kept, 102 MiB at the peak of a list, on top of the interpreter's own 15 or so; the limit is
twice that."""
NON_ROOT = 65534
"""Debian's nobody, in the python image (docker-library/python 3.13/slim-trixie, no USER of its own)."""
RBAC_GROUP = "rbac.authorization.k8s.io"
_KAI_API_GROUP = POD_GROUP_API[0].split("/")[0]
"""scheduling.run.ai: KAI's PodGroups and Queues."""


def fair_share_url(kai_namespace: str) -> str:
    """KAI's scheduler's /metrics, which holds the queues' fair shares (config/upstream.py KAI_METRICS_SERVICES)."""
    service = KAI_METRICS_SERVICES["scheduler"][0]
    return f"http://{service}.{kai_namespace}.svc:{KAI_SCHEDULER_METRICS_PORT}/metrics"


def program_files() -> dict[str, str]:
    """The controller's modules, as ConfigMap data."""
    return python_program_files(PROGRAM_DIR)


def read_rules() -> list[dict[str, Any]]:
    return [
        {"apiGroups": [""], "resources": ["namespaces", "pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [_KAI_API_GROUP], "resources": ["podgroups"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [_KAI_API_GROUP], "resources": ["queues"], "verbs": ["get", "list"]},
    ]


def write_rules() -> list[dict[str, Any]]:
    return [
        {"apiGroups": [_KAI_API_GROUP], "resources": ["podgroups"], "verbs": ["create", "patch", "delete"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        # The queue view (gangcontrol/queue_view.py). RBAC cannot name what is created; the ConfigMap policy
        # (components/vcluster_tenant/policies.py) lets this account write that one name alone.
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [QUEUE_VIEW_CONFIGMAP], "verbs": ["patch"]},
    ]


def pod_spec(files: Mapping[str, str], kai_namespace: str) -> dict[str, Any]:
    return {
        "serviceAccountName": SERVICE_ACCOUNT,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": NON_ROOT,
            "runAsGroup": NON_ROOT,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": "controller",
                "image": PYTHON_IMAGE_REF,
                "command": [PYTHON, "-m", PACKAGE],
                "env": [
                    *python_env(MOUNT),
                    {"name": "GANGS_GRACE_SECONDS", "value": str(GRACE_SECONDS)},
                    {"name": "GANGS_RESYNC_SECONDS", "value": str(RESYNC_SECONDS)},
                    {"name": "GANGS_HEARTBEAT_FILE", "value": HEARTBEAT},
                    {"name": "GANGS_FAIR_SHARE_URL", "value": fair_share_url(kai_namespace)},
                ],
                "resources": MEMORY,
                "securityContext": LOCKED_CONTAINER,
                # The image has no `test` or `find`: the python it runs reads the heartbeat's age.
                "livenessProbe": {
                    "exec": {"command": [PYTHON, "-c", fresh_file_check(HEARTBEAT, STALE_SECONDS)]},
                    "initialDelaySeconds": STALE_SECONDS,
                    "periodSeconds": RESYNC_SECONDS,
                },
                "volumeMounts": [
                    {"name": "program", "mountPath": f"{MOUNT}/{PACKAGE}", "readOnly": True},
                    {"name": "heartbeat", "mountPath": HEARTBEAT_DIR},
                ],
            }
        ],
        "volumes": [
            {
                "name": "program",
                "configMap": {
                    "name": SERVICE_ACCOUNT,
                    "items": [{"key": name, "path": name} for name in sorted(files)],
                },
            },
            {"name": "heartbeat", "emptyDir": {"medium": "Memory"}},
        ],
    }


WRITES_OUTSIDE_TENANTS_POLICY = "gpu-tenancy-gang-controller-tenants-only"


def writes_outside_tenants_policy_spec() -> dict[str, Any]:
    """Every write of the controller's in a namespace that is not a tenant's, refused: what bounds its
    cluster-wide write grant (RBAC cannot name the namespaces a binding of one ClusterRole covers)."""
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": ["*"],
                    "apiVersions": ["*"],
                    "resources": ["*/*"],  # every resource and subresource: one entry, as the API server requires
                    "operations": ["CREATE", "UPDATE", "DELETE"],
                }
            ],
            "namespaceSelector": {"matchExpressions": [{"key": TENANT_LABEL, "operator": "DoesNotExist"}]},
        },
        "matchConditions": [
            {"name": "gang-controller", "expression": f"request.userInfo.username == '{GANG_CONTROLLER_USER}'"}
        ],
        "validations": [
            {
                "expression": "false",
                "messageExpression": "'the gang controller writes in tenant namespaces only, not in ' + "
                "request.namespace",
            }
        ],
    }


def writes_outside_tenants_binding() -> dict[str, Any]:
    return {"policyName": WRITES_OUTSIDE_TENANTS_POLICY, "validationActions": ["Deny"]}


@dataclass(frozen=True)
class GangControllerArgs:
    kai_namespace: str
    """Where KAI's scheduler serves the fair shares the queue views show."""


class GangController(pulumi.ComponentResource):
    namespace: pulumi.Output[str]
    """Where the controller runs."""

    def __init__(self, name: str, args: GangControllerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-tenancy:index:GangController", name, None, owned(opts))
        child = pulumi.ResourceOptions(parent=self)
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={
                "name": NAMESPACE,
                "labels": {**MANAGED_BY, "pod-security.kubernetes.io/enforce": "restricted"},
            },
            opts=child,
        )
        meta = {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE, "labels": MANAGED_BY}
        after = pulumi.ResourceOptions(depends_on=[namespace])
        account = k8s.core.v1.ServiceAccount(f"{name}-account", metadata=meta, opts=child.merge(after))
        subject = [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}]
        grants = self._access(name, subject, child)
        files = program_files()
        program = k8s.core.v1.ConfigMap(f"{name}-program", metadata=meta, data=files, opts=child.merge(after))
        fingerprint = hashlib.sha256("".join(f"{k}\0{v}" for k, v in sorted(files.items())).encode()).hexdigest()[:16]
        k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=meta,
            spec={
                "replicas": 1,
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": {"app": SERVICE_ACCOUNT}},
                "template": {
                    "metadata": {
                        "labels": {**MANAGED_BY, "app": SERVICE_ACCOUNT},
                        # A new program rolls the pod; a ConfigMap change alone would not.
                        "annotations": {"gpu-tenancy/program": fingerprint},
                    },
                    "spec": pod_spec(files, args.kai_namespace),
                },
            },
            opts=child.merge(pulumi.ResourceOptions(depends_on=[account, program, *grants])),
        )
        self.namespace = pulumi.Output.from_input(NAMESPACE)
        self.register_outputs({"namespace": self.namespace})

    @staticmethod
    def _access(name: str, subject: list[dict[str, str]], opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
        """Read everywhere; write PodGroups, Events and the view in tenants' namespaces only. Returns the grants."""
        read_meta = {"name": "gpu-tenancy-gang-controller-read", "labels": MANAGED_BY}
        write_meta = {"name": "gpu-tenancy-gang-controller-write", "labels": MANAGED_BY}
        reader = k8s.rbac.v1.ClusterRole(f"{name}-read", metadata=read_meta, rules=read_rules(), opts=opts)
        writer = k8s.rbac.v1.ClusterRole(f"{name}-write", metadata=write_meta, rules=write_rules(), opts=opts)
        reading: pulumi.Resource = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-read",
            metadata=read_meta,
            role_ref={"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": read_meta["name"]},
            subjects=subject,
            opts=opts.merge(pulumi.ResourceOptions(depends_on=[reader])),
        )
        api = k8s.admissionregistration.v1
        guard_meta = {"name": WRITES_OUTSIDE_TENANTS_POLICY, "labels": MANAGED_BY}
        guard = api.ValidatingAdmissionPolicy(
            f"{name}-tenants-only", metadata=guard_meta, spec=writes_outside_tenants_policy_spec(), opts=opts
        )
        guarded = api.ValidatingAdmissionPolicyBinding(
            f"{name}-tenants-only",
            metadata=guard_meta,
            spec=writes_outside_tenants_binding(),
            opts=opts.merge(pulumi.ResourceOptions(depends_on=[guard])),
        )
        # The grant only once its bound holds. Each tenant's RoleBinding of this role went before it: the
        # cluster-wide binding is created before they are deleted, so no write the controller had is lost.
        writing = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-write",
            metadata=write_meta,
            role_ref={"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": write_meta["name"]},
            subjects=subject,
            opts=opts.merge(pulumi.ResourceOptions(depends_on=[writer, guarded])),
        )
        return [reading, writing]

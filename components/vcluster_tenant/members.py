"""A team's members inside its vCluster: a ServiceAccount each, whose token is that member's own credential.

The API server names the caller `system:serviceaccount:gpu-tenancy-users:<member>`, so what each
member does is theirs in the vCluster's own records (every object's managedFields, `kubectl auth
whoami`). A member removed from the stack loses the ServiceAccount and its token Secret, and the API
server refuses the token within 10 seconds: a legacy token is checked against its Secret and its
ServiceAccount (kubernetes/kubernetes pkg/serviceaccount/legacy.go @v1.36.3), but an accepted token is
remembered for TokenSuccessCacheTTL, 10 s (pkg/kubeapiserver/options/authentication.go @v1.36.3), which the
lab showed. Nobody else's changes.

What holds no credential (the namespace, every member's ServiceAccount, their binding) is one Helm release
per team, of a chart that renders the objects in its values as they are (objects_chart/): one registration for
the team. Each token Secret is registered, so the program reads it: the vCluster's token controller fills it,
and pulumi-kubernetes waits for its data before the create ends (provider/pkg/await/awaiters.go
untilCoreV1SecretInitialized @v4.32.0). A member costs that one registration.
"""

import base64
from collections.abc import Sequence
from typing import Any

from components.shared.kubeconfigs import with_token
from components.shared.labels import MANAGED_BY, PART_OF
from config.names import MEMBERS_NAMESPACE

TOKEN_SECRET_TYPE = "kubernetes.io/service-account-token"
SERVICE_ACCOUNT_ANNOTATION = "kubernetes.io/service-account.name"
BINDING = "gpu-tenancy-users"
ACCOUNTS_RELEASE = "gpu-tenancy-users"
"""The Helm release of the members' accounts, kept in the vCluster's kube-system: not in the namespace it makes."""
ACCOUNTS_RELEASE_NAMESPACE = "kube-system"
OBJECTS_CHART = "components/vcluster_tenant/objects_chart"
"""Relative to the project's root, where the engine starts every provider (cmd.Dir = the project's root:
pulumi/pulumi pkg/engine/deployment.go and sdk/go/common/resource/plugin/plugin.go @v3.274.0); pulumi-kubernetes
takes a chart directory that holds a Chart.yaml as a local chart (provider/pkg/provider/helm_release.go
localChart). Relative, so the release's inputs are the same from every checkout."""
OBJECTS_CHART_VERSION = "1.0.0"
"""objects_chart/Chart.yaml's version (a test holds them equal)."""


def member_user(member: str) -> str:
    """The name the vCluster's API server gives the member."""
    return f"system:serviceaccount:{MEMBERS_NAMESPACE}:{member}"


def token_secret_name(member: str) -> str:
    return f"{member}-token"


def accounts(members: Sequence[str]) -> list[dict[str, Any]]:
    """The namespace, each member's ServiceAccount and their cluster-admin binding: what the team's release
    holds. Helm, not Pulumi, manages them, so they carry the platform's part-of label alone (Helm sets
    managed-by to itself: helm/helm pkg/action/validate.go setMetadataVisitor @v3.18.6)."""
    ordered = sorted(members)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MEMBERS_NAMESPACE, "labels": PART_OF}}
    service_accounts = [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": member, "namespace": MEMBERS_NAMESPACE, "labels": PART_OF},
        }
        for member in ordered
    ]
    return [namespace, *service_accounts, admin_binding(ordered)]


def admin_binding(members: Sequence[str]) -> dict[str, Any]:
    """Every member is cluster-admin of the team's vCluster, as the team kubeconfig is."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": BINDING, "labels": PART_OF},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": member, "namespace": MEMBERS_NAMESPACE} for member in members],
    }


def token_secret(member: str) -> dict[str, Any]:
    return {
        "name": token_secret_name(member),
        "namespace": MEMBERS_NAMESPACE,
        "labels": MANAGED_BY,
        "annotations": {SERVICE_ACCOUNT_ANNOTATION: member},
    }


def member_token(data: dict[str, str]) -> str:
    """The token in a token Secret's data, as the API server reads it."""
    return base64.b64decode(data["token"]).decode()


def member_kubeconfig(user: str, team_kubeconfig: str, token: str) -> str:
    """The team kubeconfig's cluster (its endpoint and CA), reached with the member's token."""
    return with_token(team_kubeconfig, user, token)

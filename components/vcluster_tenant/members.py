"""A team's members inside its vCluster: a ServiceAccount each, whose token is that member's own credential.

The API server names the caller `system:serviceaccount:gpu-tenancy-members:<member>`, so what each
member does is theirs in the vCluster's own records (every object's managedFields, `kubectl auth
whoami`). A member removed from the stack loses the ServiceAccount and its token Secret, and the API
server refuses the token within 10 seconds: a legacy token is checked against its Secret and its
ServiceAccount (kubernetes/kubernetes pkg/serviceaccount/legacy.go @v1.36.3), but an accepted token is
remembered for TokenSuccessCacheTTL, 10 s (pkg/kubeapiserver/options/authentication.go @v1.36.3), which the
lab showed. Nobody else's changes.
The token is a Secret the vCluster's token controller fills; pulumi-kubernetes waits for its data before
the create ends (provider/pkg/await/awaiters.go untilCoreV1SecretInitialized @v4.32.0).
"""

import base64
from collections.abc import Sequence
from typing import Any

from components.shared.kubeconfigs import with_token
from components.shared.labels import MANAGED_BY
from config.names import MEMBERS_NAMESPACE

TOKEN_SECRET_TYPE = "kubernetes.io/service-account-token"
SERVICE_ACCOUNT_ANNOTATION = "kubernetes.io/service-account.name"
BINDING = "gpu-tenancy-members"


def member_user(member: str) -> str:
    """The name the vCluster's API server gives the member."""
    return f"system:serviceaccount:{MEMBERS_NAMESPACE}:{member}"


def token_secret_name(member: str) -> str:
    return f"{member}-token"


def namespace() -> dict[str, Any]:
    return {"name": MEMBERS_NAMESPACE, "labels": MANAGED_BY}


def service_account(member: str) -> dict[str, Any]:
    return {"name": member, "namespace": MEMBERS_NAMESPACE, "labels": MANAGED_BY}


def token_secret(member: str) -> dict[str, Any]:
    return {
        "name": token_secret_name(member),
        "namespace": MEMBERS_NAMESPACE,
        "labels": MANAGED_BY,
        "annotations": {SERVICE_ACCOUNT_ANNOTATION: member},
    }


def admin_binding(members: Sequence[str]) -> dict[str, Any]:
    """Every member is cluster-admin of the team's vCluster, as the team kubeconfig is."""
    return {
        "metadata": {"name": BINDING, "labels": MANAGED_BY},
        "role_ref": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [
            {"kind": "ServiceAccount", "name": member, "namespace": MEMBERS_NAMESPACE} for member in sorted(members)
        ],
    }


def member_kubeconfig(user: str, parts: Sequence[Any]) -> str:
    """The team kubeconfig's cluster (its endpoint and CA), reached with the member's token: `parts` is the team
    kubeconfig and the token Secret's data."""
    team_kubeconfig, data = parts
    return with_token(team_kubeconfig, user, base64.b64decode(data["token"]).decode())

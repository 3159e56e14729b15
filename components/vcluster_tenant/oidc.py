"""A tenant's API server trusting the organisation's identity provider (config/vcluster_tenant/oidc.py).

The virtual kube-apiserver checks each ID token itself: vCluster adds
controlPlane.distro.k8s.apiServer.extraArgs to the flags it starts it with (loft-sh/vcluster pkg/k8s/k8s.go
MergeArgs @v0.35.1), and a member's bearer token reaches it through the syncer's proxy as a TokenReview
(pkg/authentication/delegatingauthenticator @v0.35.1). Usernames and groups are prefixed with `oidc:`, so no
claim can name a `system:` user or group, nor a member's ServiceAccount.
"""

import base64
import hashlib
from collections.abc import Sequence
from typing import Any

from components.shared.kubeconfigs import with_credentials
from components.shared.labels import MANAGED_BY
from config.vcluster_tenant.oidc import OidcConfig

PREFIX = "oidc:"
CA_CONFIGMAP = "gpu-tenancy-oidc-ca"
"""In the tenant's host namespace, mounted into its control plane. A team that rewrote it could only make its own
vCluster trust another provider, where it is cluster-admin already."""
CA_KEY = "ca.crt"
CA_DIRECTORY = "/etc/gpu-tenancy/oidc"
CA_DIGEST_ANNOTATION = "gpu-tenancy/oidc-ca"
"""On the control plane's pod (chart controlPlane.statefulSet.pods.annotations @v0.35.1)."""
BINDING = "gpu-tenancy-oidc-groups"
EXEC_API_VERSION = "client.authentication.k8s.io/v1beta1"
"""What kubelogin's own examples configure (int128/kubelogin README.md, docs/usage.md @2188e25d)."""


def api_server_args(oidc: OidcConfig) -> list[str]:
    """kube-apiserver's OIDC flags (kubernetes pkg/kubeapiserver/options/authentication.go @v1.36.3)."""
    args = [
        f"--oidc-issuer-url={oidc.issuer_url}",
        f"--oidc-client-id={oidc.client_id}",
        f"--oidc-username-claim={oidc.username_claim}",
        f"--oidc-username-prefix={PREFIX}",
        f"--oidc-groups-claim={oidc.groups_claim}",
        f"--oidc-groups-prefix={PREFIX}",
    ]
    if oidc.certificate_authority:
        args.append(f"--oidc-ca-file={CA_DIRECTORY}/{CA_KEY}")
    return args


def with_oidc(values: dict[str, Any], oidc: OidcConfig) -> dict[str, Any]:
    """`values` with the API server's OIDC flags, and the provider's CA mounted, after whatever the tenant lists."""
    control_plane = dict(values.get("controlPlane") or {})
    distro = dict(control_plane.get("distro") or {})
    k8s = dict(distro.get("k8s") or {})
    api_server = dict(k8s.get("apiServer") or {})
    api_server["extraArgs"] = [*(api_server.get("extraArgs") or []), *api_server_args(oidc)]
    control_plane["distro"] = {**distro, "k8s": {**k8s, "apiServer": api_server}}
    if oidc.certificate_authority:
        # Mounted into the syncer container, which starts the API server (loft-sh/vcluster
        # chart/templates/statefulset.yaml persistence.addVolumes, addVolumeMounts @v0.35.1).
        stateful_set = dict(control_plane.get("statefulSet") or {})
        persistence = dict(stateful_set.get("persistence") or {})
        volume = {"name": CA_CONFIGMAP, "configMap": {"name": CA_CONFIGMAP}}
        mount = {"name": CA_CONFIGMAP, "mountPath": CA_DIRECTORY, "readOnly": True}
        persistence["addVolumes"] = [*(persistence.get("addVolumes") or []), volume]
        persistence["addVolumeMounts"] = [*(persistence.get("addVolumeMounts") or []), mount]
        # kube-apiserver reads the CA file when it starts: a new CA restarts the control plane.
        pods = dict(stateful_set.get("pods") or {})
        digest = hashlib.sha256(oidc.certificate_authority.encode()).hexdigest()[:16]
        pods["annotations"] = {**(pods.get("annotations") or {}), CA_DIGEST_ANNOTATION: digest}
        control_plane["statefulSet"] = {**stateful_set, "persistence": persistence, "pods": pods}
    return {**values, "controlPlane": control_plane}


def ca_configmap() -> dict[str, Any]:
    """The CA's ConfigMap, in the tenant's host namespace."""
    return {"name": CA_CONFIGMAP, "labels": MANAGED_BY}


def group_subject(group: str) -> str:
    """The group the API server gives a member of the provider's `group`."""
    return f"{PREFIX}{group}"


def groups_binding(groups: Sequence[str]) -> dict[str, Any]:
    """Every member of the team's provider groups is cluster-admin of its vCluster, as the team kubeconfig is."""
    return {
        "metadata": {"name": BINDING, "labels": MANAGED_BY},
        "role_ref": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group_subject(group)}
            for group in sorted(groups)
        ],
    }


def sign_in_kubeconfig(name: str, oidc: OidcConfig, team_kubeconfig: str) -> str:
    """The team's cluster (its endpoint and CA) reached through kubelogin, `kubectl oidc-login get-token`, which
    signs the member in at the provider and hands kubectl the ID token (int128/kubelogin docs/usage.md @2188e25d):
    it holds no credential, so one file serves every member."""
    args = [
        "oidc-login",
        "get-token",
        f"--oidc-issuer-url={oidc.issuer_url}",
        f"--oidc-client-id={oidc.client_id}",
        *(f"--oidc-extra-scope={scope}" for scope in oidc.scopes),
    ]
    if oidc.certificate_authority:
        args.append(f"--certificate-authority-data={base64.b64encode(oidc.certificate_authority.encode()).decode()}")
    credentials = {
        "exec": {
            "apiVersion": EXEC_API_VERSION,
            "command": "kubectl",
            "args": args,
        }
    }
    return with_credentials(team_kubeconfig, name, credentials)

"""The team views' Kubernetes objects as plain data: prom-label-proxy, the team Grafana and the policies between them.

Shared pieces only: one proxy and one Grafana serve every team. What is per team is data: an
organisation, a login, a data source whose header names the team's namespace, and a dashboard.
"""

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from components.observability.grafana_teams.reconcile import LIMIT_PLACEHOLDER, LIMITED, TEAM_PLACEHOLDER, UNLIMITED
from components.observability.team_dashboard import TEAM_DATASOURCE_UID, limit_literal, team_dashboard
from components.observability.team_rules import series_checks
from components.observability.team_sign_in import CA_FILE, TeamViewsSignIn, egress_to_provider, generic_oauth
from components.shared.python_program import LOCKED_CONTAINER, fresh_file_check, python_env
from components.shared.python_program import program_files as python_program_files
from config.upstream import (
    GRAFANA_IMAGE,
    GRAFANA_RUN,
    GRAFANA_UID,
    METADATA_NAME_LABEL,
    NOBODY,
    PROM_LABEL_PROXY,
    PROM_LABEL_PROXY_IMAGE,
    PYTHON,
    PYTHON_IMAGE_REF,
)

NAME = "gpu-tenancy-team-views"
PROXY = "gpu-tenancy-label-proxy"
PROXY_PORT = 8080
GRAFANA_PORT = 3000
ENFORCED_LABEL = "namespace"
"""The label every series a team may read carries with the team's host namespace."""
TENANT_HEADER = "X-Gpu-Tenancy-Namespace"
"""The header Grafana's data source sets and prom-label-proxy reads the team's namespace from."""
PROGRAM_DIR = Path(__file__).parent / "grafana_teams"
PACKAGE = "grafana_teams"
PROGRAM_MOUNT = "/opt/team-views"
STATE_MOUNT = "/etc/team-views"
SECRETS_MOUNT = "/etc/team-views-secrets"
TLS_MOUNT = "/etc/grafana/tls"
ADMIN_LOGIN = "gpu_tenancy_admin"
"""Grafana's server admin (`[security] admin_user`): a login no team can have, since a team's login is its name, a DNS
label, which has no underscore. Left at Grafana's `admin`, a team named admin would be that account, and the
reconciler would give it the team's password."""
READY_DIR = "/run/team-views"
READY_CHECK = f"import os, sys; sys.exit(not os.path.exists('{READY_DIR}/ready'))"
"""The reconciler's readiness: it has built every team's organisation at least once (the image has no `test`)."""
STALE_SECONDS = 3600
"""The reconciler rewrites the ready file after every pass (every 300 s, TEAM_VIEWS_RESYNC_SECONDS, after a pass
of some 6 calls a team): an hour without one is a stuck loop, which its liveness probe restarts."""
LIVENESS_CHECK = fresh_file_check(f"{READY_DIR}/ready", STALE_SECONDS, alive_before_first=True)
"""Alive until a pass is over an hour late; before the first pass, alive (that one may take long at a thousand
teams, and readiness holds the pod back meanwhile)."""


def program_files() -> dict[str, str]:
    """The reconciler's modules, as ConfigMap data."""
    return python_program_files(PROGRAM_DIR)


def proxy_args(upstream: str) -> list[str]:
    """prom-label-proxy's flags (main.go @v0.14.0): the namespace from one header, a conflicting matcher refused
    rather than silently replaced, and the label APIs Grafana's variables use."""
    return [
        f"-insecure-listen-address=0.0.0.0:{PROXY_PORT}",
        f"-upstream={upstream}",
        f"-label={ENFORCED_LABEL}",
        f"-header-name={TENANT_HEADER}",
        "-error-on-replace",
        "-enable-label-apis",
    ]


def _pod_security(user: int) -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": user,
        "runAsGroup": user,
        "fsGroup": user,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def proxy_pod_spec(upstream: str, version: str) -> dict[str, Any]:
    return {
        "securityContext": _pod_security(NOBODY),
        "automountServiceAccountToken": False,
        "containers": [
            {
                "name": "prom-label-proxy",
                "image": f"{PROM_LABEL_PROXY_IMAGE}:{version}",
                "command": [PROM_LABEL_PROXY],
                "args": proxy_args(upstream),
                "ports": [{"name": "http", "containerPort": PROXY_PORT}],
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": PROXY_PORT}},
                "resources": {"requests": {"cpu": "20m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
                "securityContext": LOCKED_CONTAINER,
            }
        ],
    }


def grafana_ini(sign_in: TeamViewsSignIn | None = None, root_url: str | None = None) -> str:
    """Grafana's settings for the team views: HTTPS, no sign-up, no anonymous access, nothing phoned home, new users
    Viewers of the organisation they are created in, and Viewers kept out of Explore. With `sign_in`, members sign
    in through the identity provider (team_sign_in.py), which sends them back to `root_url`."""
    sections: dict[str, dict[str, str]] = {
        "server": {
            "protocol": "https",
            "http_port": str(GRAFANA_PORT),
            "cert_file": f"{TLS_MOUNT}/tls.crt",
            "cert_key": f"{TLS_MOUNT}/tls.key",
        },
        "security": {"admin_user": ADMIN_LOGIN, "cookie_secure": "true", "disable_gravatar": "true"},
        "users": {
            "allow_sign_up": "false",
            "allow_org_create": "false",
            "auto_assign_org": "true",
            "auto_assign_org_role": "Viewer",
            "viewers_can_edit": "false",
        },
        "auth.anonymous": {"enabled": "false"},
        "snapshots": {"enabled": "false"},
        "analytics": {"reporting_enabled": "false", "check_for_updates": "false", "check_for_plugin_updates": "false"},
        # Grafana 12+ installs its preinstalled plugins from the internet at start unless told not to; the pod's egress
        # policy would block it anyway (an unknown key is ignored by older versions).
        "plugins": {"preinstall_disabled": "true"},
    }
    if sign_in is not None:
        # The redirect URI the provider must know is <root_url>login/generic_oauth.
        sections["server"]["root_url"] = root_url or ""
        sections["auth.generic_oauth"] = generic_oauth(sign_in, STATE_MOUNT)
    return "".join(
        f"[{section}]\n" + "".join(f"{key} = {value}\n" for key, value in values.items()) + "\n"
        for section, values in sections.items()
    )


def datasource(proxy_url: str) -> dict[str, Any]:
    """A team organisation's only data source; the header's value (the namespace) goes in secureJsonData."""
    return {
        "uid": TEAM_DATASOURCE_UID,
        "name": "Prometheus",
        "type": "prometheus",
        "access": "proxy",
        "url": proxy_url,
        "isDefault": True,
        "jsonData": {"httpMethod": "POST", "httpHeaderName1": TENANT_HEADER},
    }


def member_login(team: str, member: str) -> str:
    """A member's Grafana login: neither a tenant's name nor a member's holds a '.', so no two are alike."""
    return f"{team}.{member}"


def _team_entry(team: str, limit: str | None, members: Sequence[str]) -> dict[str, Any]:
    """Members only where there are some: a stack without them keeps the state it had, and its Grafana pod."""
    entry: dict[str, Any] = {"name": team, "limit": limit}
    if members:
        entry["members"] = [member_login(team, member) for member in sorted(members)]
    return entry


def desired_state(
    namespaces: Mapping[str, str],
    limits: Mapping[str, float],
    price: float | None,
    proxy_url: str,
    members: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """The reconciler's ConfigMap: the data source and the dashboard templates every team shares, and per team only
    its name, limit and members' logins (no secret in it). It grows by some 40 bytes a team, and 20 a member."""
    members = members or {}
    return {
        "admin": ADMIN_LOGIN,
        "datasource": datasource(proxy_url),
        "dashboards": {
            LIMITED: team_dashboard(TEAM_PLACEHOLDER, limit=LIMIT_PLACEHOLDER, price=price),
            UNLIMITED: team_dashboard(TEAM_PLACEHOLDER, limit=None, price=price),
        },
        "teams": [_team_entry(team, limit_literal(limits[team]), members.get(team, ())) for team in sorted(namespaces)],
        "checks": series_checks(),
    }


def secret_state(admin: str, passwords: Mapping[str, str], namespaces: Mapping[str, str]) -> str:
    """The reconciler's Secret: the admin's and each team's password, and each data source's header value."""
    return json.dumps(
        {
            "admin": admin,
            "passwords": dict(passwords),
            "datasources": {team: {"httpHeaderValue1": namespace} for team, namespace in namespaces.items()},
        },
        sort_keys=True,
    )


def grafana_pod_spec(version: str, config_map: str, secret: str, *, provider_ca: bool = False) -> dict[str, Any]:
    """Grafana and its reconciler; the pod is Ready only once every team's organisation is built."""
    state = [
        {"name": "config", "mountPath": STATE_MOUNT, "readOnly": True},
        {"name": "secrets", "mountPath": SECRETS_MOUNT, "readOnly": True},
    ]
    return {
        "securityContext": _pod_security(GRAFANA_UID),
        "automountServiceAccountToken": False,
        "containers": [
            {
                "name": "grafana",
                "image": f"{GRAFANA_IMAGE}:{version}",
                "command": [GRAFANA_RUN],
                "env": [
                    {"name": "GF_PATHS_CONFIG", "value": f"{STATE_MOUNT}/grafana.ini"},
                    {
                        "name": "GF_SECURITY_ADMIN_PASSWORD",
                        "valueFrom": {"secretKeyRef": {"name": secret, "key": "admin-password"}},
                    },
                ],
                "ports": [{"name": "https", "containerPort": GRAFANA_PORT}],
                "readinessProbe": {"httpGet": {"path": "/api/health", "port": GRAFANA_PORT, "scheme": "HTTPS"}},
                "livenessProbe": {
                    "httpGet": {"path": "/api/health", "port": GRAFANA_PORT, "scheme": "HTTPS"},
                    "initialDelaySeconds": 60,
                    "periodSeconds": 30,
                    "failureThreshold": 6,
                },
                "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
                "securityContext": LOCKED_CONTAINER,
                "volumeMounts": [
                    {"name": "config", "mountPath": STATE_MOUNT, "readOnly": True},
                    {"name": "tls", "mountPath": TLS_MOUNT, "readOnly": True},
                    {"name": "data", "mountPath": "/var/lib/grafana"},
                    {"name": "tmp", "mountPath": "/tmp"},
                ],
            },
            {
                "name": "reconciler",
                "image": PYTHON_IMAGE_REF,
                "command": [PYTHON, "-m", PACKAGE],
                "env": [
                    *python_env(PROGRAM_MOUNT),
                    {"name": "TEAM_VIEWS_STATE", "value": f"{STATE_MOUNT}/state.json"},
                    {"name": "TEAM_VIEWS_SECRETS", "value": f"{SECRETS_MOUNT}/secrets.json"},
                    {"name": "TEAM_VIEWS_GRAFANA_URL", "value": f"https://localhost:{GRAFANA_PORT}"},
                    {"name": "TEAM_VIEWS_CA", "value": f"{TLS_MOUNT}/tls.crt"},
                    {"name": "TEAM_VIEWS_READY_FILE", "value": f"{READY_DIR}/ready"},
                ],
                "readinessProbe": {"exec": {"command": [PYTHON, "-c", READY_CHECK]}},
                "livenessProbe": {"exec": {"command": [PYTHON, "-c", LIVENESS_CHECK]}, "periodSeconds": 300},
                "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
                "securityContext": LOCKED_CONTAINER,
                "volumeMounts": [
                    *state,
                    {"name": "program", "mountPath": f"{PROGRAM_MOUNT}/{PACKAGE}", "readOnly": True},
                    {"name": "tls", "mountPath": TLS_MOUNT, "readOnly": True},
                    {"name": "ready", "mountPath": READY_DIR},
                ],
            },
        ],
        "volumes": [
            {
                "name": "config",
                "configMap": {
                    "name": config_map,
                    "items": _items("grafana.ini", "state.json", *([CA_FILE] if provider_ca else [])),
                },
            },
            {"name": "program", "configMap": {"name": config_map, "items": _items(*sorted(program_files()))}},
            {"name": "secrets", "secret": {"secretName": secret, "items": _items("secrets.json")}},
            {"name": "tls", "secret": {"secretName": secret, "items": _items("tls.crt", "tls.key")}},
            {"name": "data", "emptyDir": {}},
            {"name": "tmp", "emptyDir": {}},
            {"name": "ready", "emptyDir": {"medium": "Memory"}},
        ],
    }


def _items(*keys: str) -> list[dict[str, str]]:
    return [{"key": key, "path": key} for key in keys]


def _pods(app: str) -> dict[str, Any]:
    return {"podSelector": {"matchLabels": {"app": app}}}


DNS = {
    "to": [{"namespaceSelector": {"matchLabels": {METADATA_NAME_LABEL: "kube-system"}}}],
    "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}],
}


def proxy_policy() -> dict[str, Any]:
    """Only the team Grafana may send the proxy a header naming a namespace: any other pod could name any team."""
    return {
        "podSelector": {"matchLabels": {"app": PROXY}},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [_pods(NAME)], "ports": [{"port": PROXY_PORT, "protocol": "TCP"}]}],
    }


def grafana_policy(sign_in: TeamViewsSignIn | None = None) -> dict[str, Any]:
    """Team members reach Grafana on its HTTPS port; Grafana reaches the proxy and DNS, never Prometheus itself,
    and with `sign_in` the identity provider's token endpoint."""
    egress = [{"to": [_pods(PROXY)], "ports": [{"port": PROXY_PORT, "protocol": "TCP"}]}, DNS]
    if sign_in is not None:
        egress.append(egress_to_provider(sign_in))
    return {
        "podSelector": {"matchLabels": {"app": NAME}},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [{"ports": [{"port": GRAFANA_PORT, "protocol": "TCP"}]}],
        "egress": egress,
    }

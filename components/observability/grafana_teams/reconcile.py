"""Make Grafana hold exactly one organisation per team, with Viewer logins, a data source and a dashboard.

The calls are Grafana's HTTP API as its server admin (grafana/grafana pkg/api/api.go, org.go,
admin_users.go, org_users.go, datasources.go, preferences.go, pkg/services/authn/authnimpl/service.go,
read at v12.x, the newest stored; the tag v13.2.0 could not be had):

- POST /api/orgs creates an organisation with its creator as Admin (409 when the name is taken;
  GET /api/orgs/name/<name> finds it);
- POST /api/admin/users with OrgId puts a new user in that organisation alone, at
  `[users] auto_assign_org_role` (Viewer), since `auto_assign_org` is on (412 when it exists);
- PATCH /api/orgs/<org>/users/<user> keeps the role Viewer, whatever happened before;
- POST /api/datasources and /api/dashboards/db act in the organisation the X-Grafana-Org-Id
  header names, for a member of it; the admin makes sure it is one (POST /api/orgs/<org>/users,
  409 when it already is, as after creating the organisation).

Every step is safe to repeat: a restarted container finds the same database in its emptyDir.
"""

import base64
import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

ORG_HEADER = "X-Grafana-Org-Id"
VIEWER = "Viewer"
TEAM_PLACEHOLDER = "@@team@@"
LIMIT_PLACEHOLDER = "@@limit@@"
"""The dashboard templates hold these where a team's name and its queue's GPU limit go: one template for every
team keeps the ConfigMap far under the API server's 1 MiB at a thousand teams (a whole dashboard each is 7 KB)."""
LIMITED, UNLIMITED = "limited", "unlimited"
"""The two templates: with a limit line, and without (a queue with no limit)."""


class GrafanaError(Exception):
    def __init__(self, status: int, method: str, path: str, body: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {body[:300]}")
        self.status = status


@dataclass(frozen=True)
class TeamView:
    name: str
    """The team, its organisation and its login."""
    password: str
    datasource: dict[str, Any]
    """Grafana's data source body, its secureJsonData included."""
    dashboard: dict[str, Any]
    members: dict[str, str] = field(default_factory=dict)
    """Each member's own Viewer login in the team's organisation -> its password."""


@dataclass(frozen=True)
class DesiredState:
    admin_login: str
    admin_password: str
    teams: list[TeamView]
    checks: list[dict[str, str]]
    """Queries each team's data source must answer, and what gives them (logged when one comes back empty)."""


def fill(template: Any, team: str, limit: str | None) -> Any:
    """A team's dashboard from a template: the placeholders replaced in every string (a team name is a DNS label
    and a limit a number, so neither needs escaping in JSON or PromQL)."""
    if isinstance(template, dict):
        return {key: fill(value, team, limit) for key, value in template.items()}
    if isinstance(template, list):
        return [fill(value, team, limit) for value in template]
    if isinstance(template, str):
        return template.replace(TEAM_PLACEHOLDER, team).replace(LIMIT_PLACEHOLDER, limit or "")
    return template


def load_state(state_path: str, secrets_path: str) -> DesiredState:
    """The ConfigMap's desired state and the Secret's passwords and header values, joined per team."""
    with open(state_path) as state_file, open(secrets_path) as secrets_file:
        state, secrets = json.load(state_file), json.load(secrets_file)
    teams = []
    for team in state["teams"]:
        name, limit = team["name"], team["limit"]
        datasource = {**state["datasource"], "secureJsonData": secrets["datasources"][name]}
        template = state["dashboards"][UNLIMITED if limit is None else LIMITED]
        members = {login: secrets["passwords"][login] for login in team.get("members", [])}
        teams.append(TeamView(name, secrets["passwords"][name], datasource, fill(template, name, limit), members))
    return DesiredState(state["admin"], secrets["admin"], teams, state.get("checks", []))


def tls_context(cafile: str) -> ssl.SSLContext:
    """Trust the stack's own self-signed certificate, and only it, strictly (RFC 5280 checks, as Python 3.13's default
    context does whatever the image's Python): it names localhost for this very call."""
    context = ssl.create_default_context(cafile=cafile)
    context.verify_flags |= ssl.VERIFY_X509_STRICT
    return context


class Grafana:
    """Grafana's HTTP API as its server admin, over the pod's loopback."""

    def __init__(self, url: str, user: str, admin_password: str, *, cafile: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.user = user
        token = base64.b64encode(f"{user}:{admin_password}".encode()).decode()
        self._auth = f"Basic {token}"
        self._tls = tls_context(cafile) if cafile else None

    def call(self, method: str, path: str, body: object = None, *, org: int | None = None) -> Any:
        headers = {"Authorization": self._auth, "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if org is not None:
            headers[ORG_HEADER] = str(org)
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30, context=self._tls) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as error:
            raise GrafanaError(error.code, method, path, error.read().decode(errors="replace")) from error
        return json.loads(text) if text else None

    def wait_healthy(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.call("GET", "/api/health")
                return
            except (OSError, GrafanaError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(2)


def ensure_org(grafana: Grafana, name: str, admin: str) -> int:
    """The team's organisation, with the server admin in it (409 when it already is), to act there."""
    try:
        org = int(grafana.call("POST", "/api/orgs", {"name": name})["orgId"])
    except GrafanaError as error:
        if error.status != 409:
            raise
        org = int(grafana.call("GET", f"/api/orgs/name/{name}")["id"])
    try:
        grafana.call("POST", f"/api/orgs/{org}/users", {"loginOrEmail": admin, "role": "Admin"})
    except GrafanaError as error:
        if error.status != 409:
            raise
    return org


def ensure_viewer(grafana: Grafana, org: int, login: str, password: str) -> int:
    """The team's login: a member of its own organisation only, as Viewer, with the stack's password."""
    body = {"name": login, "login": login, "email": f"{login}@team-views.invalid", "password": password, "OrgId": org}
    try:
        user = int(grafana.call("POST", "/api/admin/users", body)["id"])
    except GrafanaError as error:
        if error.status != 412:
            raise
        user = int(grafana.call("GET", f"/api/users/lookup?loginOrEmail={login}")["id"])
        grafana.call("PUT", f"/api/admin/users/{user}/password", {"password": password})
    grafana.call("PATCH", f"/api/orgs/{org}/users/{user}", {"role": VIEWER})
    return user


def ensure_datasource(grafana: Grafana, org: int, datasource: dict[str, Any]) -> None:
    try:
        grafana.call("POST", "/api/datasources", datasource, org=org)
    except GrafanaError as error:
        if error.status != 409:
            raise
        grafana.call("PUT", f"/api/datasources/uid/{datasource['uid']}", datasource, org=org)


def ensure_dashboard(grafana: Grafana, org: int, dashboard: dict[str, Any]) -> None:
    """The team's dashboard, and its organisation's home page."""
    grafana.call("POST", "/api/dashboards/db", {"dashboard": {**dashboard, "id": None}, "overwrite": True}, org=org)
    grafana.call("PUT", "/api/org/preferences", {"homeDashboardUID": dashboard["uid"]}, org=org)


def reconcile(grafana: Grafana, state: DesiredState) -> dict[str, int]:
    """Each team's organisation id, after making it hold the team's login, data source and dashboard."""
    orgs = {}
    for team in state.teams:
        org = ensure_org(grafana, team.name, grafana.user)
        ensure_viewer(grafana, org, team.name, team.password)
        for login, password in sorted(team.members.items()):
            ensure_viewer(grafana, org, login, password)
        ensure_datasource(grafana, org, team.datasource)
        ensure_dashboard(grafana, org, team.dashboard)
        orgs[team.name] = org
    return orgs


def missing_series(team: TeamView, checks: list[dict[str, str]]) -> list[str]:
    """What the team's data source gets nothing for, asked as Grafana asks it (its URL, header and value): an empty
    panel explained in the reconciler's log, not guessed at."""
    source = team.datasource
    header = {source["jsonData"]["httpHeaderName1"]: source["secureJsonData"]["httpHeaderValue1"]}
    problems = []
    for check in checks:
        query = urllib.parse.urlencode({"query": check["query"]})
        request = urllib.request.Request(f"{source['url']}/api/v1/query?{query}", headers=header)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                found = json.loads(response.read())["data"]["result"]
        except (OSError, ValueError, KeyError) as error:
            problems.append(f"{team.name}: {check['query']}: the data source does not answer ({error})")
            continue
        if not found:
            problems.append(f"{team.name}: {check['query']} returns nothing; it needs {check['needs']}")
    return problems

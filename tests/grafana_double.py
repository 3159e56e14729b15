"""A stand-in for the parts of Grafana's HTTP API the team views' reconciler calls, and its org rules.

Modelled on grafana/grafana read at v12.x (no registry here ships Grafana, and no snapshot of the
tag v13.2.0 could be had):
- POST /api/orgs: 409 "Organization name taken" for a name in use; Grafana makes the creator an
  Admin of it (orgimpl CreateWithMember), which this stand-in leaves out, so the reconciler's own
  membership step is what is tested (pkg/api/org.go);
- POST /api/admin/users with OrgId: a new user in that org alone, at auto_assign_org_role,
  when auto_assign_org is on; 412 when the login exists (pkg/api/admin_users.go,
  pkg/services/user/userimpl/user.go, orgimpl GetIDForNewUser);
- POST /api/orgs/<org>/users: 409 when already a member; PATCH .../users/<user> sets the role;
- the data source and dashboard calls act in the org of X-Grafana-Org-Id; for a user who is not a
  member, Grafana loads no org (OrgID -1) and org-scoped calls fail: refused here
  (pkg/services/authn/authnimpl/service.go);
- data sources: 409 on a taken uid (pkg/api/datasources.go AddDataSource), PUT by uid updates;
- a user sees only the data sources of an org they belong to (datasources/service/cache.go).
Only the server admin (basic auth) may call the admin routes.
"""

import base64
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from config.upstream import GRAFANA_ORG_HEADER
from tests.local_server import serve


@dataclass
class GrafanaWorld:
    admin_password: str
    admin_login: str = "admin"
    """`[security] admin_user` (Grafana's default: admin)."""
    orgs: dict[int, str] = field(default_factory=lambda: {1: "Main Org."})
    users: dict[int, dict[str, str]] = field(default_factory=dict)
    members: dict[tuple[int, int], str] = field(default_factory=dict)
    """(org, user) -> role."""
    datasources: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)
    dashboards: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)
    home: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.users[1] = {"login": self.admin_login, "password": self.admin_password}
        self.members[(1, 1)] = "Admin"

    def user_by_login(self, login: str) -> int | None:
        return next((uid for uid, user in self.users.items() if user["login"] == login), None)

    def orgs_of(self, login: str) -> dict[str, str]:
        """Org name -> role, for every org the user belongs to."""
        uid = self.user_by_login(login)
        return {self.orgs[org]: role for (org, user), role in self.members.items() if user == uid}

    def datasources_for(self, login: str) -> list[dict[str, Any]]:
        uid = self.user_by_login(login)
        orgs = {org for (org, user) in self.members if user == uid}
        return [ds for (org, _), ds in self.datasources.items() if org in orgs]


class _Handler(BaseHTTPRequestHandler):
    world: GrafanaWorld
    lock: threading.Lock

    def log_message(self, format: str, *args: object) -> None:
        del format, args

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def _serve(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.lock:
            status, payload = self._route(json.loads(body) if body else None)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _caller(self) -> int | None:
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        if scheme != "Basic":
            return None
        login, _, password = base64.b64decode(token).decode().partition(":")
        uid = self.world.user_by_login(login)
        return uid if uid is not None and self.world.users[uid]["password"] == password else None

    def _route(self, body: Any) -> tuple[int, Any]:  # noqa: PLR0911, PLR0912 - one route table
        world, path, method = self.world, self.path, self.command
        caller = self._caller()
        if path == "/api/health":
            return 200, {"database": "ok"}
        if caller is None:
            return 401, {"message": "Unauthorized"}
        if caller != 1:
            return 403, {"message": "Permission denied"}
        org_header = self.headers.get(GRAFANA_ORG_HEADER)
        org = int(org_header) if org_header else 1
        if (org, caller) not in world.members:
            return 401, {"message": "user is not a member of the organization"}
        parts = path.split("?")[0].strip("/").split("/")
        if method == "POST" and path == "/api/orgs":
            if body["name"] in world.orgs.values():
                return 409, {"message": "Organization name taken"}
            new = max(world.orgs) + 1
            world.orgs[new] = body["name"]
            return 200, {"message": "Organization created", "orgId": new}
        if method == "GET" and parts[:3] == ["api", "orgs", "name"]:
            found = [oid for oid, name in world.orgs.items() if name == parts[3]]
            return (200, {"id": found[0], "name": parts[3]}) if found else (404, {"message": "not found"})
        if method == "POST" and len(parts) == 4 and parts[:2] == ["api", "orgs"] and parts[3] == "users":
            target, uid = int(parts[2]), world.user_by_login(body["loginOrEmail"])
            if uid is None or target not in world.orgs:
                return 404, {"message": "not found"}
            if (target, uid) in world.members:
                return 409, {"message": "User is already member of this organization"}
            world.members[(target, uid)] = body["role"]
            return 200, {"message": "User added to organization"}
        if method == "PATCH" and len(parts) == 5 and parts[:2] == ["api", "orgs"]:
            key = (int(parts[2]), int(parts[4]))
            if key not in world.members:
                return 404, {"message": "not found"}
            world.members[key] = body["role"]
            return 200, {"message": "Organization user updated"}
        if method == "POST" and path == "/api/admin/users":
            if world.user_by_login(body["login"]) is not None:
                return 412, {"message": "User already exists"}
            if body.get("OrgId") not in world.orgs:
                return 400, {"message": "organization not found"}
            uid = max(world.users) + 1
            world.users[uid] = {"login": body["login"], "password": body["password"]}
            world.members[(body["OrgId"], uid)] = "Viewer"  # auto_assign_org_role
            return 200, {"id": uid, "message": "User created"}
        if method == "GET" and path.startswith("/api/users/lookup?loginOrEmail="):
            uid = world.user_by_login(path.split("=", 1)[1])
            return (200, {"id": uid}) if uid is not None else (404, {"message": "user not found"})
        if method == "PUT" and parts[:3] == ["api", "admin", "users"] and parts[4] == "password":
            world.users[int(parts[3])]["password"] = body["password"]
            return 200, {"message": "User password updated"}
        if method == "POST" and path == "/api/datasources":
            if (org, body["uid"]) in world.datasources:
                return 409, {"message": "data source with the same uid already exists"}
            world.datasources[(org, body["uid"])] = body
            return 200, {"message": "Datasource added"}
        if method == "PUT" and parts[:3] == ["api", "datasources", "uid"]:
            world.datasources[(org, parts[3])] = body
            return 200, {"message": "Datasource updated"}
        if method == "POST" and path == "/api/dashboards/db":
            world.dashboards[(org, body["dashboard"]["uid"])] = body["dashboard"]
            return 200, {"status": "success"}
        if method == "PUT" and path == "/api/org/preferences":
            world.home[org] = body["homeDashboardUID"]
            return 200, {"message": "Preferences updated"}
        return 404, {"message": "Not found"}


@contextmanager
def grafana_double(world: GrafanaWorld, *, tls: tuple[Path, Path] | None = None) -> Iterator[str]:
    """The stand-in at the URL yielded; `tls` (certificate, key) serves it over HTTPS at localhost, as Grafana does
    with [server] protocol https."""
    with serve(type("Handler", (_Handler,), {"world": world, "lock": threading.Lock()}), tls=tls) as url:
        yield url

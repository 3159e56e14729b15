"""A small client for the lab's API server: requests, server-side apply, dry runs, impersonation, watches.

Standard library only, so the lab's own processes and the tests share one client with no
dependency. Paths come from the API server's discovery, as kubectl finds them, so any kind
it serves (KAI's CRDs included) is addressed the same way.
"""

import http.client
import json
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Json = dict[str, Any]


def integral(value: Any) -> Any:
    """Whole floats as ints, at any depth: Pulumi's wire format carries every number as a double
    (google.protobuf.Struct), and pulumi-kubernetes types them by the schema again; the API server refuses
    `65534.0` for an int64."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integral(v) for v in value]
    return value


class ApiError(Exception):
    """A request the API server answered with an error Status: its code, reason and message."""

    def __init__(self, code: int, status: Json) -> None:
        self.code = code
        self.status = status
        self.reason = str(status.get("reason", ""))
        self.message = str(status.get("message", status))
        super().__init__(f"{code} {self.reason}: {self.message}")


@dataclass(frozen=True)
class Credentials:
    server: str
    """https://host:port"""
    ca: Path
    certificate: Path
    key: Path


@dataclass(frozen=True)
class Resource:
    path: str
    """/api/v1 or /apis/<group>/<version>"""
    plural: str
    namespaced: bool
    kind: str


@dataclass
class Kube:
    """One identity's view of the API server; `as_user` impersonates (with `as_groups`), as a test acts for the
    tenant's syncer or KAI's binder."""

    credentials: Credentials
    as_user: str | None = None
    as_groups: Sequence[str] = ()
    _local: threading.local = field(default_factory=threading.local, repr=False)
    _discovery: dict[tuple[str, str], Resource] = field(default_factory=dict, repr=False)

    def impersonating(self, user: str, groups: Sequence[str] = ()) -> "Kube":
        return Kube(self.credentials, user, tuple(groups), _discovery=self._discovery)

    def _context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.credentials.ca))
        context.load_cert_chain(str(self.credentials.certificate), str(self.credentials.key))
        return context

    def _connection(self, timeout: float) -> http.client.HTTPSConnection:
        url = urllib.parse.urlsplit(self.credentials.server)
        return http.client.HTTPSConnection(url.hostname or "", url.port, context=self._context(), timeout=timeout)

    def _headers(self, content_type: str) -> dict[str, str]:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        if self.as_user:
            headers["Impersonate-User"] = self.as_user
        return headers

    def request(self, method: str, path: str, body: Any = None, **options: Any) -> Json:
        """The decoded answer; an error Status raises ApiError. A 429 (the API server's own back-pressure, or a
        resource whose storage is starting) is retried, as client-go retries it."""
        for _ in range(40):
            try:
                return self._request(method, path, body, **options)
            except ApiError as error:
                if error.code != 429:
                    raise
                time.sleep(0.5)
        return self._request(method, path, body, **options)

    def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        timeout: float = 60,
    ) -> Json:
        target = path + ("?" + urllib.parse.urlencode(query) if query else "")
        payload = None if body is None else (body if isinstance(body, bytes) else json.dumps(integral(body)).encode())
        connection = getattr(self._local, "connection", None)
        for attempt in range(2):
            if connection is None:
                connection = self._connection(timeout)
                self._local.connection = connection
            try:
                connection.putrequest(method, target)
                for name, value in self._headers(content_type).items():
                    connection.putheader(name, value)
                for group in self.as_groups:
                    connection.putheader("Impersonate-Group", group)
                connection.putheader("Content-Length", str(len(payload or b"")))
                connection.endheaders(payload)
                response = connection.getresponse()
                data = response.read()
                break
            except (http.client.HTTPException, ConnectionError, OSError):
                connection.close()
                connection = self._local.connection = None
                if attempt:
                    raise
        try:
            decoded: Json = json.loads(data) if data else {}
        except json.JSONDecodeError:
            decoded = {"text": data.decode(errors="replace")}
        if response.status >= 400:
            if "text" in decoded:
                decoded = {"reason": "NotFound" if response.status == 404 else "", "message": decoded["text"].strip()}
            raise ApiError(response.status, decoded)
        return decoded

    # Discovery and paths.

    def resource(self, api_version: str, kind: str) -> Resource:
        key = (api_version, kind)
        if key not in self._discovery:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            for entry in self.request("GET", base).get("resources", []):
                if "/" not in entry["name"]:
                    found = Resource(base, entry["name"], entry["namespaced"], entry["kind"])
                    self._discovery[(api_version, entry["kind"])] = found
            if key not in self._discovery:
                raise ApiError(404, {"reason": "NotFound", "message": f"{kind} is not served at {api_version}"})
        return self._discovery[key]

    def forget_discovery(self) -> None:
        """After CRDs come or go."""
        self._discovery.clear()

    def path(self, api_version: str, kind: str, namespace: str | None = None, name: str | None = None) -> str:
        found = self.resource(api_version, kind)
        path = found.path
        if found.namespaced and namespace:
            path += f"/namespaces/{namespace}"
        path += f"/{found.plural}"
        return f"{path}/{name}" if name else path

    def object_path(self, obj: Mapping[str, Any], *, named: bool = True) -> str:
        meta = obj.get("metadata") or {}
        return self.path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta.get("name") if named else None)

    # Verbs.

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Json:
        return self.request("GET", self.path(api_version, kind, namespace, name))

    def find(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Json | None:
        try:
            return self.get(api_version, kind, name, namespace)
        except ApiError as error:
            if error.code == 404:
                return None
            raise

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, *, selector: str | None = None
    ) -> list[Json]:
        query = {"labelSelector": selector} if selector else None
        return list(self.request("GET", self.path(api_version, kind, namespace), query=query).get("items", []))

    def create(self, obj: Mapping[str, Any], *, dry_run: bool = False) -> Json:
        query = {"dryRun": "All"} if dry_run else None
        return self.request("POST", self.object_path(obj, named=False), obj, query=query)

    def apply(
        self, obj: Mapping[str, Any], *, manager: str = "gpu-tenancy-lab", subresource: str = "", dry_run: bool = False
    ) -> Json:
        """Server-side apply, forcing conflicts (as pulumi-kubernetes' Patch resources and `kubectl apply
        --server-side --force-conflicts` do)."""
        query = {"fieldManager": manager, "force": "true"}
        if dry_run:
            query["dryRun"] = "All"
        path = self.object_path(obj) + (f"/{subresource}" if subresource else "")
        return self.request("PATCH", path, obj, query=query, content_type="application/apply-patch+yaml")

    def patch(self, obj: Mapping[str, Any], patch: Any, *, subresource: str = "", kind: str = "merge") -> Json:
        path = self.object_path(obj) + (f"/{subresource}" if subresource else "")
        return self.request("PATCH", path, patch, content_type=f"application/{kind}-patch+json")

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        grace_seconds: int | None = None,
        missing_ok: bool = True,
    ) -> None:
        body: Json = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        try:
            self.request("DELETE", self.path(api_version, kind, namespace, name), body)
        except ApiError as error:
            if not (missing_ok and error.code == 404):
                raise

    def watch(
        self, path: str, resource_version: str, *, timeout_seconds: int = 300, selector: str | None = None
    ) -> Iterator[Json]:
        """Events after `resource_version` until the server ends the watch; a connection of its own."""
        query = {"watch": "1", "resourceVersion": resource_version, "timeoutSeconds": str(timeout_seconds)}
        if selector:
            query["labelSelector"] = selector
        connection = self._connection(timeout_seconds + 30)
        try:
            connection.request(
                "GET", f"{path}?{urllib.parse.urlencode(query)}", headers=self._headers("application/json")
            )
            response = connection.getresponse()
            if response.status >= 400:
                raise ApiError(response.status, json.loads(response.read() or b"{}"))
            for line in response:
                if line.strip():
                    yield json.loads(line)
        finally:
            connection.close()

"""A stand-in Kubernetes API server on 127.0.0.1, serving what the gang controller uses and nothing more.

Modelled on the API server's REST semantics (kubernetes/apiserver pkg/endpoints, pkg/storage/cacher
@v0.36.0): lists carry a resourceVersion; a watch from it streams ADDED, MODIFIED and DELETED
as JSON lines and ends at timeoutSeconds; a watch from a version older than the server
still keeps answers 410 Gone (here after `expire()`); a create of an existing name is 409;
a delete of a missing one 404; a list of a resource not served (a CRD not installed) 404.
Label selectors: `key`, `key=value`, comma-separated. Every request needs the bearer token.
"""

import itertools
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.local_server import serve

Json = dict[str, Any]
TOKEN = "stand-in-token"
POD_GROUPS = "/apis/scheduling.run.ai/v2alpha2"


def _selected(obj: Json, selector: str) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    for term in filter(None, selector.split(",")):
        key, _, value = term.partition("=")
        if key not in labels or (value and labels[key] != value):
            return False
    return True


class Store:
    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.version = itertools.count(1)
        self.current = 0
        self.oldest_watchable = 0
        self.namespaces: dict[str, Json] = {}
        self.pods: dict[tuple[str, str], Json] = {}
        self.pod_groups: dict[tuple[str, str], Json] = {}
        self.events: list[Json] = []
        self.pod_history: list[tuple[int, str, Json]] = []
        self.serves_pod_groups = True
        self.watches_open = True
        self.requests: list[tuple[str, str]] = []

    def _stamp(self, obj: Json) -> Json:
        self.current = next(self.version)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.current)
        return obj

    def add_namespace(self, name: str, labels: dict[str, str] | None = None) -> None:
        with self.lock:
            self.namespaces[name] = self._stamp({"metadata": {"name": name, "labels": {**(labels or {})}}})

    def put_pod(self, pod: Json) -> None:
        with self.lock:
            meta = pod["metadata"]
            key = (meta["namespace"], meta["name"])
            kind = "MODIFIED" if key in self.pods else "ADDED"
            meta.setdefault("uid", f"uid-{meta['name']}")
            self.pods[key] = self._stamp(json.loads(json.dumps(pod)))
            self.pod_history.append((self.current, kind, self.pods[key]))
            self.lock.notify_all()

    def delete_pod(self, namespace: str, name: str) -> None:
        with self.lock:
            pod = self.pods.pop((namespace, name))
            self._stamp(pod)
            self.pod_history.append((self.current, "DELETED", pod))
            self.lock.notify_all()

    def set_pod_group_status(self, namespace: str, name: str, status: Json) -> None:
        with self.lock:
            self.pod_groups[(namespace, name)]["status"] = status
            self._stamp(self.pod_groups[(namespace, name)])

    def expire(self) -> None:
        """Compact the watch history: every watch from an older version ends with 410 Gone."""
        with self.lock:
            self.oldest_watchable = self.current + 1
            self.lock.notify_all()

    def end_watches(self) -> None:
        """End every open watch now, as an API server going away does, and refuse new ones until reopened."""
        with self.lock:
            self.watches_open = False
            self.lock.notify_all()

    def pods_after(self, version: int) -> list[tuple[int, str, Json]]:
        return [entry for entry in self.pod_history if entry[0] > version]


class _Handler(BaseHTTPRequestHandler):
    store: Store
    protocol_version = "HTTP/1.0"

    def log_message(self, *args: Any) -> None:
        return

    def _reply(self, status: int, body: Json) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _status(self, code: int, reason: str) -> None:
        self._reply(code, {"kind": "Status", "status": "Failure", "code": code, "reason": reason})

    def _authorised(self) -> bool:
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._status(401, "Unauthorized")
            return False
        return True

    def _body(self) -> Json:
        length = int(self.headers.get("Content-Length", 0))
        result: Json = json.loads(self.rfile.read(length))
        return result

    def do_GET(self) -> None:
        if not self._authorised():
            return
        url = urlsplit(self.path)
        query = {key: values[0] for key, values in parse_qs(url.query).items()}
        store = self.store
        store.requests.append(("GET", url.path))
        selector = query.get("labelSelector", "")
        if url.path == "/api/v1/pods" and query.get("watch") == "1":
            self._watch(int(query["resourceVersion"]), float(query.get("timeoutSeconds", "5")), selector)
            return
        with store.lock:
            if url.path == "/api/v1/namespaces":
                items = [n for n in store.namespaces.values() if _selected(n, selector)]
            elif url.path == "/api/v1/pods":
                items = [p for p in store.pods.values() if _selected(p, selector)]
            elif url.path == f"{POD_GROUPS}/podgroups":
                if not store.serves_pod_groups:
                    self._status(404, "NotFound")
                    return
                items = [g for g in store.pod_groups.values() if _selected(g, selector)]
            else:
                self._status(404, "NotFound")
                return
            version = store.current
        self._reply(200, {"kind": "List", "metadata": {"resourceVersion": str(version)}, "items": items})

    def _watch(self, since: int, timeout: float, selector: str) -> None:
        store = self.store
        if since < store.oldest_watchable:
            self._status(410, "Expired")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        sent = since
        deadline = threading.Event()
        threading.Timer(timeout, deadline.set).start()
        while not deadline.is_set() and store.watches_open:
            with store.lock:
                if sent < store.oldest_watchable:
                    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}
                    self.wfile.write(json.dumps(gone).encode() + b"\n")
                    return
                pending = store.pods_after(sent)
                if not pending:
                    store.lock.wait(0.05)
                    continue
            for version, kind, pod in pending:
                if _selected(pod, selector):
                    self.wfile.write(json.dumps({"type": kind, "object": pod}).encode() + b"\n")
                    self.wfile.flush()
                sent = version

    def do_POST(self) -> None:
        if not self._authorised():
            return
        parts = urlsplit(self.path).path.strip("/").split("/")
        body = self._body()
        store = self.store
        store.requests.append(("POST", self.path))
        with store.lock:
            if parts[:4] == ["api", "v1", "namespaces", parts[3]] and parts[4:] == ["events"]:
                store.events.append(body)
                self._reply(201, body)
                return
            if self.path.startswith(f"{POD_GROUPS}/namespaces/") and parts[-1] == "podgroups":
                namespace = parts[-2]
                if not store.serves_pod_groups or namespace not in store.namespaces:
                    self._status(404, "NotFound")
                    return
                key = (namespace, body["metadata"]["name"])
                if key in store.pod_groups:
                    self._status(409, "AlreadyExists")
                    return
                body["metadata"]["namespace"] = namespace
                store.pod_groups[key] = store._stamp(body)
                self._reply(201, body)
                return
        self._status(404, "NotFound")

    def do_DELETE(self) -> None:
        if not self._authorised():
            return
        parts = urlsplit(self.path).path.strip("/").split("/")
        store = self.store
        store.requests.append(("DELETE", self.path))
        with store.lock:
            if self.path.startswith(f"{POD_GROUPS}/namespaces/") and parts[-2] == "podgroups":
                found = store.pod_groups.pop((parts[-3], parts[-1]), None)
                if found is None:
                    self._status(404, "NotFound")
                else:
                    self._reply(200, {"kind": "Status", "status": "Success"})
                return
        self._status(404, "NotFound")


@contextmanager
def serving(store: Store) -> Iterator[str]:
    """The server's URL while the block runs."""
    with serve(type("Handler", (_Handler,), {"store": store})) as url:
        yield url

"""The loop: list, then watch the tenants' pods, and after every change make the PodGroups match the gangs.

Level-triggered: each resync lists everything again and recomputes every gang, so a
missed event, a restart or an expired watch costs at most one more list. Between two,
a pod's event recomputes its own gang only. Of a pod it asks for the metadata alone
(all gang_pod reads), so no pod's spec, however large, reaches it. What is kept is small
and grows with gangs, not pods: of a pod, only a gang member's few fields (GangPod), nothing of any other pod
(a thousand teams' CoreDNS pods included); of a PodGroup it made, its name, labels, spec and
scheduling conditions; of any other in a tenant namespace, only whether it waits. Tenant namespaces,
PodGroups and Queues are listed again at each resync, and each team's queue view written then
(queue_view.py); pods are kept current by the watch.
"""

import json
import logging
import os
import signal
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .gangs import (
    FIELD_MANAGER,
    OWNED,
    SYNCED_POD_LABEL,
    TENANT_LABEL,
    GangPod,
    Key,
    Memory,
    gang_pod,
    gangs_of,
    made_here,
    plan,
    tenants_of,
)
from .kube import JSON, METADATA, METADATA_LIST, Api, ApiError, Expired
from .queue_view import VIEW_CONFIGMAP, Waiting, configmap_data, fair_shares, view, waiting_of

PODS = "/api/v1/pods"
NAMESPACES = "/api/v1/namespaces"
POD_GROUPS = "/apis/scheduling.run.ai/v2alpha2/podgroups"
POD_GROUPS_IN = "/apis/scheduling.run.ai/v2alpha2/namespaces"
QUEUES = "/apis/scheduling.run.ai/v2/queues"
VIEW_LABELS = {OWNED[0]: OWNED[1]}

PAGE = 250
"""Pods per list request (the API server's chunking, `limit` and `continue`)."""

log = logging.getLogger("gangcontrol")


@dataclass(frozen=True)
class Settings:
    grace_seconds: float = 120.0
    """How long a PodGroup outlives its last pod: a job's pods may be replaced one by one."""
    resync_seconds: int = 30
    """How often everything is listed again (and the longest a watch runs)."""
    backoff_seconds: float = 5.0
    heartbeat_file: str = ""
    """Touched after every list and every event: the pod's liveness probe reads its age."""
    fair_share_url: str = ""
    """KAI's scheduler's /metrics, where the queues' fair shares are (queue_view.py); empty: not known."""
    view_refresh_seconds: float = 300.0
    """An unchanged queue view is written again this often, so its `checked` time shows the controller is alive."""

    @classmethod
    def from_environment(cls) -> "Settings":
        return cls(
            grace_seconds=float(os.environ.get("GANGS_GRACE_SECONDS", cls.grace_seconds)),
            resync_seconds=int(os.environ.get("GANGS_RESYNC_SECONDS", cls.resync_seconds)),
            heartbeat_file=os.environ.get("GANGS_HEARTBEAT_FILE", ""),
            fair_share_url=os.environ.get("GANGS_FAIR_SHARE_URL", ""),
        )


def _key(obj: dict[str, Any]) -> Key:
    return (obj["metadata"]["namespace"], obj["metadata"]["name"])


def slim(pod_group: dict[str, Any]) -> dict[str, Any]:
    """What this program reads of a PodGroup once it knows it made it (plan, is_empty, scheduling_conditions)."""
    metadata = pod_group.get("metadata") or {}
    status = pod_group.get("status") or {}
    return {
        "metadata": {k: metadata[k] for k in ("name", "namespace", "labels") if k in metadata},
        "spec": pod_group.get("spec") or {},
        "status": {"schedulingConditions": status.get("schedulingConditions") or []},
    }


class Controller:
    def __init__(self, api: Api, settings: Settings, clock: Callable[[], float] = time.monotonic) -> None:
        self.api = api
        self.settings = settings
        self.clock = clock
        self.memory = Memory()
        self.tenants: dict[str, Any] = {}
        self.members: dict[Key, GangPod] = {}
        """(namespace, pod) -> the pod as a gang member; other pods are not kept."""
        self.by_gang: dict[Key, set[Key]] = {}
        """(namespace, group) -> its members' keys."""
        self.pod_groups: dict[Key, dict[str, Any]] = {}
        self.waiting: dict[str, list[Waiting]] = {}
        """Tenant namespace -> its groups KAI has not started, as of the last list."""
        self.views: dict[str, tuple[str, float]] = {}
        """Tenant namespace -> (its queue view as last written, when)."""

    def relist(self) -> str:
        """Everything afresh; the pods' resourceVersion to watch from."""
        namespaces = self.api.request("GET", NAMESPACES, labelSelector=TENANT_LABEL)
        self.tenants = tenants_of(namespaces.get("items") or [])
        self.members, self.by_gang = {}, {}
        listing: dict[str, Any] = {}
        for pod in self._pages(PODS, listing, METADATA_LIST, labelSelector=SYNCED_POD_LABEL):
            self._remember(_key(pod), gang_pod(pod, self.tenants))
        version = str(listing["resourceVersion"])
        self.pod_groups = self._list_pod_groups()
        self.reconcile()
        self.publish()
        return version

    def _pages(self, path: str, listing: dict[str, Any], accept: str = JSON, **query: str) -> Iterator[dict[str, Any]]:
        """Every item, one page at a time of one consistent snapshot, so a list costs a page's memory, not the
        whole cluster's; `listing` gets the last page's metadata (its resourceVersion)."""
        query = {**query, "limit": str(PAGE)}
        while True:
            page = self.api.request("GET", path, accept=accept, **query)
            yield from page.pop("items", None) or []
            listing.clear()
            listing.update(page.get("metadata") or {})
            if not listing.get("continue"):
                return
            query["continue"] = listing["continue"]

    def _remember(self, key: Key, member: GangPod | None) -> set[Key]:
        """Keep the pod if it is a gang member (forget it if not); the gangs it left or joined."""
        touched = set()
        old = self.members.pop(key, None)
        if old is not None:
            touched.add(old.key)
            self.by_gang.get(old.key, set()).discard(key)
            if not self.by_gang.get(old.key):
                self.by_gang.pop(old.key, None)
        if member is not None:
            self.members[key] = member
            self.by_gang.setdefault(member.key, set()).add(key)
            touched.add(member.key)
        return touched

    def _list_pod_groups(self) -> dict[Key, dict[str, Any]]:
        """Every PodGroup, a page at a time: this program's own are kept (slim); of the others in tenant
        namespaces, only whether they wait (self.waiting)."""
        own, self.waiting = {}, {}
        try:
            for group in self._pages(POD_GROUPS, {}):
                namespace = group["metadata"]["namespace"]
                labels = group["metadata"].get("labels") or {}
                if labels.get(OWNED[0]) == OWNED[1] and made_here(group):
                    own[_key(group)] = slim(group)
                tenant = self.tenants.get(namespace)
                waiting = None if tenant is None else waiting_of(group, tenant)
                if waiting is not None:
                    self.waiting.setdefault(namespace, []).append(waiting)
        except ApiError as error:
            if error.status != 404:
                raise
            log.warning("KAI's PodGroup API is not served yet; gangs wait")
        return own

    def apply(self, event: dict[str, Any]) -> set[Key]:
        """The watch's event; the gangs it touched."""
        kind, pod = event.get("type"), event.get("object") or {}
        if kind in ("ADDED", "MODIFIED"):
            return self._remember(_key(pod), gang_pod(pod, self.tenants))
        if kind == "DELETED":
            return self._remember(_key(pod), None)
        return set()

    def reconcile(self, only: set[Key] | None = None) -> None:
        """Make the PodGroups match the gangs: every one, or `only` these (after a pod's event)."""
        keys = set(self.by_gang) | set(self.pod_groups) if only is None else only
        members = [self.members[pod] for key in keys for pod in self.by_gang.get(key, ())]
        existing = {key: self.pod_groups[key] for key in keys if key in self.pod_groups}
        todo = plan(
            gangs_of(members, self.tenants),
            existing,
            self.memory,
            now=self.clock(),
            grace_seconds=self.settings.grace_seconds,
        )
        for group in todo.create:
            self._create(group)
        for key, patch in todo.patch:
            self._patch(key, patch)
        for namespace, name in todo.delete:
            self._delete(namespace, name)
        for event in todo.events:
            self._tell(event)

    def _create(self, group: dict[str, Any]) -> None:
        namespace, name = _key(group)
        try:
            self.pod_groups[(namespace, name)] = slim(
                self.api.request("POST", f"{POD_GROUPS_IN}/{namespace}/podgroups", group, fieldManager=FIELD_MANAGER)
            )
            log.info("created PodGroup %s/%s", namespace, name)
        except ApiError as error:
            if error.status != 409:
                log.error("could not create PodGroup %s/%s: %s", namespace, name, error)
                return
            # Adopted only if this program made it (an earlier run, before a restart): never another's.
            found = self.api.request("GET", f"{POD_GROUPS_IN}/{namespace}/podgroups/{name}")
            if made_here(found):
                self.pod_groups[(namespace, name)] = slim(found)

    def _patch(self, key: Key, patch: dict[str, Any]) -> None:
        namespace, name = key
        try:
            self.pod_groups[key] = slim(
                self.api.request(
                    "PATCH", f"{POD_GROUPS_IN}/{namespace}/podgroups/{name}", patch, fieldManager=FIELD_MANAGER
                )
            )
            log.info("PodGroup %s/%s: %s", namespace, name, json.dumps(patch, sort_keys=True))
        except ApiError as error:
            log.error("could not change PodGroup %s/%s: %s", namespace, name, error)

    def _delete(self, namespace: str, name: str) -> None:
        try:
            self.api.request("DELETE", f"{POD_GROUPS_IN}/{namespace}/podgroups/{name}")
            log.info("deleted PodGroup %s/%s, which no pod uses any more", namespace, name)
        except ApiError as error:
            if error.status != 404:
                log.error("could not delete PodGroup %s/%s: %s", namespace, name, error)
                return
        self.pod_groups.pop((namespace, name), None)

    def _tell(self, event: dict[str, Any]) -> None:
        try:
            self.api.request("POST", f"/api/v1/namespaces/{event['metadata']['namespace']}/events", event)
        except ApiError as error:
            log.warning("could not record an event: %s", error)

    def _fair_shares(self) -> tuple[dict[str, float] | None, str]:
        """The queues' fair shares from KAI's scheduler, or None and why not."""
        if not self.settings.fair_share_url:
            return None, "the controller was given no address of KAI's scheduler"
        try:
            with urllib.request.urlopen(self.settings.fair_share_url, timeout=5) as response:
                return fair_shares(response.read().decode()), ""
        except (OSError, ValueError) as error:
            return None, f"KAI's scheduler did not answer: {error}"

    def publish(self) -> None:
        """Each tenant's queue view, into a ConfigMap in its namespace that its syncer copies into the vCluster;
        written when it changed, or every view_refresh_seconds. A failure here leaves the gangs alone."""
        try:
            queues = {q["metadata"]["name"]: q for q in self.api.request("GET", QUEUES).get("items") or []}
        except (ApiError, OSError) as error:
            log.warning("could not read KAI's queues (%s); queue views wait", error)
            return
        shares, problem = self._fair_shares()
        now = self.clock()
        for namespace, tenant in sorted(self.tenants.items()):
            data = view(tenant, queues, shares, problem, self.waiting.get(namespace, []))
            text = json.dumps(data, sort_keys=True)
            last = self.views.get(namespace)
            if last is not None and last[0] == text and now - last[1] < self.settings.view_refresh_seconds:
                continue
            if self._write_view(namespace, data):
                self.views[namespace] = (text, now)

    def _write_view(self, namespace: str, data: dict[str, Any]) -> bool:
        checked = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        content = configmap_data(data, checked)
        path = f"/api/v1/namespaces/{namespace}/configmaps"
        try:
            try:
                patch = {"metadata": {"labels": VIEW_LABELS}, "data": content}
                self.api.request("PATCH", f"{path}/{VIEW_CONFIGMAP}", patch, fieldManager=FIELD_MANAGER)
            except ApiError as error:
                if error.status != 404:
                    raise
                metadata = {"name": VIEW_CONFIGMAP, "namespace": namespace, "labels": VIEW_LABELS}
                created = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": content}
                self.api.request("POST", path, created, fieldManager=FIELD_MANAGER)
            return True
        except (ApiError, OSError) as error:
            log.warning("could not write the queue view of %s: %s", namespace, error)
            return False

    def beat(self) -> None:
        """Alive: the loop came round (a list, or an event, at least once a resync)."""
        if self.settings.heartbeat_file:
            with open(self.settings.heartbeat_file, "w") as heartbeat:
                heartbeat.write(f"{time.time()}\n")

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                version = self.relist()
                self.beat()
                for event in self.api.watch(
                    PODS, version, self.settings.resync_seconds, accept=METADATA, labelSelector=SYNCED_POD_LABEL
                ):
                    touched = self.apply(event)
                    if touched:
                        self.reconcile(touched)
                    self.beat()
                    if stop.is_set():
                        return
            except Expired:
                log.info("the watch expired; listing again")
            except (ApiError, OSError) as error:
                log.error("the API server failed: %s; trying again", error)
                stop.wait(self.settings.backoff_seconds)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    Controller(Api.from_environment(), Settings.from_environment()).run(stop)

"""The loop: list, then watch the tenants' pods, and after every change make the PodGroups match the gangs.

Level-triggered: each resync lists everything again and recomputes every gang, so a
missed event, a restart or an expired watch costs at most one more list. Between two,
a pod's event recomputes its own gang only. Of a pod it asks for the metadata alone
(all gang_pod reads), so no pod's spec, however large, reaches it. What is kept is small
and grows with gangs, not pods: of a pod, only a gang member's few fields (GangPod), nothing of any other pod
(a thousand teams' CoreDNS pods included); of a PodGroup, its name, labels, spec and
scheduling conditions. Tenant namespaces and this program's PodGroups are listed again at
each resync; pods are kept current by the watch.
"""

import json
import logging
import os
import signal
import threading
import time
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

PODS = "/api/v1/pods"
NAMESPACES = "/api/v1/namespaces"
POD_GROUPS = "/apis/scheduling.run.ai/v2alpha2/podgroups"
POD_GROUPS_IN = "/apis/scheduling.run.ai/v2alpha2/namespaces"

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

    @classmethod
    def from_environment(cls) -> "Settings":
        return cls(
            grace_seconds=float(os.environ.get("GANGS_GRACE_SECONDS", cls.grace_seconds)),
            resync_seconds=int(os.environ.get("GANGS_RESYNC_SECONDS", cls.resync_seconds)),
            heartbeat_file=os.environ.get("GANGS_HEARTBEAT_FILE", ""),
        )


def _key(obj: dict[str, Any]) -> Key:
    return (obj["metadata"]["namespace"], obj["metadata"]["name"])


def slim(pod_group: dict[str, Any]) -> dict[str, Any]:
    """What this program reads of a PodGroup once it knows it made it (plan, is_empty, _conditions)."""
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

    def relist(self) -> str:
        """Everything afresh; the pods' resourceVersion to watch from."""
        namespaces = self.api.request("GET", NAMESPACES, labelSelector=TENANT_LABEL)
        self.tenants = tenants_of(namespaces.get("items") or [])
        self.members, self.by_gang = {}, {}
        listing: dict[str, Any] = {}
        for pod in self._pages(PODS, listing, METADATA_LIST, labelSelector=SYNCED_POD_LABEL):
            self._remember(_key(pod), gang_pod(pod, self.tenants))
        version = str(listing["resourceVersion"])
        self.pod_groups = self._own_pod_groups()
        self.reconcile()
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

    def _own_pod_groups(self) -> dict[Key, dict[str, Any]]:
        try:
            return {
                _key(group): slim(group)
                for group in self._pages(POD_GROUPS, {}, labelSelector=f"{OWNED[0]}={OWNED[1]}")
                if made_here(group)
            }
        except ApiError as error:
            if error.status != 404:
                raise
            log.warning("KAI's PodGroup API is not served yet; gangs wait")
            return {}

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

"""The loop: list, then watch the tenants' pods, and after every change make the PodGroups match the gangs.

Level-triggered: every pass recomputes what is needed from the state it holds, so a
missed event, a restart or an expired watch costs at most one more list. Tenant
namespaces and this program's PodGroups (with their scheduling conditions) are listed
again at each resync; pods are kept current by the watch.
"""

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .gangs import (
    FIELD_MANAGER,
    OWNED,
    SYNCED_POD_LABEL,
    TENANT_LABEL,
    Key,
    Memory,
    gang_pod,
    gangs_of,
    made_here,
    plan,
    tenants_of,
)
from .kube import Api, ApiError, Expired

PODS = "/api/v1/pods"
NAMESPACES = "/api/v1/namespaces"
POD_GROUPS = "/apis/scheduling.run.ai/v2alpha2/podgroups"
POD_GROUPS_IN = "/apis/scheduling.run.ai/v2alpha2/namespaces"

log = logging.getLogger("gangcontrol")


@dataclass(frozen=True)
class Settings:
    grace_seconds: float = 120.0
    """How long a PodGroup outlives its last pod: a job's pods may be replaced one by one."""
    resync_seconds: int = 30
    """How often everything is listed again (and the longest a watch runs)."""
    backoff_seconds: float = 5.0

    @classmethod
    def from_environment(cls) -> "Settings":
        return cls(
            grace_seconds=float(os.environ.get("GANGS_GRACE_SECONDS", cls.grace_seconds)),
            resync_seconds=int(os.environ.get("GANGS_RESYNC_SECONDS", cls.resync_seconds)),
        )


def _key(obj: dict[str, Any]) -> Key:
    return (obj["metadata"]["namespace"], obj["metadata"]["name"])


class Controller:
    def __init__(self, api: Api, settings: Settings, clock: Callable[[], float] = time.monotonic) -> None:
        self.api = api
        self.settings = settings
        self.clock = clock
        self.memory = Memory()
        self.tenants: dict[str, Any] = {}
        self.pods: dict[Key, dict[str, Any]] = {}
        self.pod_groups: dict[Key, dict[str, Any]] = {}

    def relist(self) -> str:
        """Everything afresh; the pods' resourceVersion to watch from."""
        namespaces = self.api.request("GET", NAMESPACES, labelSelector=TENANT_LABEL)
        self.tenants = tenants_of(namespaces.get("items") or [])
        pods = self.api.request("GET", PODS, labelSelector=SYNCED_POD_LABEL)
        self.pods = {_key(pod): pod for pod in pods.get("items") or []}
        self.pod_groups = self._own_pod_groups()
        self.reconcile()
        return str(pods["metadata"]["resourceVersion"])

    def _own_pod_groups(self) -> dict[Key, dict[str, Any]]:
        try:
            listed = self.api.request("GET", POD_GROUPS, labelSelector=f"{OWNED[0]}={OWNED[1]}")
        except ApiError as error:
            if error.status != 404:
                raise
            log.warning("KAI's PodGroup API is not served yet; gangs wait")
            return {}
        return {_key(group): group for group in listed.get("items") or [] if made_here(group)}

    def apply(self, event: dict[str, Any]) -> None:
        kind, pod = event.get("type"), event.get("object") or {}
        if kind in ("ADDED", "MODIFIED"):
            self.pods[_key(pod)] = pod
        elif kind == "DELETED":
            self.pods.pop(_key(pod), None)

    def reconcile(self) -> None:
        members = [member for pod in self.pods.values() if (member := gang_pod(pod, self.tenants))]
        todo = plan(
            gangs_of(members, self.tenants),
            self.pod_groups,
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
            self.pod_groups[(namespace, name)] = self.api.request(
                "POST", f"{POD_GROUPS_IN}/{namespace}/podgroups", group, fieldManager=FIELD_MANAGER
            )
            log.info("created PodGroup %s/%s", namespace, name)
        except ApiError as error:
            if error.status != 409:
                log.error("could not create PodGroup %s/%s: %s", namespace, name, error)
                return
            # Adopted only if this program made it (an earlier run, before a restart): never another's.
            found = self.api.request("GET", f"{POD_GROUPS_IN}/{namespace}/podgroups/{name}")
            if made_here(found):
                self.pod_groups[(namespace, name)] = found

    def _patch(self, key: Key, patch: dict[str, Any]) -> None:
        namespace, name = key
        try:
            self.pod_groups[key] = self.api.request(
                "PATCH",
                f"{POD_GROUPS_IN}/{namespace}/podgroups/{name}",
                patch,
                fieldManager=FIELD_MANAGER,
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

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                version = self.relist()
                for event in self.api.watch(
                    PODS, version, self.settings.resync_seconds, labelSelector=SYNCED_POD_LABEL
                ):
                    self.apply(event)
                    self.reconcile()
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

"""A stand-in for KAI's operator, while the lab's engine runs: its operands' Deployments and kai-config's verdict.

The module proxy serves no github.com/NVIDIA/KAI-scheduler (docs/lab.md), so the operator the chart installs is
a KWOK pod that does nothing, and the program's KAI gate would wait for kai-config's Ready condition for ever.
This does, on the lab's API server, what the operator's reconcilers do, and no more, read at v0.16.8:

- for the Config `kai-config`, one Deployment per operand it deploys by default (`OPERANDS`), in the Config's
  `spec.namespace`, labelled `app` and `app.kubernetes.io/managed-by: kai-operator` and owned by the Config
  (pkg/operator/operands/common/common.go DeploymentForKAIConfig, ObjectForKAIConfig;
  pkg/operator/operands/deployable/deployable.go owner references);
- for each SchedulingShard, the scheduler's Deployment `<global.schedulerName>-<shard>`, owned by the shard
  (pkg/operator/operands/scheduler/resources_for_shard.go DeploymentName);
- on the Config, the conditions its status reconciler writes: Deployed, Available and Ready once every
  operand Deployment has all its replicas updated and is Available, DependenciesFulfilled, Reconciling False
  (pkg/operator/controller/status_reconciler/status_reconciler.go, common.go isControllerAvailable).

KWOK runs the Deployments' pods (so they turn Available); their images are named, never run. Neither the queue
nor the pod-group webhook is made: a Queue meets only its CRD's schema here.
"""

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from harness.lab.kube import ApiError, Kube

Json = dict[str, Any]
KAI = "kai.scheduler/v1"
CONFIG_NAME = "kai-config"
MANAGED_BY = {"app.kubernetes.io/managed-by": "kai-operator"}
OPERANDS = ("admission", "binder", "pod-grouper", "podgroup-controller", "queue-controller")
"""The operands deployed with KAI's defaults, by their Deployments' names (pkg/operator/operands/<operand>/
resources.go defaultResourceName @v0.16.8); node-scale-adjuster and Prometheus are off by default."""
FIELD_MANAGER = "kai-operator-lab-stand-in"


def _owner(obj: Mapping[str, Any]) -> Json:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _deployment(name: str, namespace: str, owner: Mapping[str, Any], version: str) -> Json:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**labels, **MANAGED_BY},
            "ownerReferences": [_owner(owner)],
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [{"name": name, "image": f"ghcr.io/kai-scheduler/kai-scheduler/{name}:{version}"}]
                },
            },
        },
    }


def _available(deployment: Mapping[str, Any]) -> bool:
    status = deployment.get("status") or {}
    if status.get("updatedReplicas", 0) != (deployment.get("spec") or {}).get("replicas"):
        return False
    return any(c["type"] == "Available" and c["status"] == "True" for c in status.get("conditions") or [])


def _conditions(existing: list[Json], generation: int, available: bool) -> list[Json]:
    """The status reconciler's conditions; a condition whose status and message stand keeps its time."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    wanted = [
        ("Deployed", "True", "Deployed", "Resources deployed"),
        (
            "Available",
            *(
                ("True", "Available", "System available")
                if available
                else ("False", "Available", "System not available")
            ),
        ),
        ("DependenciesFulfilled", "True", "DependenciesFulfilled", "Dependencies are fulfilled"),
        ("Ready", *(("True", "Ready", "System is ready") if available else ("False", "NotReady", "System not ready"))),
        ("Reconciling", "False", "Reconciled", "Reconciliation completed successfully"),
    ]
    by_type = {c["type"]: c for c in existing}
    conditions = []
    for kind, status, reason, message in wanted:
        old = by_type.get(kind)
        same = old is not None and (old["status"], old["message"], old.get("observedGeneration")) == (
            status,
            message,
            generation,
        )
        conditions.append(
            old
            if same and old is not None
            else {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": message,
                "observedGeneration": generation,
                "lastTransitionTime": now,
            }
        )
    return conditions


def reconcile(admin: Kube) -> None:
    """One pass of the operator's reconcilers over what the lab holds now."""
    try:
        config = admin.find(KAI, "Config", CONFIG_NAME)
    except ApiError as error:
        if error.code == 404:  # KAI's CRDs are not there (yet, or any more)
            admin.forget_discovery()
            return
        raise
    if config is None or config["metadata"].get("deletionTimestamp"):
        return
    spec = config.get("spec") or {}
    namespace = spec.get("namespace") or "kai-scheduler"
    version = (spec.get("global") or {}).get("tag") or "lab"
    scheduler_name = (spec.get("global") or {}).get("schedulerName") or "kai-scheduler"
    for name in OPERANDS:
        admin.apply(_deployment(name, namespace, config, version), manager=FIELD_MANAGER)
    for shard in admin.list(KAI, "SchedulingShard"):
        if not shard["metadata"].get("deletionTimestamp"):
            deployment = _deployment(f"{scheduler_name}-{shard['metadata']['name']}", namespace, shard, version)
            admin.apply(deployment, manager=FIELD_MANAGER)
    operands = admin.list("apps/v1", "Deployment", namespace, selector="app.kubernetes.io/managed-by=kai-operator")
    available = bool(operands) and all(_available(d) for d in operands)
    existing = (config.get("status") or {}).get("conditions") or []
    conditions = _conditions(existing, config["metadata"]["generation"], available)
    if conditions != existing:
        admin.patch(config, {"status": {"conditions": conditions}}, subresource="status")


@contextmanager
def standing_in(admin: Kube, interval: float = 1.0) -> Iterator[None]:
    """The stand-in, reconciling every `interval` seconds until the block ends. A failed pass (an object
    coming or going) is retried on the next, as the operator's controllers requeue."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(interval):
            try:
                reconcile(admin)
            except (ApiError, OSError):
                continue

    thread = threading.Thread(target=loop, name="kai-operator-stand-in", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()

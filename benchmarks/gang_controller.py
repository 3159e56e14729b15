"""What the gang controller holds and spends at a thousand teams: the real program against an in-process API.

For each size (teams, each with its CoreDNS pod and N gangs of four pods, as vCluster's syncer writes
them to the host), prints one Markdown row: pods listed, the memory the controller keeps after a full
list (tracemalloc, its own objects), the peak while listing, how long a full list and reconcile take,
and the mean time one pod event takes (apply and reconcile of its gang). The list measured is a resync's: the
PodGroups the first one created, each waiting as KAI marks it, listed back, and every team's queue view
written. The API answers lists page by page as the real one does with `limit` and `continue`, and takes every
create and patch.

Figures only: nothing here passes or fails. Its figure sizes the controller's memory request and limit
(components/gang_controller/component.py). Run it from the repository root:

    venv/bin/python -m benchmarks.gang_controller [--teams 100 1000] [--gangs 10]
"""

import argparse
import gc
import json
import platform
import random
import time
import tracemalloc
from typing import Any

from components.gang_controller.gangcontrol.run import NAMESPACES, POD_GROUPS, PODS, QUEUES, Controller, Settings

POD_BYTES_NOTE = "a synced pod here is about 3 KB of JSON, as vCluster 0.35 writes them (labels, annotations, spec)"


def _pod(team: str, name: str, gang: str | None, uid: int) -> dict[str, Any]:
    namespace = f"vcluster-{team}"
    labels = {
        "vcluster.loft.sh/managed-by": team,
        "vcluster.loft.sh/namespace": "default",
        "app.kubernetes.io/name": name.rsplit("-", 1)[0],
        "training.kubeflow.org/job-name": gang or "",
        "training.kubeflow.org/replica-type": "worker",
    }
    annotations = {
        "vcluster.loft.sh/object-name": name,
        "vcluster.loft.sh/object-namespace": "default",
        "vcluster.loft.sh/object-uid": f"{uid:08x}-0000-4000-8000-{uid:012x}",
        "vcluster.loft.sh/labels": json.dumps(labels),
    }
    if gang:
        annotations |= {"pod-group-name": f"{team}.default.{gang}", "gpu-tenancy/gang-size": "4"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-x-default-x-{team}",
            "namespace": namespace,
            "uid": f"{uid:032x}",
            "resourceVersion": str(uid),
            "labels": labels,
            "annotations": annotations,
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                    "command": ["torchrun", "--nnodes=4", "train.py"],
                    "env": [{"name": f"VAR_{i}", "value": "x" * 20} for i in range(8)],
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets"}],
                }
            ],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "volumes": [
                {"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}
            ],
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": t, "status": "True"} for t in ("Initialized", "Ready", "PodScheduled")],
        },
    }


class InProcessApi:
    """The API server as the controller talks to it: paginated lists, creates and patches taken."""

    def __init__(self, teams: int, gangs: int) -> None:
        self.namespaces = [
            {
                "metadata": {
                    "name": f"vcluster-t{i}",
                    "labels": {"gpu-tenancy/queue": f"q{i}", "gpu-tenancy/tenant": f"t{i}"},
                }
            }
            for i in range(teams)
        ]
        gpu = {"quota": 1, "limit": 2, "overQuotaWeight": 1}
        self.queues = [
            {"metadata": {"name": f"q{i}"}, "spec": {"parentQueue": "org", "resources": {"gpu": gpu}}}
            for i in range(teams)
        ]
        self.pod_groups: list[dict[str, Any]] = []
        """Those the controller creates, each waiting as KAI would mark it, so the queue views list them."""
        uid = 0
        self.pods: list[dict[str, Any]] = []
        for i in range(teams):
            uid += 1
            self.pods.append(_pod(f"t{i}", "coredns-abc", None, uid))
            for g in range(gangs):
                for w in range(4):
                    uid += 1
                    self.pods.append(_pod(f"t{i}", f"job{g}-worker-{w}", f"job{g}", uid))

    def request(self, method: str, path: str, body: Any = None, **query: str) -> dict[str, Any]:
        if method == "GET" and path == NAMESPACES:
            return {"items": self.namespaces, "metadata": {}}
        if method == "GET" and path in (PODS, POD_GROUPS):
            return self._page(self.pods if path == PODS else self.pod_groups, query)
        if method == "GET" and path == QUEUES:
            return {"items": self.queues, "metadata": {}}
        if method == "GET":
            return {"items": [], "metadata": {"resourceVersion": "1"}}
        if method == "POST" and isinstance(body, dict) and body.get("kind") == "PodGroup":
            reason = {"reason": "OverLimit", "message": "queue would exceed its limit"}
            status = {
                "resourcesStatus": {"requested": {"nvidia.com/gpu": "4"}},
                "schedulingConditions": [{"type": "UnschedulableOnNodePool", "reasons": [reason]}],
            }
            managed = [{"manager": "gpu-tenancy-gang-controller"}]
            self.pod_groups.append(
                {**body, "metadata": {**body["metadata"], "managedFields": managed}, "status": status}
            )
            return body
        return {}

    @staticmethod
    def _page(items: list[dict[str, Any]], query: dict[str, str]) -> dict[str, Any]:
        start, limit = int(query.get("continue", "0")), int(query.get("limit", "1000000"))
        page = [json.loads(json.dumps(item)) for item in items[start : start + limit]]
        more = start + limit < len(items)
        return {"items": page, "metadata": {"resourceVersion": "1", "continue": str(start + limit) if more else ""}}


def measure(teams: int, gangs: int) -> dict[str, float]:
    api = InProcessApi(teams, gangs)
    controller = Controller(api, Settings(grace_seconds=300, resync_seconds=30))  # type: ignore[arg-type]
    controller.relist()  # the first list creates the PodGroups; the one measured lists them, waiting, as a resync
    controller.views.clear()  # and writes every team's view, as after a restart
    gc.collect()
    tracemalloc.start()
    started = time.perf_counter()
    controller.relist()
    listed = time.perf_counter() - started
    gc.collect()
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    members = [pod for pod in api.pods if "pod-group-name" in pod["metadata"]["annotations"]]
    events = random.Random(0).sample(members, min(1000, len(members)))
    started = time.perf_counter()
    for pod in events:
        touched = controller.apply({"type": "MODIFIED", "object": json.loads(json.dumps(pod))})
        controller.reconcile(touched)
    per_event = (time.perf_counter() - started) / len(events)
    return {"pods": len(api.pods), "kept": kept, "peak": peak, "listed": listed, "per_event": per_event}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teams", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--gangs", type=int, default=10)
    args = parser.parse_args()
    print(f"{platform.machine()}, Python {platform.python_version()}; {POD_BYTES_NOTE}\n")
    print("| teams | gangs | pods | kept MiB | peak MiB while listing | full list s | ms per pod event |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for teams in args.teams:
        m = measure(teams, args.gangs)
        print(
            f"| {teams:,} | {teams * args.gangs:,} | {int(m['pods']):,} | {m['kept'] / 2**20:.1f} | "
            f"{m['peak'] / 2**20:.1f} | {m['listed']:.1f} | {1000 * m['per_event']:.2f} |"
        )


if __name__ == "__main__":
    main()

"""Every object a team writes that the suite's fence tests start from, gathered for a real tenant to replay.

The fast tests send these through the syncer's model (tests/vcluster_syncer.py) to the lab's API server with the
program's policies. tests/test_lab_tenants.py creates each inside a real tenant instead, follows it through the real
syncer to the host's answer, and holds the model equal to what the real syncer sent. The tables are the test
modules' own, under their names: test_kai_bookkeeping (WORKLOADS, ON_CREATE, PRIORITY_CHOICES, FRACTIONS,
ROUND_THREE, SIZES), test_tenant_admission (BENIGN, ATTACKS), test_fence_round_two (ORDINARY_PODS,
NODE_NETWORK_VOLUMES, ORDINARY_SERVICES, HIJACKS, the Grafana labels) and test_gangs (GANG_CLAIMS, and every pod of
the teams page's gangs). The pods the other modules give the model are of these shapes: a gang's pod
(test_gang_controller, test_lab_kai_installing) and a labelled pod in another namespace (test_tenant_network), under
'network/'.
"""

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from config.upstream import GRAFANA_SIDECAR_LABELS
from tests import test_fence_round_two as round_two
from tests import test_gangs as gangs
from tests import test_kai_bookkeeping as bookkeeping
from tests import test_tenant_admission as admission
from tests.tenant_pods import SYNCER
from tests.workload_operators import pods_of

Json = dict[str, Any]
CUDA = "nvcr.io/nvidia/cuda:13.0.1-base-ubuntu24.04"


@dataclass(frozen=True)
class Case:
    objects: tuple[Json, ...]
    """What the team creates in its cluster, in order; `follow` is the one whose host write decides."""
    refusal: tuple[str, ...] | None
    """What the refusal names, any of these; None: admitted."""
    kai_serves: bool = True
    """Whether the table decides it with KAI's webhook serving (its stand-in, in the lab)."""
    follow: int = -1
    cluster_objects: tuple[Json, ...] = ()
    """Cluster-wide objects the team makes first (a RuntimeClass, a PriorityClass)."""

    @property
    def followed(self) -> Json:
        return self.objects[self.follow]


def _refusal(reason: str | tuple[str, ...] | None) -> tuple[str, ...] | None:
    return (reason,) if isinstance(reason, str) else reason


def _named(obj: Json, name: str) -> Json:
    named = copy.deepcopy(obj)
    named.setdefault("apiVersion", "v1")
    named.setdefault("kind", "Pod")
    named["metadata"]["name"] = name
    named["metadata"].setdefault("namespace", "default")
    return named


def _runtime_class(name: str) -> Json:
    """The tenant's own RuntimeClass: its API server refuses a pod of a class it does not hold (the RuntimeClass
    admission plugin), and the syncer brings none from the host, so a team makes one first."""
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name}, "handler": name}


Row = tuple[str, Json, str | tuple[str, ...] | None]
"""A table's row: its key, the team's pod, what the refusal names (None: admitted)."""


def _bookkeeping() -> Iterator[Row]:
    gpu_container = [{"name": "m", "image": CUDA, "resources": bookkeeping.gpu()}]
    for name, pod in bookkeeping.WORKLOADS.items():
        yield f"workloads/{name}", pod, None
    for name, (labels, annotations, kais_key) in bookkeeping.ON_CREATE.items():
        pod = bookkeeping.virtual(labels=labels, annotations=annotations, containers=gpu_container)
        yield f"on-create/{name}", pod, kais_key
    for name, (labels, choice) in bookkeeping.PRIORITY_CHOICES.items():
        yield f"priority/{name}", bookkeeping.virtual(labels=labels), choice
    for name, (annotations, fraction) in bookkeeping.FRACTIONS.items():
        pod = bookkeeping.virtual(annotations=annotations, containers=[{"name": "m", "image": CUDA}])
        yield f"fraction/{name}", pod, fraction
    for name, (changes, brought) in bookkeeping.ROUND_THREE.items():
        if "priorityClassName" in changes.get("spec", {}):
            continue  # the syncer clears the field (tests/test_lab_tenants.py shows it): no team writes it
        pod = copy.deepcopy(bookkeeping.WORKLOADS["ddp-job-worker"])
        for part, values in changes.items():
            for key, value in values.items():
                pod[part][key] = {**pod[part].get(key, {}), **value} if isinstance(value, dict) else value
        yield f"round-three/{name}", pod, brought
    for name, (pod, size) in bookkeeping.SIZES.items():
        yield f"sizes/{name}", pod, size


def _fenced_with_kai() -> Iterator[Row]:
    yield from _bookkeeping()
    for name, pod in admission.BENIGN.items():
        yield f"benign/{name}", pod, None
    for name, pod in round_two.ORDINARY_PODS.items():
        yield f"volumes/{name}", pod, None
    for name, (labels, annotations, reason) in gangs.GANG_CLAIMS.items():
        yield f"gang-claims/{name}", gangs._single_pod(labels, annotations), reason
    for key, manifest in gangs.GANGS.items():
        for index, pod in enumerate(pods_of(manifest)):
            yield f"gangs/{key.split('/')[1]}-{index}", {"apiVersion": "v1", "kind": "Pod", **pod}, None


def _fenced_alone() -> Iterator[Row]:
    """The tables decided with KAI's webhook not serving (not installed yet, or down)."""
    for name, (pod, reason) in admission.ATTACKS.items():
        yield f"attacks/{name}", pod, reason
    for name, source in round_two.NODE_NETWORK_VOLUMES.items():
        yield f"node-network/{name}", round_two.mounting(source), ("volume types", "hostPath volumes")


def _pod_cases() -> dict[str, Case]:
    cases: dict[str, Case] = {}
    for kai_serves, rows in ((True, _fenced_with_kai()), (False, _fenced_alone())):
        for key, pod, reason in rows:
            name = key.replace("/", "-").replace("_", "-")[:40].rstrip("-")
            runtime = pod["spec"].get("runtimeClassName")
            first = (_runtime_class(runtime),) if runtime else ()
            cases[key] = Case((_named(pod, name),), _refusal(reason), kai_serves, cluster_objects=first)
    for namespace, name, labels in (
        ("kube-system", "coredns", {"k8s-app": "vcluster-kube-dns"}),
        ("default", "train-0", {"app": "train"}),
        ("default", "impostor", {"release": "team-nlp", "app": "vcluster"}),
    ):
        pod = {"metadata": {"name": f"network-{name}", "namespace": namespace, "labels": labels}}
        pod["spec"] = {"containers": [{"name": "main", "image": "busybox"}]}
        cases[f"network/{namespace}-{name}"] = Case((_named(pod, f"network-{name}"),), None)
    return cases


def _object_cases() -> dict[str, Case]:
    """Services, whose host copy the syncer writes as the team creates one, and ConfigMaps and Secrets, which it
    writes once a pod uses them."""
    cases: dict[str, Case] = {}
    for name, spec in round_two.ORDINARY_SERVICES.items():
        cases[f"services/{name}"] = Case((round_two.team_service(f"svc-{name}"[:40].rstrip("-"), **spec),), None)
    for name, addresses in round_two.HIJACKS.items():
        hijack = round_two.team_service(
            f"hijack-{name}"[:40].rstrip("-"), selector={"app": "web"}, externalIPs=addresses
        )
        cases[f"hijacks/{name}"] = Case((hijack,), ("externalIPs",))
    for kind in ("ConfigMap", "Secret"):
        for label in (*GRAFANA_SIDECAR_LABELS, None):
            name = f"{kind.lower()}-{(label or 'own').replace('_', '-')}"
            labels = {label: "1"} if label else {"app": "jupyter", "dashboard": "mine"}
            source = {"configMap": {"name": name}} if kind == "ConfigMap" else {"secret": {"secretName": name}}
            user = _named(round_two.mounting(source), f"uses-{name}")
            config = round_two.team_config(kind, labels, name)
            cases[f"{kind.lower()}s/{label or 'own'}"] = Case((config, user), (label,) if label else None, follow=0)
    return cases


CASES: dict[str, Case] = {**_pod_cases(), **_object_cases()}
"""Every team object the fence's tests start from, by table and row."""


@dataclass(frozen=True)
class Edit:
    """A team's later change to its pod, as it reads it back with KAI's keys copied in: a fraction's pod that KAI's
    webhook mutated, its pod-grouper grouped and its binder bound (the keys written on the host as they write them)."""

    change: Callable[[Json], None] | None
    """What the team changes in its pod's metadata; None: it runs `kubectl debug` on it instead."""
    refusal: tuple[str, ...] | None
    debug_env: list[Json] | None = None
    """The debug container's env."""


def _raise_priority(pod: Json) -> None:
    pod["metadata"]["labels"]["priorityClassName"] = "system-node-critical"


def _ordinary_edit(pod: Json) -> None:
    pod["metadata"]["labels"]["owner"] = "alice"
    pod["metadata"].setdefault("annotations", {})["note"] = "re-run with a larger batch"


def _edits() -> dict[str, Edit]:
    edits = {
        f"updates/{name}": Edit(change, reasons)
        for name, (change, reasons) in admission.UPDATES.items()
        if not name.startswith("syncer-")  # the syncer's own write, not a team's edit
    }
    edits.update(
        {
            f"on-update/{name}": Edit(change, (reason,))
            for name, (change, user, reason) in bookkeeping.ON_UPDATE.items()
            if user == SYNCER
        }
    )
    edits["priority/raised-after-creation"] = Edit(_raise_priority, ("system-node-critical",))
    edits["ordinary/an-owner-and-a-note"] = Edit(_ordinary_edit, None)
    for name, (debug_env, reason) in admission.DEBUG_CONTAINERS.items():
        edits[f"debug/{name}"] = Edit(None, _refusal(reason), debug_env)
    return edits


EDITS: dict[str, Edit] = _edits()
"""Every change to a running pod the fence's tests start from: test_tenant_admission UPDATES and
DEBUG_CONTAINERS, test_kai_bookkeeping ON_UPDATE (the team's rows) and its raised priority and ordinary edits."""
EDITED = bookkeeping.WORKLOADS["jupyter-notebook"]
"""The pod the edits start from: a notebook on a quarter of a GPU, whose priority the team chose."""

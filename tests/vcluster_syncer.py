"""What vCluster's syncer writes to the host for a pod a team creates, and for the team's later edits.

A stand-in, modelled on loft-sh/vcluster @v0.35.1 with the platform's values (no
PriorityClass sync, setOwner false, the default single-namespace mode):

- pkg/util/translate/labels.go HostLabels, HostLabel: labels are copied verbatim, except
  release, vcluster.loft.sh/namespace, managed-by and controlled-by, which become
  vcluster.loft.sh/label-<vcluster>-x-<sha256(key)[:10]>; the syncer adds managed-by=<vcluster>
  and namespace=<virtual namespace>, and one vcluster.loft.sh/ns-label-... per label of the
  virtual namespace (pods/translate/translator.go).
- translate.go HostAnnotations and translator.go: annotations are copied verbatim; the syncer
  adds vcluster.loft.sh/object-* (the host name and namespace too), name, namespace, uid,
  service-account-name, labels, managed-annotations, the account's token (token-<8 letters>)
  and cluster-autoscaler.kubernetes.io/safe-to-evict (true for a pod with a controller).
  tests/test_lab_tenants.py holds this against the real syncer in the lab.
- translator.go: the host name is SafeConcatName(<name>, x, <namespace>, x, <vcluster>); with
  no PriorityClass sync, spec.priorityClassName and spec.priority are cleared; schedulerName,
  runtimeClassName, env and ephemeral containers are copied; no owner reference (setOwner false);
  serviceAccountName becomes vc-workload-<vcluster>.
- pods/translate/diff.go: a team's later edit of labels or annotations reaches the host as a
  merge of what it added, changed or removed; host-only keys (KAI's) stay.
"""

import copy
import hashlib
from typing import Any

Json = dict[str, Any]

TRANSLATED_LABELS = (
    "release",
    "vcluster.loft.sh/namespace",
    "vcluster.loft.sh/managed-by",
    "vcluster.loft.sh/controlled-by",
)


VIRTUAL_UID = "8c2d4e6f-1a3b-4c5d-9e7f-0a1b2c3d4e5f"
TOKEN_ANNOTATION = "vcluster.loft.sh/token-"
TOKEN_SUFFIX = "abcdefgh"
"""translator.go @v0.35.1: with useSecretsForSATokens off, the pod's service account token travels in an
annotation named with 8 random letters; the pod's projected token volume reads it by a fieldRef."""
TOKEN = "e" * 1105
"""Of the real one's size (team-nlp's default account, measured on the lab's real syncer): it counts against the
annotation bound."""


def safe_concat_name(*parts: str) -> str:
    full = "-".join(parts)
    if len(full) > 63:
        digest = hashlib.sha256(full.encode()).hexdigest()[:10]
        return (full[:52] + "-" + digest).replace(".-", "-")
    return full


def host_label(key: str, vcluster: str) -> str:
    if key in TRANSLATED_LABELS:
        return safe_concat_name("vcluster.loft.sh/label", vcluster, "x", hashlib.sha256(key.encode()).hexdigest()[:10])
    return key


def to_host(virtual: Json, *, vcluster: str, namespace_labels: Json | None = None) -> Json:
    """The host pod the syncer creates for a team's pod."""
    meta = virtual["metadata"]
    namespace = meta.get("namespace", "default")
    labels = {host_label(k, vcluster): v for k, v in (meta.get("labels") or {}).items()}
    labels.update({"vcluster.loft.sh/managed-by": vcluster, "vcluster.loft.sh/namespace": namespace})
    for key, value in (namespace_labels or {"kubernetes.io/metadata.name": namespace}).items():
        labels[
            safe_concat_name("vcluster.loft.sh/ns-label", vcluster, "x", hashlib.sha256(key.encode()).hexdigest()[:10])
        ] = value
    annotations = dict(meta.get("annotations") or {})
    if annotations:
        annotations["vcluster.loft.sh/managed-annotations"] = "\n".join(sorted(annotations))
    host_name = safe_concat_name(meta["name"], "x", namespace, "x", vcluster)
    uid = meta.get("uid", VIRTUAL_UID)
    owned = any(owner.get("controller") for owner in meta.get("ownerReferences") or [])
    annotations.update(
        {
            "vcluster.loft.sh/object-name": meta["name"],
            "vcluster.loft.sh/object-namespace": namespace,
            "vcluster.loft.sh/object-kind": "/v1, Kind=Pod",
            "vcluster.loft.sh/object-uid": uid,
            "vcluster.loft.sh/object-host-name": host_name,
            "vcluster.loft.sh/object-host-namespace": f"vcluster-{vcluster}",
            "vcluster.loft.sh/name": meta["name"],
            "vcluster.loft.sh/namespace": namespace,
            "vcluster.loft.sh/uid": uid,
            "vcluster.loft.sh/service-account-name": virtual["spec"].get("serviceAccountName", "default"),
            "vcluster.loft.sh/labels": "\n".join(f'{k}="{v}"' for k, v in sorted((meta.get("labels") or {}).items())),
            "cluster-autoscaler.kubernetes.io/safe-to-evict": "true" if owned else "false",
            f"{TOKEN_ANNOTATION}{TOKEN_SUFFIX}": TOKEN,
        }
    )
    spec = copy.deepcopy(virtual["spec"])
    spec.pop("priorityClassName", None)
    spec.pop("priority", None)
    spec["serviceAccountName"] = f"vc-workload-{vcluster}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": host_name,
            "namespace": f"vcluster-{vcluster}",
            "uid": "3f1c9a52-0c55-4b59-9d0e-7a1b2c3d4e5f",
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec,
    }


def _merged(host: Json, old: Json, new: Json, *, vcluster: str) -> Json:
    merged = dict(host)
    for key in old.keys() - new.keys():
        merged.pop(host_label(key, vcluster), None)
    for key, value in new.items():
        if old.get(key) != value:
            merged[host_label(key, vcluster)] = value
    return merged


def edit_to_host(host: Json, virtual_before: Json, virtual_after: Json, *, vcluster: str) -> Json:
    """The host pod after the syncer carries a team's edit of its pod's labels and annotations over."""
    updated = copy.deepcopy(host)
    for kind in ("labels", "annotations"):
        before = virtual_before["metadata"].get(kind) or {}
        after = virtual_after["metadata"].get(kind) or {}
        updated["metadata"][kind] = _merged(updated["metadata"].get(kind) or {}, before, after, vcluster=vcluster)
    return updated


def virtual_gang_pod(name: str, gang: str, size: int, image: str = "busybox", **labels: str) -> Json:
    """A pod of a gang as a team writes it inside its vCluster's default namespace (docs/teams.md)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"gpu-tenancy/gang": gang, **labels},
            "annotations": {"gpu-tenancy/gang-size": str(size)},
        },
        "spec": {"containers": [{"name": "main", "image": image}]},
    }

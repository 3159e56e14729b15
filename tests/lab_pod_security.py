"""Pod Security, decided by the lab's API server: a pod spec is a dry run in a namespace at that level.

The namespaces lab-pss-<level> carry only `pod-security.kubernetes.io/enforce: <level>`, so no
policy of the program's binds there: what refuses a pod is Pod Security admission itself
(kubernetes/pod-security-admission, built into the lab's kube-apiserver v1.36.3).
"""

import copy
import threading
from typing import Any

from harness.lab.kube import ApiError
from tests.lab import Lab, ensure_namespace

Json = dict[str, Any]
_READY: set[str] = set()
_LOCK = threading.Lock()


def pod_security_violations(lab: Lab, spec: Json, level: str) -> list[str]:
    """What Pod Security at `level` (privileged, baseline or restricted) refuses in the pod spec: [] or its one
    message. Names that point at other objects and are not Pod Security's (a PriorityClass, a ServiceAccount)
    are made to exist or left out, so only Pod Security decides."""
    namespace = f"lab-pss-{level}"
    with _LOCK:
        if namespace not in _READY:
            ensure_namespace(lab, namespace, {"pod-security.kubernetes.io/enforce": level})
            _READY.add(namespace)
    sent = copy.deepcopy(spec)
    sent.pop("priorityClassName", None)
    sent.pop("priority", None)
    account = sent.get("serviceAccountName")
    if account:
        lab.admin.apply(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": namespace}}
        )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pod-security-probe", "namespace": namespace},
        "spec": sent,
    }
    try:
        lab.admin.create(pod, dry_run=True)
    except ApiError as error:
        if "violates PodSecurity" in error.message:
            return [error.message]
        raise
    return []

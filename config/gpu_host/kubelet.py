"""`host.kubelet`: the kubelet settings the platform adds on every machine it bootstraps, control plane and workers.

MicroK8s' kubelet runs with none of them (canonical/microk8s microk8s-resources/default-args/kubelet @v1.36
sets only `--eviction-hard` at 1Gi of disk): a pod that names no seccomp profile runs `Unconfined`, one
fork bomb takes every PID of the node, and the disk fills to its last gigabyte before anything is evicted.
"""

import re
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, Field
from pydantic_core import PydanticCustomError

from config.quantities import quantity
from config.types import ConfigModel, require_str

EVICTION_SIGNALS = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "containerfs.available",
    "containerfs.inodesFree",
    "pid.available",
)
# The signals an eviction threshold may name: kubernetes pkg/kubelet/eviction/api/types.go @v1.36.0.

DEFAULT_EVICTION_HARD = {
    # MicroK8s' own is memory.available<100Mi and 1Gi of disk; a GPU node's images are tens of GiB, and its
    # dqlite, containerd and kubelite need room to keep running while the kubelet evicts.
    "memory.available": "500Mi",
    "nodefs.available": "10%",
    "nodefs.inodesFree": "5%",
    "imagefs.available": "15%",
    "imagefs.inodesFree": "5%",
}
EVICTION_MINIMUM_RECLAIM = {"nodefs.available": "2Gi", "imagefs.available": "5Gi"}
"""Once it evicts, the kubelet frees this much beyond the threshold, so it does not evict again at once."""
DEFAULT_POD_MAX_PIDS = 4096

_PERCENT = re.compile(r"^\d{1,2}(\.\d+)?%$")


def _threshold(value: str) -> str:
    if _PERCENT.match(value):
        return value
    try:
        quantity(value)
    except ValueError:
        raise PydanticCustomError(
            "eviction_threshold",
            "is not an eviction threshold: use a percentage below 100%, e.g. 10%, or a quantity, e.g. 500Mi",
            {},
        ) from None
    return value


def _signals(value: dict[str, str]) -> dict[str, str]:
    unknown = sorted(set(value) - set(EVICTION_SIGNALS))
    if unknown:
        raise PydanticCustomError(
            "eviction_signal",
            "names {unknown}, which the kubelet does not know: use {known}",
            {"unknown": ", ".join(unknown), "known": ", ".join(EVICTION_SIGNALS)},
        )
    return value


Threshold = Annotated[str, BeforeValidator(require_str), AfterValidator(_threshold)]


class KubeletSettings(ConfigModel):
    """Set in MicroK8s' kubelet arguments on each machine; a change restarts kubelite there."""

    pod_max_pids: int = Field(
        default=DEFAULT_POD_MAX_PIDS,
        ge=256,
        le=4_194_304,
        description="Processes and threads one pod may run (--pod-max-pids); a fork bomb stops there.",
    )
    eviction_hard: Annotated[dict[str, Threshold], AfterValidator(_signals)] = Field(
        default_factory=lambda: dict(DEFAULT_EVICTION_HARD),
        description="--eviction-hard: signal -> threshold; replaces the default whole.",
    )

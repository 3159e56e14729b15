"""The kubelet arguments the platform sets on every machine it bootstraps (kubelet-args.sh writes them).

Each is one line of MicroK8s' kubelet arguments file, which kubelite reads only when it
starts: it drops blank lines and `#` comments, strips every quote and splits on spaces
(canonical/microk8s build-scripts/components/kubernetes/patches/v1.36.0/0000-Kubelite-integration.patch,
ReadArgsFromFile @v1.36), so no value holds a space. Quotes around a list follow MicroK8s' own
`--eviction-hard` line.
"""

from collections.abc import Mapping

from config.gpu_host.kubelet import EVICTION_MINIMUM_RECLAIM, KubeletSettings


def _pairs(entries: Mapping[str, str], operator: str) -> str:
    return '"' + ",".join(f"{signal}{operator}{value}" for signal, value in entries.items()) + '"'


def kubelet_flags(settings: KubeletSettings) -> list[str]:
    """`--seccomp-default`: a pod that names no profile runs the runtime's default, not Unconfined.
    `--pod-max-pids`: a fork bomb stops at its pod. The eviction thresholds leave the node's own
    daemons room while the kubelet evicts (config/gpu_host/kubelet.py)."""
    return [
        "--seccomp-default=true",
        f"--pod-max-pids={settings.pod_max_pids}",
        f"--eviction-hard={_pairs(settings.eviction_hard, '<')}",
        f"--eviction-minimum-reclaim={_pairs(EVICTION_MINIMUM_RECLAIM, '=')}",
    ]

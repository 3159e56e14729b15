"""Pod Security Standards, checked as Pod Security admission checks a pod template (levels baseline, restricted).

A stand-in, modelled on kubernetes/pod-security-admission policy/check_*.go @v0.36.0 (the
"latest" version of each check): what a pod spec must not set at baseline, and must set at
restricted. Windows host process and AppArmor annotations are left out (no such pods here).
"""

from collections.abc import Iterator
from typing import Any

Json = dict[str, Any]

BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


def _containers(spec: Json) -> Iterator[Json]:
    for field in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(field) or []


def _baseline_pod(spec: Json) -> Iterator[str]:
    for namespace in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(namespace):
            yield f"{namespace}=true"
    for volume in spec.get("volumes") or []:
        if "hostPath" in volume:
            yield f"hostPath volume {volume['name']}"
    for sysctl in (spec.get("securityContext") or {}).get("sysctls") or []:
        if sysctl["name"] not in SAFE_SYSCTLS:
            yield f"sysctl {sysctl['name']}"


def _baseline_context(name: str, context: Json) -> Iterator[str]:
    """What the pod's and each container's securityContext may not say."""
    if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
        yield f"{name}: seccomp Unconfined"
    selinux = context.get("seLinuxOptions") or {}
    if selinux.get("type", "") not in SELINUX_TYPES or selinux.get("user") or selinux.get("role"):
        yield f"{name}: seLinuxOptions {selinux}"
    if (context.get("appArmorProfile") or {}).get("type") == "Unconfined":
        yield f"{name}: appArmor Unconfined"


def _baseline_container(container: Json) -> Iterator[str]:
    context = container.get("securityContext") or {}
    name = container["name"]
    yield from _baseline_context(name, context)
    if context.get("privileged"):
        yield f"{name}: privileged"
    added = set((context.get("capabilities") or {}).get("add") or [])
    if added - BASELINE_CAPABILITIES:
        yield f"{name}: adds capabilities {sorted(added - BASELINE_CAPABILITIES)}"
    if context.get("procMount", "Default") != "Default":
        yield f"{name}: procMount {context['procMount']}"
    for port in container.get("ports") or []:
        if port.get("hostPort"):
            yield f"{name}: hostPort {port['hostPort']}"


def _baseline(spec: Json) -> Iterator[str]:
    yield from _baseline_pod(spec)
    yield from _baseline_context("pod", spec.get("securityContext") or {})
    for container in _containers(spec):
        yield from _baseline_container(container)


def _restricted(spec: Json) -> Iterator[str]:
    for volume in spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if kinds - RESTRICTED_VOLUMES:
            yield f"volume {volume['name']} of type {sorted(kinds)}"
    pod = spec.get("securityContext") or {}
    for container in _containers(spec):
        context = container.get("securityContext") or {}
        name = container["name"]
        if context.get("allowPrivilegeEscalation") is not False:
            yield f"{name}: allowPrivilegeEscalation is not false"
        if not context.get("runAsNonRoot", pod.get("runAsNonRoot")):
            yield f"{name}: runAsNonRoot is not true"
        if context.get("runAsUser", pod.get("runAsUser")) == 0:
            yield f"{name}: runAsUser 0"
        seccomp = (context.get("seccompProfile") or pod.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            yield f"{name}: seccomp profile {seccomp}"
        capabilities = context.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            yield f"{name}: does not drop ALL capabilities"
        if set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}:
            yield f"{name}: adds {capabilities['add']}"
    if pod.get("runAsUser") == 0:
        yield "pod: runAsUser 0"


def violations(pod_spec: Json, level: str) -> list[str]:
    """What Pod Security admission at `level` (privileged, baseline or restricted) refuses in the pod spec."""
    if level == "privileged":
        return []
    found = list(_baseline(pod_spec))
    if level == "restricted":
        found += list(_restricted(pod_spec))
    return found


POD_TEMPLATE_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}


def pod_specs(objects: list[Json]) -> Iterator[tuple[str, Json]]:
    """(kind/name, pod spec) of every pod or pod template among rendered objects."""
    for obj in objects:
        kind, name = obj.get("kind"), obj.get("metadata", {}).get("name")
        if kind == "Pod":
            yield f"Pod/{name}", obj["spec"]
        elif kind in POD_TEMPLATE_KINDS:
            yield f"{kind}/{name}", obj["spec"]["template"]["spec"]
        elif kind == "CronJob":
            yield f"CronJob/{name}", obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]

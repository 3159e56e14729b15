"""A team goes, with its namespace, volumes and data, only when the operator says so by name.

A tenant's host namespace holds its vCluster's own store (every object the team made) and the
volumes of its workloads, which `microk8s-hostpath` deletes with their claims. One dropped or
renamed `tenants` entry would delete all of it on the next `up`, from CI. So the host
remembers which teams the last `up` configured, and a team that has gone from `tenants`
without being named in `vcluster.removeTenants` stops the run, before the engine deletes
anything: it performs deletes only after the program ends without error (pulumi/pulumi
pkg/resource/deploy/deployment_executor.go, Execute: a source error bails before performDeletes).
"""

import json
from collections.abc import Mapping, Sequence

from config.issues import problem

TENANTS_KEY = "tenants.json"
"""The memory's key for the teams the last `up` configured."""
PORTS_KEY = "ports.json"


def previous_tenants(data: Mapping[str, str] | None) -> list[str]:
    """The teams the last `up` configured, from the host's memory; a memory written before it kept the list
    (only ports, one entry per configured team with expose nodePort) gives its ports' teams."""
    data = data or {}
    for key in (TENANTS_KEY, PORTS_KEY):
        try:
            found = json.loads(data.get(key) or "null")
        except json.JSONDecodeError:
            continue
        if isinstance(found, list):
            return sorted(str(name) for name in found)
        if isinstance(found, Mapping) and found:
            return sorted(str(name) for name in found)
    return []


def undeclared_removals(previous: Sequence[str], tenants: Sequence[str], remove: Sequence[str]) -> list[str]:
    """The teams on the host that this `up` would delete without the operator having named them."""
    return sorted(set(previous) - set(tenants) - set(remove))


def removal_problems(names: Sequence[str]) -> list[str]:
    return [
        problem(
            ("tenants",),
            name,
            f"is no longer listed, but team {name}'s host namespace, its volumes and its data are still on the "
            f"host, and this up would delete them: restore its tenants entry to keep it, or add {name} to "
            "gpu-tenancy:vcluster.removeTenants to delete it",
        )
        for name in names
    ]

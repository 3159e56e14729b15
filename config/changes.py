"""What a change of stack config deletes or replaces that holds a team's data or access, read from two configs.

A pull request's plan is rendered from its stack files alone, with no state, cluster or secret, so
it cannot show the engine's diff; it can show what the program will make of the change. These
are the changes this program turns into a loss of a team's data (its host namespace, vCluster
store and volumes) or of its access (a kubeconfig, a member's credentials), each with the code
that makes it so:

- The cluster's identity is the host provider's clusterIdentifier (components/gpu_host/component.py),
  and each team's provider derives its own from it (components/vcluster_tenant/component.py):
  another one replaces every Kubernetes resource of that provider
  (pulumi/pulumi-kubernetes provider/pkg/provider/provider.go DiffConfig @v4.32.0).
- A tenant that leaves `tenants` is deleted with its namespace when `vcluster.removeTenants` names
  it, and stops the `up` otherwise (config/vcluster_tenant/removals.py).
- A member or group that leaves a tenant loses its credentials (components/vcluster_tenant/members.py).
- A team's kubeconfig names its API's address (components/vcluster_tenant/endpoints.py): another
  expose mode, domain, node port or host address makes every copy of it stale.
- The team views (components/observability/team_views.py) hold a login per member: turning them off
  deletes them, and another node port moves them.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from config.gpu_host.host import BrevHost
from config.issues import key_path
from config.stack import StackConfig
from config.vcluster_tenant.tenants import TenantConfig


@dataclass(frozen=True)
class Hazard:
    """One thing a change takes from a team, said as the key that does it and what follows."""

    key: str
    """The stack key whose change does it, e.g. gpu-tenancy:tenants."""
    what: str
    """What goes, and what the team or the operator must do."""
    data: bool
    """A team's data goes (volumes, its vCluster's store), not only its access."""


def _identity_key(base: StackConfig, head: StackConfig) -> str:
    if base.host.mode != head.host.mode:
        return key_path(("host", "mode"))
    return key_path(("host", "name" if head.host.mode == "brev" else "clusterId"))


def _identity(base: StackConfig, head: StackConfig) -> list[Hazard]:
    before, after = base.host.identity, head.host.identity
    if before == after:
        return []
    machine = (
        " It is also another Brev instance: a new machine is built, and the old one, with every team's data, is "
        "deleted if this stack created it and host.deleteOnDestroy is true."
        if head.host.mode == "brev"
        else ""
    )
    return [
        Hazard(
            _identity_key(base, head),
            f"the cluster's identity changes from {before} to {after}: the Kubernetes provider's clusterIdentifier "
            "changes, so the engine replaces every Kubernetes resource on the host, every team's vCluster, volumes "
            f"and data among them, and every kubeconfig changes.{machine}",
            data=True,
        )
    ]


def _removed_tenants(base: StackConfig, head: StackConfig) -> list[Hazard]:
    kept = {t.name for t in head.tenants}
    added = [t for t in head.tenants if t.name not in {b.name for b in base.tenants}]
    hazards = []
    for tenant in base.tenants:
        if tenant.name in kept:
            continue
        renamed = [t.name for t in added if t.queue == tenant.queue]
        rename = (
            f" ({', '.join(renamed)} takes its queue: a renamed team is a new one, and nothing of the old one moves)"
            if renamed
            else ""
        )
        if tenant.name in head.vcluster.remove_tenants:
            hazards.append(
                Hazard(
                    key_path(("vcluster", "removeTenants")),
                    f"tenant {tenant.name} is deleted: its host namespace, its vCluster's store, its volumes and data, "
                    f"its kubeconfig and its members' credentials{rename}.",
                    data=True,
                )
            )
        else:
            hazards.append(
                Hazard(
                    key_path(("tenants",)),
                    f"tenant {tenant.name} is no longer listed, and gpu-tenancy:vcluster.removeTenants does not name "
                    f"it: `pulumi up` will stop before deleting anything. Restore its entry to keep it, or name it "
                    f"there to delete its data{rename}.",
                    data=False,
                )
            )
    return hazards


class _Api(NamedTuple):
    """Where a team's kubeconfig points, as far as config says: a node port config leaves unset is assigned."""

    sni_domain: str | None
    address: str | None
    node_port: int | None

    def __str__(self) -> str:
        if self.sni_domain is not None:
            return f"its own hostname under {self.sni_domain}"
        where = "the host's address" if self.address is None else self.address
        return f"{where}, node port {self.node_port if self.node_port is not None else '(assigned)'}"


def _api(tenant: TenantConfig, settings: StackConfig) -> _Api:
    if settings.vcluster.expose == "sni":
        return _Api(settings.vcluster.domain, None, None)
    address = None if isinstance(settings.host, BrevHost) else settings.host.address
    return _Api(None, address, tenant.node_port)


def _per_team(base: StackConfig, head: StackConfig, same_cluster: bool) -> list[Hazard]:
    before = {t.name: t for t in base.tenants}
    hazards = []
    for index, tenant in enumerate(head.tenants):
        old = before.get(tenant.name)
        if old is None:
            continue
        for field, kind, lost in (
            ("members", "member", "their token and their team views login are deleted"),
            ("groups", "group", "its people no longer sign in to the vCluster as cluster-admin"),
        ):
            gone = [name for name in getattr(old, field) if name not in getattr(tenant, field)]
            hazards += [
                Hazard(
                    key_path(("tenants", index, field)),
                    f"tenant {tenant.name} loses {kind} {name}: {lost}.",
                    data=False,
                )
                for name in gone
            ]
        old_api, new_api = _api(old, base), _api(tenant, head)
        if same_cluster and old_api != new_api:
            hazards.append(
                Hazard(
                    _api_key(base, head, old_api, new_api, index),
                    f"tenant {tenant.name}'s API moves from {old_api} to {new_api}: its kubeconfig and its members' "
                    "stop working, and each must take the new one from the stack outputs (tenantKubeconfigs, "
                    "memberKubeconfigs).",
                    data=False,
                )
            )
    return hazards


def _api_key(base: StackConfig, head: StackConfig, old: _Api, new: _Api, index: int) -> str:
    """The key that moved a team's API: the expose mode, the domain, the host's address, or its own node port."""
    if base.vcluster.expose != head.vcluster.expose:
        return key_path(("vcluster", "expose"))
    if old.sni_domain != new.sni_domain:
        return key_path(("vcluster", "domain"))
    if old.address != new.address:
        return key_path(("host", "address"))
    return key_path(("tenants", index, "nodePort"))


def _team_views(base: StackConfig, head: StackConfig) -> list[Hazard]:
    """The team views are each team's dashboards, behind a login of each member's (components/observability)."""
    before, after = base.observability, head.observability
    if not before.team_views_enabled or not base.tenants:
        return []
    if not after.team_views_enabled:
        return [
            Hazard(
                key_path(("observability", "teamViews")),
                "the team views go: every team's dashboards and every member's login to them are deleted.",
                data=False,
            )
        ]
    if before.team_views_node_port != after.team_views_node_port:
        return [
            Hazard(
                key_path(("observability", "teamViewsNodePort")),
                f"the team views move from node port {before.team_views_node_port} to "
                f"{after.team_views_node_port}: every team's and member's address of them (stack outputs teamViews, "
                "memberTeamViews) changes.",
                data=False,
            )
        ]
    return []


def hazards(base: StackConfig, head: StackConfig) -> Sequence[Hazard]:
    """What going from `base` to `head` takes from teams: data first, then access."""
    same_cluster = base.host.identity == head.host.identity
    found = _identity(base, head) + _removed_tenants(base, head) + _per_team(base, head, same_cluster)
    found += _team_views(base, head) if same_cluster else []
    return sorted(found, key=lambda hazard: not hazard.data)

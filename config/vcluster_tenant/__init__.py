"""VClusterTenant's settings (`tenants`, `vcluster`): each team, its capacity on the host, and its node ports."""

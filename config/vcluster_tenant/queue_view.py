"""The vCluster values that copy a tenant's queue view in.

The view is a host ConfigMap the gang controller writes (components/gang_controller/gangcontrol/queue_view.py);
the tenant's syncer copies it in through `sync.fromHost.configMaps`, mapped from the syncer's own namespace
(a key "/<name>": loft-sh/vcluster pkg/syncer/translator/from_config_translator.go @v0.35.1). The chart would
also grant that syncer list and watch of every ConfigMap on the host; the platform's own ClusterRole rules
(syncer_role.py) replace the chart's, so a tenant gets the view only where those apply.
"""

from typing import Any

from config.names import QUEUE_VIEW_CONFIGMAP, QUEUE_VIEW_IN_TENANT


def queue_view_values() -> dict[str, Any]:
    """The mapping that copies the view in; only beside syncer_role_values (else the chart widens the syncer)."""
    mapping = {"enabled": True, "mappings": {"byName": {f"/{QUEUE_VIEW_CONFIGMAP}": QUEUE_VIEW_IN_TENANT}}}
    return {"sync": {"fromHost": {"configMaps": mapping}}}

"""What every Kubernetes provider of the program is told, beside its cluster.

pulumi-kubernetes replaces a ConfigMap whose data changes, and a Secret whose data, stringData or
type does, unless told they are mutable (pulumi/pulumi-kubernetes provider/pkg/provider/diff.go
forceNewProperties, provider.go enableConfigMapMutable, enableSecretMutable @v4.32.0). Every
ConfigMap and Secret here has a fixed name (the node-port memory, the team views' state and
passwords, the gang controller's program), and a replacement creates before it deletes, so the
create of the same name fails and so does the `up`: as AlreadyExists (provider/pkg/await/await.go
Creation @v4.32.0), or, in the lab's v4.25.0, as a conflict with the old object's field manager
(tests/test_lab_engine.py shows it on the real engine). Updated in place instead; the pods that
read them roll by the fingerprint annotation each one carries.
"""

from typing import Any

MUTABLE_OBJECTS: dict[str, Any] = {"enable_config_map_mutable": True, "enable_secret_mutable": True}

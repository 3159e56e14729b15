"""Labels that mark what this project manages, and how to read back a managed object's name."""

from typing import Protocol

import pulumi
import pulumi_kubernetes as k8s

MANAGED_BY = {
    "app.kubernetes.io/managed-by": "pulumi",
    "app.kubernetes.io/part-of": "gpu-tenancy",
}
PART_OF = {"app.kubernetes.io/part-of": MANAGED_BY["app.kubernetes.io/part-of"]}
"""What marks an object of the platform's that Helm, not Pulumi, manages."""


class _KubernetesObject(Protocol):
    @property
    def metadata(self) -> pulumi.Output[k8s.meta.v1.outputs.ObjectMeta]: ...


def object_name(resource: _KubernetesObject) -> pulumi.Output[str]:
    """The object's name once it exists; auto-named objects only know it after creation."""
    return resource.metadata.apply(lambda meta: str(meta.name))

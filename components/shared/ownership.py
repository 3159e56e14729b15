"""The platform owns every field it sets on a Kubernetes object: a hand edit is put back by the next `up`.

pulumi-kubernetes writes objects by server-side apply, and forces a conflicting field only when the object is
annotated pulumi.com/patchForce (pulumi/pulumi-kubernetes provider/pkg/await/await.go ssaUpdate, patchForce
@v4.25.0, unchanged in later releases). Without it a field someone changed by hand (`kubectl edit queue`, a
`kubectl label`) belongs to that field manager, and the next `preview` and `up` fail on the conflict, after
`refresh` too (the lab's real engine shows it: tests/test_lab_stack_life.py). With it the program's value wins
again, as docs/operations.md promises, and a field it does not set stays with whoever set it. Every component
takes its options through `owned`, so each object it makes, and each of its children's, carries the annotation.
"""

from collections.abc import Mapping
from typing import Any

import pulumi

PATCH_FORCE = "pulumi.com/patchForce"
NOT_APPLIED = ("kubernetes:helm.sh/", "kubernetes:yaml:", "kubernetes:kustomize:")
"""Types whose objects the provider does not server-side apply itself (Helm writes a release's)."""


def own_every_field(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
    """A stack transformation: each Kubernetes object the program registers, annotated patchForce. A read (`get`)
    registers no metadata and is left as it is."""
    if not args.type_.startswith("kubernetes:") or args.type_.startswith(NOT_APPLIED):
        return None
    metadata = args.props.get("metadata")
    if not isinstance(metadata, Mapping):
        return None
    annotations = metadata.get("annotations") or {}
    forced: Any = (
        {**annotations, PATCH_FORCE: "true"}
        if isinstance(annotations, Mapping)
        else pulumi.Output.from_input(annotations).apply(lambda given: {**(given or {}), PATCH_FORCE: "true"})
    )
    props = {**args.props, "metadata": {**metadata, "annotations": forced}}
    return pulumi.ResourceTransformationResult(props, args.opts)


def owned(opts: pulumi.ResourceOptions | None) -> pulumi.ResourceOptions:
    """A component's options, with own_every_field for it and everything under it."""
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(transformations=[own_every_field]))

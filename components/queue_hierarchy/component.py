"""QueueHierarchy: one KAI Queue per config entry, created parents first and only once KAI admits them."""

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.shared.ownership import owned
from components.shared.queue_manifest import API_VERSION, KIND, queue_manifest
from config.queue_hierarchy.hierarchy import QueueTree
from config.queue_hierarchy.queues import QueueConfig


@dataclass(frozen=True)
class QueueHierarchyArgs:
    queues: Sequence[QueueConfig]
    """A validated tree (see config.hierarchy): no cycles, no missing parents."""
    kai_ready: pulumi.Resource
    """KaiScheduler.ready: KAI's webhook refuses every Queue until it serves."""


class QueueHierarchy(pulumi.ComponentResource):
    queue_names: pulumi.Output[list[str]]
    """Every managed queue, parents first, once created."""
    leaf_names: pulumi.Output[list[str]]
    """The queues pods can be scheduled into (KAI ignores pods in parent queues)."""

    def __init__(self, name: str, args: QueueHierarchyArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-tenancy:index:QueueHierarchy", name, None, owned(opts))
        tree = QueueTree(args.queues)
        created: dict[str, k8s.apiextensions.CustomResource] = {}
        for queue in tree.parents_first:
            # Children depend on their parent, so teardown deletes children first.
            parent = [created[queue.parent_queue]] if queue.parent_queue else []
            manifest = queue_manifest(queue)
            created[queue.name] = k8s.apiextensions.CustomResource(
                f"{name}-{queue.name}",
                api_version=API_VERSION,
                kind=KIND,
                metadata=manifest["metadata"],
                spec=manifest["spec"],
                opts=pulumi.ResourceOptions(
                    parent=self,
                    depends_on=[args.kai_ready, *parent],
                    # The name is fixed, so a replacement must free it first.
                    delete_before_replace=True,
                ),
            )
        # Cluster-scoped objects have their name as ID: these resolve once the queues exist.
        self.queue_names = pulumi.Output.all(*(q.id for q in created.values()))
        leaves = set(tree.leaves)
        self.leaf_names = self.queue_names.apply(lambda names: [n for n in names if n in leaves])
        self.register_outputs({"queue_names": self.queue_names, "leaf_names": self.leaf_names})

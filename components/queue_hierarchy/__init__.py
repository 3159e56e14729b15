"""QueueHierarchy: the KAI Queues the GPUs are shared through, parents before children.

Owns the Queue objects themselves; how one is written (components.shared.queue_manifest)
is shared with KaiScheduler's gate, which submits one as a probe.
"""

from components.queue_hierarchy.component import QueueHierarchy, QueueHierarchyArgs

__all__ = ["QueueHierarchy", "QueueHierarchyArgs"]

"""gpu-tenancy: KAI Scheduler and its queue hierarchy on the host cluster, from validated stack config."""

import pulumi
import pulumi_kubernetes as k8s

from components.kai_scheduler import KaiScheduler, KaiSchedulerArgs
from components.queue_hierarchy import QueueHierarchy, QueueHierarchyArgs
from config.pulumi_stack import load_stack_inputs

inputs = load_stack_inputs()
settings = inputs.settings

host = k8s.Provider("host", kubeconfig=inputs.kubeconfig)

kai = KaiScheduler(
    "kai",
    KaiSchedulerArgs(
        settings=settings.kai_scheduler,
        version=settings.versions.kai_scheduler,
        kubectl_version=settings.versions.kubectl,
        provider=host,
    ),
)
queues = QueueHierarchy("queues", QueueHierarchyArgs(queues=settings.queues, kai=kai, provider=host))

pulumi.export("kaiNamespace", kai.namespace)
pulumi.export("schedulerName", kai.scheduler_name)
pulumi.export("kaiReleaseStatus", kai.release_status)
pulumi.export("queues", queues.queue_names)
pulumi.export("leafQueues", queues.leaf_names)

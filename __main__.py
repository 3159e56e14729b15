"""gpu-tenancy: a GPU host cluster, KAI Scheduler and its queue hierarchy, from validated stack config."""

import pulumi

from components.gpu_host import GpuHost, GpuHostArgs
from components.kai_scheduler import KaiScheduler, KaiSchedulerArgs
from components.queue_hierarchy import QueueHierarchy, QueueHierarchyArgs
from config.pulumi_stack import load_stack_inputs

inputs = load_stack_inputs()
settings = inputs.settings

host = GpuHost(
    "host",
    GpuHostArgs(
        host=settings.host,
        versions=settings.versions,
        gpu_operator=settings.gpu_operator,
        gpu_gate=settings.gpu_gate,
        kubeconfig=inputs.secrets.get("kubeconfig"),
        ssh_private_key=inputs.secrets.get("sshPrivateKey"),
    ),
)
kai = KaiScheduler(
    "kai",
    KaiSchedulerArgs(
        settings=settings.kai_scheduler,
        version=settings.versions.kai_scheduler,
        kubectl_version=settings.versions.kubectl,
        provider=host.provider,
        depends_on=[host.ready],
    ),
)
queues = QueueHierarchy("queues", QueueHierarchyArgs(queues=settings.queues, kai=kai, provider=host.provider))

pulumi.export("hostKubeconfig", host.kubeconfig)
pulumi.export("hostAddress", host.address)
pulumi.export("gpu", host.gpu)
pulumi.export("kaiNamespace", kai.namespace)
pulumi.export("schedulerName", kai.scheduler_name)
pulumi.export("kaiReleaseStatus", kai.release_status)
pulumi.export("queues", queues.queue_names)
pulumi.export("leafQueues", queues.leaf_names)

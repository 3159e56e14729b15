"""KaiScheduler: KAI Scheduler on the host, and a gate that opens only once KAI admits Queues.

Owns the Helm release, the values this platform sets on it (GPU sharing, CDI, blocked
NVIDIA_VISIBLE_DEVICES), and the readiness gate that waits for KAI's operator and
submits a probe Queue as a dry run.
"""

from components.kai_scheduler.component import KaiScheduler, KaiSchedulerArgs

__all__ = ["KaiScheduler", "KaiSchedulerArgs"]

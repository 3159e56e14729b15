"""Past GPU use per queue, as KAI's usage database reads it: from a file, or from Prometheus with KAI's own query.

KAI divides each queue's use over the window by the cluster's capacity over the same window
(pkg/scheduler/cache/usagedb/prometheus/prometheus.go GetResourceUsage @v0.16.8), so only
the ratio matters: GPU-hours here, GPU-minutes in KAI's query, or decayed GPU-hours alike.

The Prometheus query is the one KAI builds for a sliding window, with the stack's metrics
(components/kai_scheduler/shard.py): `sum_over_time((<metric>)[<window>:1m0s])` at now,
the metric multiplied by `0.5^((<now> - time()) / <half-life seconds>)` when a half-life is
set (querySlidingTimeWindow, getExponentialDecayQuery). Each queue's value is its
`queue_name` series; capacity is the first sample of its query (queryResourceCapacity).
"""

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from config.issues import ConfigError
from config.kai_scheduler.fairness import FairnessConfig, go_seconds
from config.queue_hierarchy.hierarchy import QueueTree
from fairshare.prometheus import Prometheus

QUEUE_LABEL = "queue_name"
"""The label KAI's usage database keys queues by (prometheus.go queueNameLabel @v0.16.8)."""
RESOLUTION = "1m0s"
"""KAI's default queryResolution, as Go prints a time.Duration of one minute."""
SAMPLES_PER_HOUR = 60


@dataclass(frozen=True)
class PastUsage:
    cluster_gpu_hours: float
    """The cluster's GPU capacity over the window, in GPU-hours (decayed like the queues' when KAI decays)."""
    queues: Mapping[str, float]
    """Queue -> GPU-hours it was allocated over the window; a parent's includes its children's."""
    source: str

    def shares(self) -> dict[str, float]:
        """Each queue's use as KAI's nUsage: its GPU-hours over the cluster's."""
        return {queue: hours / self.cluster_gpu_hours for queue, hours in self.queues.items()}


def with_parents(usage: Mapping[str, float], tree: QueueTree) -> dict[str, float]:
    """A parent's use is its children's, as KAI's queue-controller allocates a parent the sum of its children's
    (pkg/queuecontroller/controllers/resource_updater/resource_updater.go @v0.16.8); one given in the file wins."""
    total = dict(usage)
    for queue in reversed(tree.parents_first):
        kids = tree.children.get(queue.name, [])
        if kids and queue.name not in total:
            total[queue.name] = sum(total.get(kid.name, 0.0) for kid in kids)
    return total


def _number(value: object, where: str) -> float:
    number = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan
    if not 0 <= number < math.inf:
        raise ConfigError([f"{where}: {value!r} is not a number of GPU-hours: give a finite number >= 0"])
    return number


def usage_document(usage: PastUsage, window: str, taken_at: int) -> dict[str, object]:
    """A `--usage` file: what `python -m fairshare usage` prints, to commit as usage/<stack>.json."""
    return {
        "window": window,
        "takenAt": datetime.fromtimestamp(taken_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "clusterGpuHours": round(usage.cluster_gpu_hours, 3),
        "queues": {queue: round(hours, 3) for queue, hours in sorted(usage.queues.items())},
    }


def read_usage_file(path: Path, tree: QueueTree) -> PastUsage:
    """`--usage FILE`: {"clusterGpuHours": H, "queues": {queue: GPU-hours}} (examples/usage.json); `window` and
    `takenAt`, as `python -m fairshare usage` writes them, say where the numbers come from."""
    try:
        document = json.loads(path.read_text())
    except OSError as error:
        raise ConfigError([f"--usage {path}: cannot be read ({error.strerror})"]) from None
    except json.JSONDecodeError as error:
        raise ConfigError([f"--usage {path} is not valid JSON: {error}"]) from None
    if not isinstance(document, dict) or not isinstance(document.get("queues"), dict):
        raise ConfigError(
            [f'--usage {path}: give {{"clusterGpuHours": H, "queues": {{queue: GPU-hours}}}} (examples/usage.json)']
        )
    cluster = _number(document.get("clusterGpuHours"), f"--usage {path}: clusterGpuHours")
    if cluster == 0:
        raise ConfigError([f"--usage {path}: clusterGpuHours is 0: the cluster had no GPUs in the window"])
    queues = {}
    for name, hours in document["queues"].items():
        if name not in tree.index:
            raise ConfigError([f"--usage {path}: {name!r} is not a queue of the stack: {', '.join(tree.index)}"])
        queues[name] = _number(hours, f"--usage {path}: queues.{name}")
        if queues[name] > cluster * (1 + 1e-9):
            raise ConfigError(
                [f"--usage {path}: queues.{name} = {hours:g} GPU-hours is more than the cluster's {cluster:g}"]
            )
    when = " ".join(f"{key} {document[key]}" for key in ("window", "takenAt") if key in document)
    return PastUsage(cluster, with_parents(queues, tree), f"{path}, {when}" if when else str(path))


def decay(fairness: FairnessConfig, now: int) -> str | None:
    """getExponentialDecayQuery: a sample at t weighs 0.5^((now - t) / half-life)."""
    if fairness.half_life_period is None:
        return None
    return f"0.5^(({now} - time()) / {go_seconds(fairness.half_life_period):f})"


def usage_query(metric: str, fairness: FairnessConfig, now: int) -> str:
    """KAI's sliding-window query for one metric (querySlidingTimeWindow @v0.16.8)."""
    weight = decay(fairness, now)
    decayed = metric if weight is None else f"(({metric}) * ({weight}))"
    return f"sum_over_time(({decayed})[{fairness.window_size}:{RESOLUTION}])"


def read_usage_prometheus(
    prometheus: Prometheus, fairness: FairnessConfig, *, allocation: str, capacity: str, now: int, tree: QueueTree
) -> PastUsage:
    """What KAI's usage database would read now, in GPU-hours (its sums are of one sample a minute)."""
    capacity_vector = prometheus.query(usage_query(capacity, fairness, now), now)
    if not capacity_vector or capacity_vector[0][1] <= 0:
        raise ConfigError(
            [
                f"{prometheus.url} has no GPU capacity for the window ({capacity}): KAI would fail the same way "
                "and use no usage at all"
            ]
        )
    queues = {}
    for labels, value in prometheus.query(usage_query(allocation, fairness, now), now):
        name = labels.get(QUEUE_LABEL, "")
        if name in tree.index:
            queues[name] = value / SAMPLES_PER_HOUR
    window = f"the last {fairness.window_size} from {prometheus.url}"
    return PastUsage(capacity_vector[0][1] / SAMPLES_PER_HOUR, with_parents(queues, tree), window)

"""`python -m fairshare cost`: what each queue used over a window, in GPU-hours and money.

The GPUs KAI allocated to each leaf queue (its queue-controller's gauge, fractions
included) are read as a range series from Prometheus and integrated over the window.
A parent's allocation already includes its children's, so parents are shown as the
subtotals of their leaves and never added in twice. Mean utilisation comes from
dcgm-exporter, which sees whole-GPU pods only (see fairshare/queries.py).
"""

import time
from collections.abc import Mapping
from dataclasses import dataclass

from config.issues import ConfigError
from config.queue_hierarchy.hierarchy import QueueTree
from config.queue_hierarchy.queues import QueueConfig
from config.upstream import KAI_QUEUE_ALLOCATED_GPUS, KAI_QUEUE_LABEL
from fairshare import queries
from fairshare.prometheus import Prometheus, integral_hours, mean, step_for, window_seconds
from fairshare.table import aligned


@dataclass(frozen=True)
class QueueCost:
    name: str
    depth: int
    leaf: bool
    gpu_hours: float
    cost: float
    share: float
    """Of the leaves' total GPU-hours."""
    utilisation: float | None
    """Mean GPU utilisation (%) of the queue's whole-GPU pods; None without such series."""


@dataclass(frozen=True)
class CostReport:
    window: str
    price_per_gpu_hour: float
    queues: list[QueueCost]

    def to_data(self) -> dict[str, object]:
        return {
            "window": self.window,
            "pricePerGpuHour": self.price_per_gpu_hour,
            "queues": {q.name: {"gpuHours": round(q.gpu_hours, 6), "cost": round(q.cost, 6)} for q in self.queues},
        }


def _depths(tree: QueueTree) -> dict[str, int]:
    depth: dict[str, int] = {}
    for queue in tree.parents_first():
        depth[queue.name] = 0 if queue.parent_queue is None else depth[queue.parent_queue] + 1
    return depth


def _leaves_under(tree: QueueTree, name: str) -> list[str]:
    kids = tree.children[name]
    return [name] if not kids else [leaf for kid in kids for leaf in _leaves_under(tree, kid.name)]


def cost_report(
    queues: list[QueueConfig],
    gpu_hours: Mapping[str, float],
    utilisation: Mapping[str, float],
    *,
    window: str,
    price: float,
) -> CostReport:
    """Leaves as measured, parents as the sum of their leaves, in config order, depth first."""
    tree = QueueTree(queues)
    depths = _depths(tree)
    total = sum(gpu_hours.get(leaf, 0.0) for leaf in tree.leaves)
    rows = []
    for queue in _depth_first(tree):
        leaves = _leaves_under(tree, queue.name)
        hours = sum(gpu_hours.get(leaf, 0.0) for leaf in leaves)
        rows.append(
            QueueCost(
                name=queue.name,
                depth=depths[queue.name],
                leaf=tree.is_leaf(queue.name),
                gpu_hours=hours,
                cost=hours * price,
                share=hours / total if total else 0.0,
                utilisation=utilisation.get(queue.name) if tree.is_leaf(queue.name) else None,
            )
        )
    return CostReport(window=window, price_per_gpu_hour=price, queues=rows)


def _depth_first(tree: QueueTree) -> list[QueueConfig]:
    ordered: list[QueueConfig] = []

    def visit(queue: QueueConfig) -> None:
        ordered.append(queue)
        for kid in tree.children[queue.name]:
            visit(kid)

    for root in (q for q in tree.queues if q.parent_queue is None):
        visit(root)
    return ordered


def measure(
    prometheus: Prometheus, queues: list[QueueConfig], window: str, *, now: float | None = None
) -> tuple[dict[str, float], dict[str, float]]:
    """GPU-hours and mean utilisation per leaf queue over the window ending now."""
    seconds = window_seconds(window)
    end = time.time() if now is None else now
    start, step = end - seconds, step_for(seconds)
    leaves = QueueTree(queues).leaves
    selector = "|".join(leaves)
    allocated = {
        series.labels.get(KAI_QUEUE_LABEL, ""): series.samples
        for series in prometheus.query_range(queries.allocated(selector), start, end, step)
    }
    missing = [leaf for leaf in leaves if leaf not in allocated]
    if missing:
        raise ConfigError(
            [
                f"Prometheus has no {KAI_QUEUE_ALLOCATED_GPUS} series for {', '.join(missing)} in the last {window}: "
                "is KAI's queue-controller scraped (gpu-tenancy:observability), and does the stack match the cluster?"
            ]
        )
    gpu_hours = {leaf: integral_hours(allocated[leaf], step) for leaf in leaves}
    utilisation = {}
    for series in prometheus.query_range(queries.utilisation(selector), start, end, step):
        value = mean(series.samples)
        if value is not None:
            utilisation[series.labels.get(queries.KSM_QUEUE_LABEL, "")] = value
    return gpu_hours, utilisation


def render_cost(report: CostReport) -> str:
    header = ["queue", "GPU-hours", "cost", "share", "mean util"]
    rows = [header]
    for q in report.queues:
        util = "" if q.utilisation is None else f"{q.utilisation:.0f}%"
        name = "  " * q.depth + q.name
        rows.append([name, f"{q.gpu_hours:.2f}", f"{q.cost:.2f}", f"{q.share:.0%}", util])
    lines = aligned(rows)
    lines.append("")
    lines.append(
        f"Last {report.window} at {report.price_per_gpu_hour:g} per GPU-hour. Parents are their leaves' subtotals. "
        "Mean utilisation covers whole-GPU pods only: a GPU fraction's use shows under KAI's reservation pod."
    )
    return "\n".join(lines)

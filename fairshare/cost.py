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
from fairshare.prometheus import MIN_STEP_SECONDS, Prometheus, integral_hours, mean, step_for, window_seconds
from fairshare.table import aligned


@dataclass(frozen=True)
class QueueCost:
    name: str
    depth: int
    leaf: bool
    gpu_hours: float
    cost: float | None
    """GPU-hours times the price; None when no price was given."""
    share: float
    """Of the leaves' total GPU-hours."""
    utilisation: float | None
    """Mean GPU utilisation (%) of the queue's whole-GPU pods; None without such series."""


@dataclass(frozen=True)
class Coverage:
    """What the data covers of the window asked for: Prometheus keeps what its retention allows."""

    window_seconds: int
    first_sample: float | None
    """When the earliest series starts; None without data."""
    end: float

    @property
    def covered_seconds(self) -> float:
        return 0.0 if self.first_sample is None else self.end - self.first_sample

    @property
    def short(self) -> bool:
        """The data starts later than the window by more than a scrape-and-step's slack."""
        return self.covered_seconds < self.window_seconds - 2 * MIN_STEP_SECONDS


@dataclass(frozen=True)
class Measurement:
    gpu_hours: dict[str, float]
    utilisation: dict[str, float]
    coverage: Coverage
    notes: list[str]
    """What the report could not do, each a line: e.g. utilisation that could not be read."""


@dataclass(frozen=True)
class CostReport:
    window: str
    price_per_gpu_hour: float | None
    queues: list[QueueCost]
    coverage: Coverage | None = None
    notes: tuple[str, ...] = ()

    @property
    def period(self) -> str:
        """What the figures are over: the window, or, when the data starts later, only what it covers."""
        if self.coverage is None or not self.coverage.short:
            return f"Last {self.window}"
        days = self.coverage.covered_seconds / 86400
        since = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(self.coverage.first_sample or 0))
        return f"{self.window} asked, but the data covers only the last {days:.1f} days (since {since})"

    def to_data(self) -> dict[str, object]:
        data: dict[str, object] = {"window": self.window}
        if self.price_per_gpu_hour is not None:
            data["pricePerGpuHour"] = self.price_per_gpu_hour
        data["queues"] = {
            q.name: {"gpuHours": round(q.gpu_hours, 6), **({} if q.cost is None else {"cost": round(q.cost, 6)})}
            for q in self.queues
        }
        if self.coverage is not None and self.coverage.first_sample is not None:
            data["coveredSeconds"] = round(self.coverage.covered_seconds)
            data["coveredFrom"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.coverage.first_sample))
        if self.notes:
            data["notes"] = list(self.notes)
        return data


def _depths(tree: QueueTree) -> dict[str, int]:
    depth: dict[str, int] = {}
    for queue in tree.parents_first:
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
    price: float | None,
    coverage: Coverage | None = None,
    notes: tuple[str, ...] = (),
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
                cost=None if price is None else hours * price,
                share=hours / total if total else 0.0,
                utilisation=utilisation.get(queue.name) if tree.is_leaf(queue.name) else None,
            )
        )
    return CostReport(window=window, price_per_gpu_hour=price, queues=rows, coverage=coverage, notes=notes)


def _depth_first(tree: QueueTree) -> list[QueueConfig]:
    ordered: list[QueueConfig] = []

    def visit(queue: QueueConfig) -> None:
        ordered.append(queue)
        for kid in tree.children[queue.name]:
            visit(kid)

    for root in (q for q in tree.queues if q.parent_queue is None):
        visit(root)
    return ordered


def measure(prometheus: Prometheus, queues: list[QueueConfig], window: str, *, now: float | None = None) -> Measurement:
    """GPU-hours and mean utilisation per leaf queue over the window ending now, and what the data covers.

    GPU-hours come from KAI's allocation gauge alone; utilisation needs dcgm-exporter and kube-state-metrics as
    well, and a failure to read it is a note, never a report without GPU-hours.
    """
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
    firsts = [samples[0][0] for samples in allocated.values() if samples]
    coverage = Coverage(seconds, min(firsts) if firsts else None, end)
    utilisation: dict[str, float] = {}
    notes: list[str] = []
    try:
        for series in prometheus.query_range(queries.utilisation(selector), start, end, step):
            value = mean(series.samples)
            if value is not None:
                utilisation[series.labels.get(queries.KSM_QUEUE_LABEL, "")] = value
    except ConfigError as error:
        notes.append(f"mean utilisation could not be read ({'; '.join(error.problems)}); GPU-hours are complete")
    return Measurement(gpu_hours, utilisation, coverage, notes)


def render_cost(report: CostReport) -> str:
    priced = report.price_per_gpu_hour is not None
    rows = [["queue", "GPU-hours", *(["cost"] if priced else []), "share", "mean util"]]
    for q in report.queues:
        util = "" if q.utilisation is None else f"{q.utilisation:.0f}%"
        name = "  " * q.depth + q.name
        cost = [] if q.cost is None else [f"{q.cost:.2f}"]
        rows.append([name, f"{q.gpu_hours:.2f}", *cost, f"{q.share:.0%}", util])
    lines = aligned(rows)
    lines.append("")
    at_price = f", at {report.price_per_gpu_hour:g} per GPU-hour" if priced else ""
    lines.append(
        f"{report.period}{at_price}. Parents are their leaves' subtotals. "
        "Mean utilisation covers whole-GPU pods only: a GPU fraction's use shows under KAI's reservation pod."
    )
    lines += [f"Note: {note}." for note in report.notes]
    return "\n".join(lines)
